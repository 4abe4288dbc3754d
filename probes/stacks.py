"""The job's Python stacks, sampled from outside by py-spy (`py-spy dump --json --nonblocking`):
where its main thread is, every `interval_s`, without changing or pausing the job.

py-spy reads the job's memory (ptrace permission: the same user, with kernel.yama.ptrace_scope
at most 1 for a child, or root / CAP_SYS_PTRACE for any process). `--nonblocking` leaves the job
running while py-spy reads it, so a frame may be torn now and then; the samples are many. Each
frame carries the text of its line where the file is readable here, so that the classification
(advisor.fleet.stages) stays pure. No torch, no advisor.
"""

from __future__ import annotations

import json
import linecache
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from probes.errors import INSTALL_PROBE_EXTRA

DUMP_TIMEOUT_S = 5.0
MAX_STACK_SAMPLES = 20_000  # a long window keeps every other sample beyond this
MAX_RANKS = 16  # ranks sampled at each tick (one py-spy run each)
PTRACE_HINT = (
    "py-spy may not read the job's memory (ptrace refused): run the doctor as the job's user "
    "with kernel.yama.ptrace_scope <= 1, or as root (a container needs CAP_SYS_PTRACE)"
)


@dataclass(frozen=True)
class Frame:
    name: str  # the function
    filename: str
    line: int
    code: str | None = None  # the line's text, when the file is readable here


@dataclass(frozen=True)
class ThreadStack:
    """One thread at one sample: frames innermost first (py-spy's order)."""

    thread_id: int
    os_thread_id: int | None
    active: bool  # py-spy: running, not waiting (sleep, I/O, a lock)
    owns_gil: bool
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class StackSample:
    t_s: float
    pid: int
    threads: tuple[ThreadStack, ...]
    rank: int | None = None  # RANK in the process's environment (torchrun and the like)

    def main_thread(self) -> ThreadStack | None:
        """The process's main thread (its OS thread id is the pid), else the first listed."""
        for t in self.threads:
            if t.os_thread_id == self.pid:
                return t
        return self.threads[0] if self.threads else None


def find_py_spy() -> str | None:
    """The py-spy executable: on PATH, else beside this Python (a virtual environment's bin)."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else None


def parse_dump(text: str, pid: int, t_s: float, with_code: bool = True) -> StackSample:
    """py-spy's `dump --json` output (a list of threads) as a StackSample."""
    threads = []
    for t in json.loads(text):
        frames = tuple(_frame(f, with_code) for f in t.get("frames") or [])
        threads.append(
            ThreadStack(
                thread_id=int(t.get("thread_id") or 0),
                os_thread_id=t.get("os_thread_id"),
                active=bool(t.get("active")),
                owns_gil=bool(t.get("owns_gil")),
                frames=frames,
            )
        )
    return StackSample(t_s=t_s, pid=pid, threads=tuple(threads))


def _frame(f: dict[str, Any], with_code: bool) -> Frame:
    filename = str(f.get("filename") or "")
    line = int(f.get("line") or 0)
    code = linecache.getline(filename, line).strip() if with_code and line > 0 else ""
    return Frame(name=str(f.get("name") or "?"), filename=filename, line=line, code=code or None)


class StackError(Exception):
    """py-spy could not read the process (not Python, gone, or ptrace refused)."""


def dump(py_spy: str, pid: int, t_s: float) -> StackSample:
    """One sample of every thread of `pid`, or StackError."""
    try:
        p = subprocess.run(
            [py_spy, "dump", "--pid", str(pid), "--json", "--nonblocking", "--full-filenames"],
            capture_output=True,
            text=True,
            timeout=DUMP_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StackError(str(exc)) from None
    if p.returncode != 0:
        first = (p.stderr or p.stdout).strip().splitlines()
        raise StackError(first[0] if first else f"py-spy exit {p.returncode}")
    try:
        return parse_dump(p.stdout, pid, t_s)
    except (ValueError, TypeError, AttributeError) as exc:
        raise StackError(f"unreadable py-spy output: {exc}") from None


def is_ptrace_refusal(message: str) -> bool:
    words = message.lower()
    return "permission denied" in words or "operation not permitted" in words


def _rank(p: Any) -> int | None:
    try:
        value = p.environ().get("RANK")
    except Exception:  # gone, or another user's
        return None
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def rank_processes(procs: list[Any]) -> list[tuple[Any, int]]:
    """The ranks of a several-process job: processes with RANK in their environment whose parent
    has none (a rank's DataLoader workers inherit it), rank order, at most MAX_RANKS."""
    ranked = {p.pid: (p, _rank(p)) for p in procs}
    out = []
    for p, rank in ranked.values():
        if rank is None:
            continue
        try:
            parent = p.ppid()
        except Exception:
            continue
        if parent in ranked and ranked[parent][1] is not None:
            continue
        out.append((p, rank))
    return sorted(out, key=lambda pr: pr[1])[:MAX_RANKS]


def python_process(procs: list[Any]) -> Any | None:
    """The job's main Python process: the first of the tree (root first) that runs Python."""
    for p in procs:
        try:
            names = [p.name(), *p.cmdline()[:1]]
        except Exception:  # gone, or another user's
            continue
        if any("python" in os.path.basename(n).lower() for n in names):
            return p
    return None


@dataclass
class StackSampler:
    """Samples the main Python process of the job every `interval_s` in a background thread
    until stopped. `samples`: what py-spy read; `unmeasured`: why stacks are missing."""

    job_pids: Callable[[], list[Any]]  # psutil.Process objects of the job's tree, root first
    interval_s: float
    py_spy: str | None = field(default_factory=find_py_spy)
    samples: list[StackSample] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _start: float = 0.0
    _refused: bool = False

    def start(self) -> None:
        self._start = time.monotonic()
        if self.py_spy is None:
            self.unmeasured.append(
                "where the job's time goes (its stacks): py-spy is not installed; "
                + INSTALL_PROBE_EXTRA
            )
            return
        self._thread = threading.Thread(target=self._loop, name="doctor-stacks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=DUMP_TIMEOUT_S + 1)
        if self.py_spy is not None and not self.samples and not self._refused:
            self.unmeasured.append(
                "where the job's time goes (its stacks): no Python process of the job could be "
                f"read by py-spy ({self.errors} attempts failed)"
            )

    def _loop(self) -> None:
        assert self.py_spy is not None
        while not self._stop.wait(self.interval_s):
            self._sample_once(self.py_spy)
            if self._refused:
                return

    def _targets(self) -> list[tuple[Any, int | None]]:
        """The ranks of the job, else its main Python process."""
        try:  # never the doctor itself (a watched shell's child, say)
            procs = [p for p in self.job_pids() if p.pid != os.getpid()]
        except Exception:  # the job exited between samples
            return []
        ranks: list[tuple[Any, int | None]] = list(rank_processes(procs))
        main = python_process(procs) if not ranks else None
        return ranks or ([(main, None)] if main is not None else [])

    def _sample_once(self, py_spy: str) -> None:
        for target, rank in self._targets():
            t_s = round(time.monotonic() - self._start, 3)
            try:
                sample = dump(py_spy, target.pid, t_s)
            except StackError as exc:
                self.errors += 1
                if is_ptrace_refusal(str(exc)):
                    self._refused = True
                    self.unmeasured.append(f"where the job's time goes (its stacks): {PTRACE_HINT}")
                    return
                continue
            self.samples.append(replace(sample, rank=rank))
        if len(self.samples) > MAX_STACK_SAMPLES:
            self.samples = self.samples[::2]
