# The class's JupyterHub (hub/classroom.py starts it with SERVING_OVERLAP_CLASS naming the class's
# state/class.json). nbgrader's documented hub set-up (its demos/ "one class, multiple graders"):
# real Unix users, each server spawned as its user; the learners' lab with the Assignments tab and
# Validate only; the instructor's formgrader as a hub service named after the course, reached by the
# group formgrade-<course>.
import json
import os
from pathlib import Path

c = get_config()  # noqa: F821 (provided by traitlets when the file is loaded)

room = json.loads(Path(os.environ["SERVING_OVERLAP_CLASS"]).read_text())
CLASS = Path(room["folder"])
ENV = Path(room["hub_root"]) / "env"
COURSE_ID = "serving-overlap"
ports = room["ports"]
instructor, learners = room["instructor"], room["learners"]
PATH = f"{ENV / 'bin'}:/usr/local/bin:/usr/bin:/bin"

# Everything on this machine's loopback; the hub's database and secrets in the class's root-only
# state/.
c.JupyterHub.bind_url = f"http://127.0.0.1:{ports['hub']}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{ports['internal']}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{ports['api']}"
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.db_url = f"sqlite:///{CLASS / 'state' / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(CLASS / "state" / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(CLASS / "state" / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every server it spawned

# Who may log in: local Unix accounts through PAM (the demo class's passwords). A real course puts
# its university's login here instead (an OAuthenticator, or LTI from its LMS): docs/instructors.md.
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.open_sessions = False
c.Authenticator.allowed_users = {instructor, *learners}

# Each person's server: the class's Python, as their own Unix user, in their own home (0700), with
# the Jupyter configuration of their role (hub/learner or hub/instructor, as config/<role> of the
# class).
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(ENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180  # a class logging in at once on a small machine
c.Spawner.http_timeout = 180


def role_config(spawner):
    role = "instructor" if spawner.user.name == instructor else "learner"
    spawner.environment.update(
        {
            "PATH": PATH,
            "JUPYTER_CONFIG_PATH": str(CLASS / "config" / role),
            # course_exchange: the learner's checks before a submission
            "PYTHONPATH": str(CLASS / "config" / "lib"),
        }
    )


c.Spawner.pre_spawn_hook = role_config

# formgrader as a hub service (nbgrader's documented JupyterHub set-up): a server run as the
# instructor's account, on the graded course folder (the class's grading/, the OUT of `autograde
# grade`), for the formgrade group.
c.JupyterHub.load_groups = {f"formgrade-{COURSE_ID}": {"users": [instructor]}}
c.JupyterHub.load_roles = [
    {
        "name": f"formgrade-{COURSE_ID}",
        "groups": [f"formgrade-{COURSE_ID}"],
        "scopes": [
            f"access:services!service={COURSE_ID}",
            "list:services",
            f"read:services!service={COURSE_ID}",
        ],
    },
    # nbgrader's course list asks the hub which services its user can reach
    {"name": "server", "scopes": ["inherit"]},
]
# Its server's root is the graded course folder itself, as `cd OUT && jupyter lab` opens it:
# formgrader refuses a course root outside the server's root (its "course directory root is not a
# subdirectory of the notebook server root"), and then answers every page with "Sorry, the
# formgrader encountered an error".
instructor_home = str(CLASS / "home" / instructor)
grading = str(CLASS / "grading")
c.JupyterHub.services = [
    {
        "name": COURSE_ID,
        "url": f"http://127.0.0.1:{ports['formgrader']}",
        "command": [str(ENV / "bin" / "jupyterhub-singleuser"), f"--ServerApp.root_dir={grading}"],
        "user": instructor,
        "cwd": grading,
        "environment": {
            "HOME": instructor_home,
            "PATH": PATH,
            "JUPYTERHUB_DEFAULT_URL": "/lab",
            "JUPYTER_CONFIG_PATH": str(CLASS / "config" / "grader"),
            "PYTHONPATH": str(CLASS / "config" / "lib"),
        },
        "oauth_no_confirm": True,
    }
]
