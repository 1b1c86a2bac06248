"""Runtime for the course "Serving Overlap and State Handoff | 服务重叠与状态交接".

The notebooks import it like any library (``pip install -e .`` puts it on the path);
no notebook edits ``sys.path``. It holds helpers, figures and the Step 5 experiment,
never an exercise's answer or a hidden test.
"""

__all__ = ["checks", "notebook_runtime", "plotting", "project_runtime"]
