"""Where the students' jobs run, chosen once per batch (``grading.Executor``): on this machine
(``grading.LocalExecutor``, a pool of worker processes) or on a Dask cluster
(``cluster.ClusterExecutor``)."""

from __future__ import annotations


def executor_for(options):
    """The executor ``options`` ask for: the Dask cluster at ``options.scheduler``, else this
    machine."""
    if options.scheduler:
        from .cluster import ClusterExecutor

        return ClusterExecutor()
    from ..grading import LocalExecutor

    return LocalExecutor()
