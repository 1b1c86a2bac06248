"""One kernel serves a student's notebooks, one after another, in the grading worker.

Starting a kernel and importing the course's libraries cost about two seconds per notebook,
which is most of what grading a notebook costs. So a worker keeps one kernel for its
student (in the sandbox, under the limits of one notebook) and hands it to nbgrader's
Execute for each notebook in turn (``preprocessors.CappedExecute`` asks for it). Between two
notebooks the kernel is reset: its namespace emptied (IPython's ``reset``), figures closed,
the course runtime (``tools``) dropped from the imported modules, its working folder emptied and
entered again. Imported modules stay imported, as they do in
the judge's runner, which also serves a student's notebooks one after another: only what a
learner sees on the feedback page comes from this kernel; every score comes from the judge.

A notebook that fails (its kernel dies, or it runs out of memory) in a kernel an earlier notebook
had used runs again in a fresh kernel (job.py), so what an earlier notebook left cannot cost a later
one its points. A kernel that may not be clean is never reused: after a notebook in which it died,
ran out of memory, or had a cell stopped at the time limit, after a reset that failed, and after a
notebook that left threads or processes running, added IPython hooks or left the kernel not
answering ``kernel_info`` requests, it is killed and a fresh one is started at once, so that it
boots while this notebook's judge and feedback run."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from traitlets import DottedObjectName, Type

from .. import settings
from ..errors import GraderError

STARTUP_TIMEOUT = 60.0  # seconds for a fresh kernel to answer (nbclient waits as long)
RESET_TIMEOUT = 10.0  # seconds for a reset; a kernel still busy after that is replaced
# what nbgrader's Execute passes to a kernel it starts
HISTORY = "--HistoryManager.hist_file=:memory:"

# Runs in the kernel after a notebook: the last line empties the namespace this code runs in,
# so its own names go too. The thread count is read afterwards through user_expressions.
_RESET = """\
import os as _os, shutil as _shutil, sys as _sys
if 'matplotlib.pyplot' in _sys.modules:
    _sys.modules['matplotlib.pyplot'].close('all')
for _name in [_n for _n in _sys.modules if _n == 'tools' or _n.startswith('tools.')]:
    del _sys.modules[_name]  # the course runtime is imported afresh: a patch to it does not carry \
over
_os.chdir({cwd!r})
for _entry in _os.scandir('.'):
    if _entry.is_dir(follow_symlinks=False):
        _shutil.rmtree(_entry.path, ignore_errors=True)
    else:
        _os.unlink(_entry.path)
get_ipython().reset(new_session=True)
"""
_THREADS = "__import__('threading').active_count()"
# hooks a notebook added to what IPython runs around every cell (event callbacks, input and AST
# transformers: a reset keeps them). Those defined in the notebook (module __main__) are counted;
# the libraries' own (matplotlib's, say) are not, so an honest notebook does not cost a kernel.
_HOOKS = (
    "(lambda ip: sum(getattr(f, '__module__', None) == '__main__' or getattr(type(f), "
    "'__module__', None) == '__main__'"
    " for f in [*(g for v in ip.events.callbacks.values() for g in v), *ip.input_transformers_post,"
    " *ip.input_transformer_manager.cleanup_transforms, "
    "*ip.input_transformer_manager.line_transforms,"
    " *ip.ast_transformers]))(get_ipython())"
)


MESSAGE_CAP = 64 << 20  # bytes a kernel may send while one notebook runs (any channel, any parent)
# JSON objects and lists in one message part (as matching.MAX_JSON_NODES for files)
MAX_MESSAGE_NODES = 300_000


class OutputLimitExceeded(GraderError, RuntimeError):
    """A notebook's kernel sent more than the grader accepts: the kernel is killed, and the
    notebook fails at its own cost (grading.py reports it as ``output_limit``)."""


def kill_now(km) -> None:
    """Kill a kernel manager's kernel process at once (SIGKILL): it may be sending while nobody
    reads, so a graceful shut-down would wait on it. Through its Popen, which signals only a
    process not yet waited for: a kernel that died and was reaped has given up its process id,
    and whoever holds that id now (another batch's kernel) must not be killed in its place."""
    process = getattr(getattr(km, "provisioner", None), "process", None)
    if process is not None:
        try:
            process.kill()  # Popen.send_signal polls first and skips a process already reaped
        except OSError:
            pass


class MessageBudget:
    """Counts every message the grading process receives from a kernel, before it is decoded:
    on any channel, and whether or not it answers the cell that runs (nbclient drops those only
    after decoding them). Past ``cap`` bytes while one notebook runs, or for a message part that
    would build more than ``max_nodes`` JSON objects, the kernel is killed (``kill``) and
    OutputLimitExceeded raised. Installed on the Session of each client of the kernel
    (BudgetedKernelManager)."""

    def __init__(self, kill, cap: int = MESSAGE_CAP, max_nodes: int = MAX_MESSAGE_NODES):
        self.kill, self.cap, self.max_nodes = kill, cap, max_nodes
        self.received, self.exceeded, self.why = 0, False, ""

    def reset(self) -> None:
        self.received, self.exceeded, self.why = 0, False, ""

    def install(self, session) -> None:
        original = session.deserialize

        def deserialize(msg_list, content=True, copy=True):
            self.check(msg_list)
            return original(msg_list, content=content, copy=copy)

        session.deserialize = deserialize

    def check(self, msg_list) -> None:
        self.received += sum(len(part) for part in msg_list)
        why = None
        if self.received > self.cap:
            why = (
                f"the notebook sent more than {self.cap >> 20} MiB of output (outputs, "
                "display updates and widget messages together)"
            )
        else:
            for part in msg_list[1:5]:  # header, parent header, metadata, content: JSON
                raw = part if isinstance(part, bytes) else part.bytes
                if raw.count(b"{") + raw.count(b"[") > self.max_nodes:
                    why = (
                        f"one of its messages holds more than {self.max_nodes:,} JSON objects "
                        "and lists"
                    )
                    break
        if why:
            self.exceeded, self.why = True, f"OutputLimitExceeded: {why}; it was stopped"
            self.kill()
            raise OutputLimitExceeded(self.why)


IOPUB_TRY = 0.2  # seconds to wait for the kernel_info request's status on IOPub before asking again


class PromptClient(AsyncKernelClient):
    """jupyter_client's asynchronous client, whose ``wait_for_ready`` returns as soon as the
    kernel has answered on both channels that matter.

    jupyter_client's own waits for the reply to a ``kernel_info`` request, then for a message on
    IOPub (proof that its subscription is connected), and then reads IOPub until it has been
    quiet for 0.2 s: a wait that always runs its full length. nbclient calls it for each notebook,
    so a student's six notebooks idled 1.2 s on it. This one waits for the reply and then for a
    status (busy or idle) of one of its own requests on IOPub: the same proof, with nothing to wait
    out. When none comes within ``IOPUB_TRY`` (a subscription still joining misses it), it asks
    again, as jupyter_client does, and a late status of an earlier request counts as well. A
    message meant for another request is read and dropped on the way, as nbclient, which matches
    every message to its request, would drop it; a reply it cannot read (no protocol version, say)
    is no answer."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        sent: set[str] = set()
        while True:
            sent.add(self.kernel_info())
            if await self._answered(sent, deadline):
                return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    async def _answered(self, sent: set[str], deadline: float) -> bool:
        """Whether a reply to one of the ``sent`` requests, and then a status of one of them on
        IOPub, arrived before ``deadline`` (a kernel that sends other messages all the while is not
        waited for past it either)."""
        while True:
            try:
                reply = await self.shell_channel.get_msg(
                    timeout=max(0.0, min(1.0, deadline - time.monotonic()))
                )
            except Empty:
                return False
            if (
                reply.get("parent_header", {}).get("msg_id") in sent
                and reply.get("msg_type") == "kernel_info_reply"
            ):
                try:
                    self._handle_kernel_info_reply(reply)
                except (KeyError, TypeError, ValueError, AttributeError, IndexError):
                    return False
                break
            if time.monotonic() > deadline:
                return False
        while time.monotonic() <= deadline:
            try:
                status = await self.iopub_channel.get_msg(timeout=IOPUB_TRY)
            except Empty:
                return False
            if (
                status.get("parent_header", {}).get("msg_id") in sent
                and status.get("msg_type") == "status"
            ):
                return True
        return False


class BudgetedKernelManager(AsyncKernelManager):
    """A kernel manager whose every client counts what it receives against ``budget`` (each
    client gets a copy of the manager's Session, so the count goes on each client's copy), and
    is a ``PromptClient``."""

    budget: MessageBudget | None = None
    client_class = DottedObjectName("autograde.run.kernels.PromptClient")
    client_factory = Type(PromptClient, klass=AsyncKernelClient)

    def client(self, **kwargs):
        kc = super().client(**kwargs)
        if self.budget is not None:
            self.budget.install(kc.session)
        return kc


class StudentKernel:
    """The kernel a grading worker hands to each of its notebooks (see the module's text).

    ``box`` is the worker's sandbox (None with --no-sandbox). A kernel is started for a job folder:
    it sees that folder's ``course.toml`` (every job holds the same file) and starts in
    ``JOB/kernel`` (inside the sandbox an empty folder of its own), a folder nbgrader leaves
    alone."""

    def __init__(self, box, kernel_name: str):
        self.box, self.kernel_name = box, kernel_name
        self.cwd: Path | None = None
        self.km: AsyncKernelManager | None = None
        self.job = None
        self.runtime: Path | None = None  # the kernel's socket folder without a sandbox
        self.threads: int | None = None  # threads of a fresh kernel, once known
        self.processes = 0  # processes under a fresh kernel's launcher
        self.hooks: int | None = None  # IPython hooks (events, transformers) of a fresh kernel
        self.starts = 0
        # resets of the running kernel: how many notebooks it served before this one
        self.resets = 0
        # whether the last notebook lent a kernel ran in one an earlier notebook had used
        self.reused = False
        self.oom_noted = False
        self.budget = MessageBudget(self._kill_now)

    def _kill_now(self) -> None:
        kill_now(self.km)

    # ------------------------------------------------------------------ life cycle
    def start(self, jobdir: Path) -> None:
        """Launch a kernel for ``jobdir`` now (it boots while the worker goes on); no-op when
        one runs."""
        if self.km is not None:
            return
        # from its start: a failed check cell fails
        env = {**os.environ, settings.GRADING: "autograde"}
        self.language = settings.kernel_language(env)
        km = BudgetedKernelManager(kernel_name=self.kernel_name)
        km.budget = self.budget
        self.cwd = jobdir / "kernel"
        if self.box:
            self.job = self.box.job(
                f"{os.getpid()}-kernel-{self.starts}", course_toml=jobdir / "course.toml"
            )
            env.update(self.job.env)
            os.environ.update(self.job.env)  # nbgrader's config reads the runtime folder from here
            runtime = Path(self.job.runtime)
        else:  # --no-sandbox: a private folder of its own, removed with the kernel
            self.runtime = runtime = Path(tempfile.mkdtemp(prefix="course-kernel-"))
        # a socket file, never a TCP port: two workers starting kernels at once cannot pick the same
        # port
        km.transport = "ipc"
        km.connection_file = str(runtime / "kernel.json")
        km.ip = str(runtime / "ipc")
        self.cwd.mkdir(parents=True, exist_ok=True)
        run_sync(km.start_kernel)(extra_arguments=[HISTORY], cwd=str(self.cwd), env=env)
        self.km, self.threads, self.hooks, self.resets = km, None, None, 0
        self.starts += 1

    def use_language(self, language: str) -> None:
        """Make the running kernel speak ``language`` (the edition of the notebook it runs next)."""
        if self.km is not None and language != getattr(self, "language", None):
            self._run(
                f"__import__('os').environ[{settings.LANGUAGE!r}] = {language!r}", RESET_TIMEOUT
            )
            self.language = language

    def stop(self) -> bool:
        """Kill the kernel (no graceful shut-down: nothing in it is kept) and remove its
        sandbox job. Returns whether that job ran out of memory."""
        out_of_memory = False
        if self.km is not None:
            try:
                if run_sync(self.km.is_alive)():
                    run_sync(self.km.shutdown_kernel)(now=True)
            except Exception:  # already gone
                pass
            finally:
                try:
                    run_sync(self.km.cleanup_resources)()
                except Exception:
                    pass
            self.km = None
        if self.box and self.job is not None:
            out_of_memory = self.box.finish(self.job)
            self.job = None
        if self.runtime is not None:
            shutil.rmtree(self.runtime, ignore_errors=True)
            self.runtime = None
        return out_of_memory

    def out_of_memory(self) -> bool:
        return bool(
            self.box and self.job is not None and self.box.groups.out_of_memory(self.job.name)
        )

    # ------------------------------------------------------------------ for Execute
    def acquire(self) -> AsyncKernelManager:
        """The running kernel for the next notebook (the worker started it). A fresh kernel is first
        asked how many threads it runs, so a reset can tell when a notebook left one behind."""
        if self.km is None:
            raise RuntimeError("no kernel was started for this notebook")
        self.reused = self.resets > 0
        self.budget.reset()
        if self.threads is None:
            counts = self._run("", STARTUP_TIMEOUT)
            self.threads, self.hooks = counts.threads, counts.hooks
            self.processes = self._processes()
        return self.km

    def release(self, clean: bool) -> None:
        """After a notebook: reset the kernel for the next one, or kill it when it may not be
        clean (``clean``: the notebook ran to its end with no cell stopped at the time limit)."""
        if not clean or self.km is None or not run_sync(self.km.is_alive)() or self.out_of_memory():
            self.oom_noted = self.stop() or self.oom_noted
            return
        if not self._reset():
            self.oom_noted = self.stop() or self.oom_noted
            return
        self.resets += 1

    def after_notebook(self, next_jobdir: Path | None) -> bool:
        """Called by the worker when nbgrader has run a notebook: whether it ran out of memory.
        When the kernel was killed and a notebook follows (``next_jobdir``), a fresh kernel is
        launched for it at once, to boot while this notebook's judge and feedback run."""
        out_of_memory = self.oom_noted or self.out_of_memory()
        self.oom_noted = False
        if out_of_memory:
            self.stop()
        if next_jobdir is not None:
            self.start(next_jobdir)
        return out_of_memory

    def _reset(self) -> bool:
        """Reset the namespace, figures and working folder; False when the kernel did not
        answer in time, reported an error, runs more threads than when it was fresh, or no longer
        answers the readiness check that nbclient makes before the next notebook."""
        counts = self._run(_RESET.format(cwd=str(self.cwd)), RESET_TIMEOUT)
        threads, hooks = counts.threads, counts.hooks
        return (
            None not in (threads, hooks, self.threads, self.hooks)
            and threads <= self.threads
            and hooks <= self.hooks
            and self._processes() <= self.processes
            and self._ready()
        )

    def _ready(self) -> bool:
        """Whether the kernel answers a ``kernel_info`` request on both channels within
        RESET_TIMEOUT. A notebook can leave it deaf to them (a handler it replaced outlives
        IPython's reset); the next notebook would then wait nbclient's minute before failing."""
        kc = self.km.client()
        kc.start_channels()
        try:
            run_sync(kc.wait_for_ready)(timeout=RESET_TIMEOUT)
            return True
        except Exception:  # no answer, a flood, or anything else: not a kernel to lend again
            return False
        finally:
            kc.stop_channels()

    def _processes(self) -> int:
        """How many processes run under the kernel's launcher (the sandbox, the kernel and
        whatever the notebook started), seen from outside."""
        import psutil

        try:
            return len(psutil.Process(self.km.provisioner.pid).children(recursive=True))
        except (AttributeError, psutil.Error):
            return 1 << 30  # unknown: never reuse

    def _run(self, code: str, timeout: float) -> KernelCounts:
        """Run ``code`` in the kernel (no history, no execution count when empty) and return the
        thread and hook counts it then reports; none after ``timeout`` seconds, or when the kernel
        went over its message budget meanwhile (it was killed)."""
        kc = self.km.client()
        kc.start_channels()
        try:
            msg_id = kc.execute(
                code,
                silent=not code,
                store_history=False,
                user_expressions={"threads": _THREADS, "hooks": _HOOKS},
                allow_stdin=False,
            )
            return KernelCounts.of(run_sync(_reply)(kc, msg_id, timeout))
        # it flooded while being reset: as a kernel that did not answer (replaced)
        except OutputLimitExceeded:
            return KernelCounts()
        finally:
            kc.stop_channels()


@dataclass(frozen=True)
class KernelCounts:
    """How many threads a kernel runs and hooks it has, as it said after running code (None: it did
    not answer in time, answered with an error, or not with a number)."""

    threads: int | None = None
    hooks: int | None = None

    @classmethod
    def of(cls, reply) -> KernelCounts:
        """The counts an execute reply carries (its ``user_expressions``; None: no reply)."""

        def count(name: str) -> int | None:
            if reply is None or reply["content"].get("status") != "ok":
                return None
            value = reply["content"].get("user_expressions", {}).get(name, {})
            try:
                return int(value.get("data", {}).get("text/plain", ""))
            except (AttributeError, ValueError):
                return None

        return cls(count("threads"), count("hooks"))


async def _reply(kc, msg_id: str, timeout: float):
    """The execute reply to ``msg_id``, or None after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            msg = await kc.get_shell_msg(timeout=left)
        except Empty:
            return None
        if msg.get("parent_header", {}).get("msg_id") == msg_id:
            return msg
