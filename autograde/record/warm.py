"""Imported by the worker server alone (``launch.PRELOAD``): what every worker would otherwise make
again on its first notebook is made once, in the server, and shared by every worker forked from it."""

from .exporters import warm_feedback

warm_feedback()
