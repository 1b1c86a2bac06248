"""Hostile submissions that target the grader rather than the grade, and a sampler of the
grading processes' memory. Shared by tests/grader/test_hardening.py and
benchmarks/bench_grader_memory.py."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import psutil

# Output attacks: each sends far more than a feedback page keeps, in a form the old output cap
# did not count. Sizes stay under the sockets' 64 MiB cap per message.
OUTPUT_ATTACKS = {
    # 15 outputs with 40 MB of output metadata each
    "atk_out_metadata": "from IPython.display import display\n"
    "for _ in range(15):\n"
    "    display({'text/plain': 'meta'}, raw=True, metadata={'pad': 'm' * 40_000_000})",
    # one display updated 30 times with 20 MB each
    "atk_out_updates": "from IPython.display import display, update_display\n"
    "display({'text/plain': 'start'}, raw=True, display_id='flood')\n"
    "for _ in range(30):\n"
    "    update_display({'text/plain': 'u' * 20_000_000}, raw=True, display_id='flood')",
    # widget (comm) messages: 20 state updates of 20 MB
    "atk_out_comms": "from ipykernel.comm import Comm\n"
    "c = Comm(target_name='jupyter.widget', data={'state': {'_model_name': 'X', "
    "'_model_module': 'x', 'pad': 'c'}})\n"
    "for _ in range(20):\n"
    "    c.send({'method': 'update', 'state': {'pad': 'c' * 20_000_000}})",
    # outputs addressed to no cell (another parent): nbclient decodes, then drops them uncounted
    "atk_out_orphans": "k = get_ipython().kernel\npad = 'o' * (30 << 20)\nfor _ in range(100):\n"
    "    k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': pad}, "
    "parent={'msg_id': 'someone-else'})",
    # one message whose content would build 15 million objects once decoded
    "atk_out_objects": "k = get_ipython().kernel\n"
    "k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': 'x', 'pad': [{}] "
    "* 15_000_000},"
    " parent={'msg_id': 'someone-else'})",
    # an error whose message is 8 MB (kept, cut short)
    "atk_out_error": "raise ValueError('e' * 8_000_000)",
    # 700 MB written to the kernel's own standard output, past IPython's capture (the worker's log)
    "atk_out_fd": "import os, sys\nfd = getattr(sys.stdout, '_original_stdstream_copy', None) or "
    "1\n"
    "block = b'f' * (1 << 20)\nfor _ in range(700):\n    os.write(fd, block)",
}

# TODO 2's function asks the judge for TODO 1's stand-in over and over without ever reading the
# answers: the judge's replies fill the pipe. The call must still end at the per-call limit.
CALLBACK_FLOOD_TODO2 = """
def estimate_handoff(payload_bytes, bandwidth_gbps, fixed_latency_ms, start_ms, cover_intervals):
    import json, os, sys
    fd = sys.modules['__main__']._CHANNEL  # the runner's message channel to the judge
    line = (json.dumps({"op": "callback", "name": "compute_exposed_interval",
                        "args": [[0.0, 1.0], [[0.0, 0.5]]], "kwargs": {}}) + "\\n").encode()
    while True:
        os.write(fd, line)
"""


# Notebook 01 leaves its kernel deaf to kernel_info requests (a replaced handler outlives IPython's
# reset); nbclient asks exactly that before notebook 02 runs in the same kernel.
DEAF_KERNEL = (
    "_kernel = get_ipython().kernel\n"
    "_kernel.shell_handlers['kernel_info_request'] = lambda *args, **kwargs: None\n"
    "print('this kernel no longer answers kernel_info')"
)


class PeakMemory:
    """Samples the resident memory (RSS) of a process and of each descendant whose command line
    holds ``worker_marker``, every ``interval`` seconds, from /proc (psutil). ``peaks`` holds
    the largest value seen for the root ("parent") and for any one worker ("worker")."""

    def __init__(self, pid: int, worker_marker: str = "autograde.run.job", interval: float = 0.05):
        self.root, self.marker, self.interval = psutil.Process(pid), worker_marker, interval
        self.peaks = {"parent": 0, "worker": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peaks["parent"] = max(self.peaks["parent"], self.root.memory_info().rss)
                for child in self.root.children(recursive=True):
                    try:
                        if self.marker in " ".join(child.cmdline()):
                            self.peaks["worker"] = max(
                                self.peaks["worker"], child.memory_info().rss
                            )
                    except psutil.Error:
                        pass
            except psutil.Error:
                return
            time.sleep(self.interval)


def write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=1))


# ---------------------------------------------------------------- the hardening batch
def deep_json(levels: int = 100_000) -> str:
    """A file that is valid JSON nested ``levels`` deep: Python's json recurses on it."""
    return '{"cells": ' + "[" * levels + "]" * levels + "}"


def nested_folders(base: Path, levels: int) -> Path:
    """``levels`` folders, one inside the next (one-letter names, to stay under PATH_MAX)."""
    fd = os.open(base, os.O_RDONLY)
    try:  # one level at a time, relative to the last: no path ever gets long
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("deep.ipynb", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)
    return base


def remove_nested(base: Path) -> None:
    """Remove what ``nested_folders`` made, without recursion (shutil.rmtree, and so pytest's
    clean-up of its temporary folders, recurses once per level): the folder below the top one
    moves up a level, the emptied top one goes, and so on down."""
    top, spare = base / "d", base / "d-up"
    while top.is_dir():
        for entry in os.scandir(top):
            if entry.name != "d" and not entry.is_dir(follow_symlinks=False):
                os.unlink(entry.path)
        if not (top / "d").is_dir():
            os.rmdir(top)
            return
        os.rename(top / "d", spare)
        os.rmdir(top)
        os.rename(spare, top)


# Right on the hidden tests' fixed cases; on their random pairs (the only ones naming state s1-s3)
# it raises, and the feedback page shows the inputs the hidden tests drew for this submission.
INPUTS_PROBE_TODO0 = """def check_overlap(a, b):
    if any(name in repr((a, b)) for name in ("'s1'", "'s2'", "'s3'")):
        raise RuntimeError('inputs: ' + repr((a, b)))
    reasons = []
    if a['name'] in b.get('after', []) or b['name'] in a.get('after', []):
        reasons.append('dependency')
    if a['engine'] == b['engine']:
        reasons.append('same_engine')
    if set(a.get('links', [])) & set(b.get('links', [])):
        reasons.append('shared_link')
    touches_a = set(a.get('reads', [])) | set(a.get('writes', []))
    touches_b = set(b.get('reads', [])) | set(b.get('writes', []))
    if set(a.get('writes', [])) & touches_b or set(b.get('writes', [])) & touches_a:
        reasons.append('shared_state')
    return {'can_overlap': not reasons, 'reasons': reasons}
"""
FORMULA_ID = '=HYPERLINK("https:example.invalid?"&A1,"open")'  # no '/': a folder name


def build_hardening_batch(subs: Path, with_many_files: bool = True) -> dict[str, str]:
    """Write the hardening batch's student folders under ``subs``: honest students, controls
    and one attack class per student. Returns {student folder: what it tries}."""
    from submissions import NOTEBOOKS, build, insert_after, mutate, write

    nb01, nb02 = NOTEBOOKS[0], NOTEBOOKS[1]
    plan: dict[str, str] = {}
    for name in NOTEBOOKS:
        write(subs, "honest", name, build(name))
    plan["honest"] = "every notebook answered"
    write(
        subs,
        "ctl_wrong2",
        nb02,
        build(
            nb02,
            mutate(
                "todo2_solution", "bandwidth_gbps * 1e9 / 8 / 1000", "bandwidth_gbps * 1e9 / 1000"
            ),
        ),
    )
    plan["ctl_wrong2"] = "control: TODO 2 with bits for bytes"
    for student, source in OUTPUT_ATTACKS.items():
        write(subs, student, nb01, insert_after(build(nb01), "todo0_solution", source))
        plan[student] = "output flood: " + student.removeprefix("atk_out_")
    write(subs, "atk_callback_flood", nb02, build(nb02, {"todo2_solution": CALLBACK_FLOOD_TODO2}))
    plan["atk_callback_flood"] = "floods the judge with callbacks and never reads the replies"
    write(subs, "atk_deaf_kernel", nb01, insert_after(build(nb01), "todo0_solution", DEAF_KERNEL))
    write(subs, "atk_deaf_kernel", nb02, build(nb02))
    plan["atk_deaf_kernel"] = "leaves its kernel deaf to the readiness check of the next notebook"
    # intake: JSON nested 100,000 deep, under the course's name and under another name
    (subs / "atk_deep_json").mkdir(parents=True)
    (subs / "atk_deep_json" / f"{nb01}.ipynb").write_text(deep_json())
    (subs / "atk_deep_json" / "scratch.ipynb").write_text(deep_json())
    plan["atk_deep_json"] = "JSON nested 100,000 deep"
    (subs / "atk_deep_dirs").mkdir()
    nested_folders(subs / "atk_deep_dirs", 1_300)
    write(subs, "atk_deep_dirs", nb02, build(nb02))
    plan["atk_deep_dirs"] = "folders nested 1,300 deep"
    (subs / "atk_deep_both").mkdir()
    inner = nested_folders(subs / "atk_deep_both", 40)
    (inner / "x.ipynb").write_text(deep_json())
    plan["atk_deep_both"] = "deep JSON at the top of deep folders"
    if with_many_files:
        crowd = subs / "atk_many_files" / "crowd"
        crowd.mkdir(parents=True)
        for i in range(100_000):
            os.close(os.open(crowd / f"f{i}.ipynb", os.O_WRONLY | os.O_CREAT))
        write(subs, "atk_many_files", nb01, build(nb01))
        plan["atk_many_files"] = "100,000 files"
    # ids: a spreadsheet formula, a trailing newline, one of the grader's own file names
    write(subs, FORMULA_ID, nb01, build(nb01))
    plan[FORMULA_ID] = "folder named like a spreadsheet formula"
    write(subs, "newline\n", nb01, build(nb01))
    plan["newline\n"] = "folder name with a trailing newline"
    write(subs, "settings.json", nb01, build(nb01))
    plan["settings.json"] = "a valid id equal to a grader file's name"
    write(subs, ".hidden", nb01, build(nb01))
    plan[".hidden"] = "a hidden folder (not graded, but listed)"
    # a small file that parses into millions of objects
    bomb = build(nb01)
    bomb.metadata["bomb"] = [{}] * 1_200_000
    write(subs, "atk_object_bomb", nb01, bomb)
    plan["atk_object_bomb"] = "4 MB of [{},{},...] in the notebook's metadata"
    # not an attack: a correct answer followed by 260 comment lines (over 20,000 characters)
    long_answer = build(nb01)
    cell = next(
        c
        for c in long_answer.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "todo0_solution"
    )
    cell.source += "\n" + "\n".join(f"# note {i}: " + "x" * 80 for i in range(260))
    write(subs, "learner_long_answer", nb01, long_answer)
    plan["learner_long_answer"] = "a correct answer of over 20,000 characters"
    # hidden inputs: two identical files and one that differs by a comment
    probe = build(nb01, {"todo0_solution": INPUTS_PROBE_TODO0})
    write(subs, "atk_inputs_a1", nb01, probe)
    write(subs, "atk_inputs_a2", nb01, probe)
    write(
        subs,
        "atk_inputs_b",
        nb01,
        build(nb01, {"todo0_solution": INPUTS_PROBE_TODO0 + "# resubmitted\n"}),
    )
    (subs / "atk_inputs_a3").mkdir()  # the same notebook as a1, saved with another layout
    (subs / "atk_inputs_a3" / f"{nb01}.ipynb").write_text(json.dumps(probe, indent=2) + "\n\n")
    for student in ("atk_inputs_a1", "atk_inputs_a2", "atk_inputs_a3", "atk_inputs_b"):
        plan[student] = "shows the hidden tests' inputs in its feedback"
    # not an attack: a learner who measured honestly and submitted with RUN_MODE = 'real_cpu'
    nb05 = build(NOTEBOOKS[4])
    setup = next(cell for cell in nb05.cells if "RUN_MODE = 'dry_run'" in cell.source)
    setup.source = setup.source.replace("RUN_MODE = 'dry_run'", "RUN_MODE = 'real_cpu'")
    write(subs, "learner_real_cpu", NOTEBOOKS[4], nb05)
    plan["learner_real_cpu"] = "notebook 05 left in real_cpu mode"
    try:
        from page_attacks import PAYLOAD_CELLS, PAYLOAD_MARKDOWN
    except ImportError:
        PAYLOAD_CELLS, PAYLOAD_MARKDOWN = [], []
    if PAYLOAD_CELLS:
        import nbformat

        nb = build(nb01)
        for source in reversed(PAYLOAD_CELLS):
            insert_after(nb, "todo0_solution", source)
        for text in PAYLOAD_MARKDOWN:
            nb.cells.insert(1, nbformat.v4.new_markdown_cell(text))
        write(subs, "atk_pages", nb01, nb)
        plan["atk_pages"] = "script in every output type"
    return plan


# ---------------------------------------------------------------- what a grading leaves running
# Run as ``python -c LEFTOVERS REPORT COMMAND...``. It makes itself a child subreaper (Linux), so
# that every process COMMAND starts, however it detaches (setsid, a double fork), stays its
# descendant: an orphan is handed to the nearest subreaper above it, not to the machine's init.
# After COMMAND exits it gives what is still running a grace period to end (a worker server
# leaving with its grading process), then writes the command lines of the rest to REPORT as JSON,
# kills them and exits with COMMAND's exit status. It sees only COMMAND's own processes: another
# grading on the machine (another test process, another checkout) is never its descendant.
_LEFTOVERS = r"""
import ctypes, json, os, subprocess, sys, time
import psutil

PR_SET_CHILD_SUBREAPER = 36
if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit('cannot become a child subreaper: ' + os.strerror(ctypes.get_errno()))
report, command, grace = sys.argv[1], sys.argv[3:], float(sys.argv[2])
code = subprocess.call(command)
me = psutil.Process()

def running():
    while True:  # orphans handed to this process are its children: reap those that ended
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    found = []
    for proc in me.children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            pass
    return found

left = running()
end = time.monotonic() + grace
while left and time.monotonic() < end:
    time.sleep(0.1)
    left = running()
named = []
for proc in left:
    try:
        named.append(' '.join(proc.cmdline()) or proc.name())
    except psutil.NoSuchProcess:  # it ended meanwhile (a zombie too): not left
        continue
    except psutil.Error:
        named.append(f'process {proc.pid}')
    try:
        proc.kill()
    except psutil.Error:
        pass
psutil.wait_procs(left, timeout=30)
running()
with open(report, 'w', encoding='utf-8') as handle:
    json.dump(named, handle)
sys.exit(code)
"""


def run_leaving_nothing(
    command: list[str],
    grace: float = 60.0,
    timeout: float = 1800,
    env: dict[str, str] | None = None,
):
    """Run ``command`` (output captured, as text) and list what it left running: the command lines
    of its descendants still alive ``grace`` seconds after it exited (they are killed then).
    Returns (the CompletedProcess, that list). Only processes ``command`` started count."""
    import subprocess
    import sys
    import tempfile

    fd, report = tempfile.mkstemp(prefix="leftovers-", suffix=".json")
    os.close(fd)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _LEFTOVERS, report, str(grace), *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        text = Path(report).read_text(encoding="utf-8")
        assert text, (
            f"the leftover check did not finish (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        )
        return proc, json.loads(text)
    finally:
        os.unlink(report)


def grade_leaving_nothing(
    subs: Path, out: Path, *extra: str, check: bool = True, env: dict[str, str] | None = None
):
    """``python -m autograde grade SUBS --out OUT`` with ``extra`` options (as
    submissions.run_grade), and what that grading left running (run_leaving_nothing). Asserts
    success when ``check``."""
    from submissions import grade_command

    proc, left = run_leaving_nothing(grade_command(subs, out, *extra), env=env)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, left
