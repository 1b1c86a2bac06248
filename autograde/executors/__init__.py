"""Where the students' jobs run: on this machine (grading.grade_locally, a pool of worker processes) or
on a Dask cluster (cluster)."""
