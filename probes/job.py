"""The command `advisor doctor` runs: started as a child with its output untouched, signals
forwarded, its exit code passed on, never left behind when the doctor dies.

The child runs in its own process group and, when the doctor has the terminal, is given the
terminal's foreground: Ctrl-C then reaches the job alone, once, as it would without the doctor,
and the doctor stays to write the report. A SIGINT, SIGTERM or SIGHUP sent to the doctor itself
is passed to the child's group. On Linux the child also gets SIGTERM if the doctor is killed
(prctl PR_SET_PDEATHSIG), so a SIGKILLed doctor leaves no orphan.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from probes.errors import EnvironmentProblem
from probes.report import CopySite, MadeOnHostSite, SyncSite, TorchStats

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


class CommandNotFound(EnvironmentProblem):
    def __init__(self, command: str) -> None:
        super().__init__("command_not_found", f"command not found: {command}")
        self.command = command


def resolve(command: list[str]) -> str:
    """The executable the command names, or CommandNotFound."""
    if not command:
        raise CommandNotFound("(none given)")
    name = command[0]
    found = name if os.sep in name and os.access(name, os.X_OK) else shutil.which(name)
    if found is None or os.path.isdir(found):
        raise CommandNotFound(name)
    return found


def _child_setup() -> None:
    """In the child, before exec: die with the doctor (Linux), own process group."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def exit_code(returncode: int) -> int:
    """A shell's convention: a child killed by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class Job:
    """A running child command. Use as a context manager: signals are forwarded while inside."""

    def __init__(self, command: list[str], env: Mapping[str, str] | None = None) -> None:
        self.command = command
        executable = resolve(command)
        self.process = subprocess.Popen(
            [executable, *command[1:]],
            env=dict(env) if env is not None else None,
            preexec_fn=_child_setup,  # noqa: PLW1509 - before any thread starts sampling
        )
        self._previous: dict[int, Any] = {}
        self._tty: int | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def __enter__(self) -> Job:
        for sig in FORWARDED:
            with contextlib.suppress(ValueError):  # not the main thread: no handlers
                self._previous[sig] = signal.signal(sig, self._forward)
        self._give_terminal()
        return self

    def __exit__(self, *exc: object) -> None:
        self._take_terminal_back()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if self.process.poll() is None:  # the doctor is leaving early: do not leave the job
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait()

    def _forward(self, signum: int, _frame: Any) -> None:
        self._signal(signum)

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)

    def _give_terminal(self) -> None:
        with contextlib.suppress(OSError):
            fd = sys.stdin.fileno()
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                os.tcsetpgrp(fd, self.process.pid)
                self._tty = fd

    def _take_terminal_back(self) -> None:
        if self._tty is None:
            return
        with _ignored(signal.SIGTTOU), contextlib.suppress(OSError):
            os.tcsetpgrp(self._tty, os.getpgrp())

    def wait(self, timeout: float | None = None) -> int | None:
        """The child's exit code (128 + N for signal N), or None if still running after
        `timeout` seconds."""
        try:
            return exit_code(self.process.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            return None

    def tree(self) -> list[Any]:
        """psutil.Process objects of the child and every descendant (an empty list once gone)."""
        import psutil  # type: ignore[import-untyped]

        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []


@contextlib.contextmanager
def _ignored(signum: int) -> Iterator[None]:
    previous = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signum, previous)


def hook_dir() -> str:
    """The directory of the --torch start-up hook, to put first on the job's PYTHONPATH."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "doctor_hook")


def read_torch_stats(directory: str) -> TorchStats | None:
    """What the start-up hook wrote, one file per Python process of the job, merged: counts
    summed, sites merged by line, the longest process's wall time. None: no process wrote."""
    bodies = _hook_files(directory)
    if not bodies:
        return None
    return TorchStats(
        torch_version=next((b.torch_version for b in bodies if b.torch_version), None),
        cuda_used=any(b.cuda_used for b in bodies),
        wall_s=max(b.wall_s for b in bodies),
        syncs=sum(b.syncs for b in bodies),
        sync_sites=_merged_syncs(bodies),
        h2d_copies=sum(b.h2d_copies for b in bodies),
        h2d_bytes=sum(b.h2d_bytes for b in bodies),
        h2d_pageable_bytes=sum(b.h2d_pageable_bytes for b in bodies),
        copy_sites=_merged_copies(bodies),
        made_on_host=_merged_made(bodies),
        hook_s=round(sum(b.hook_s for b in bodies), 4),
    )


def _hook_files(directory: str) -> list[TorchStats]:
    bodies = []
    for name in sorted(os.listdir(directory)):
        if name.startswith("torch-") and name.endswith(".json"):
            with contextlib.suppress(OSError, ValueError), open(os.path.join(directory, name)) as f:
                bodies.append(TorchStats.model_validate(json.load(f)))
    return bodies


# The same line in several processes: counts add, the longest span holds (_add).
def _merged_syncs(bodies: list[TorchStats]) -> list[SyncSite]:
    syncs: dict[str, list[float]] = {}
    for b in bodies:
        for s in b.sync_sites:
            _add(syncs, s.site, (s.count,), s.span_s)
    return [SyncSite(site=k, count=int(v[0]), span_s=v[-1]) for k, v in _busiest(syncs, 0)]


def _merged_copies(bodies: list[TorchStats]) -> list[CopySite]:
    copies: dict[str, list[float]] = {}
    for b in bodies:
        for c in b.copy_sites:
            _add(copies, c.site, (c.count, c.bytes, c.pageable, c.blocking), c.span_s)
    return [
        CopySite(
            site=k,
            count=int(v[0]),
            bytes=int(v[1]),
            pageable=int(v[2]),
            blocking=int(v[3]),
            span_s=v[-1],
        )
        for k, v in _busiest(copies, 1)
    ]


def _merged_made(bodies: list[TorchStats]) -> list[MadeOnHostSite]:
    made: dict[str, list[float]] = {}
    for b in bodies:
        for m in b.made_on_host:
            _add(made, m.site, (m.count, m.bytes), m.span_s)
    return [
        MadeOnHostSite(site=k, count=int(v[0]), bytes=int(v[1]), span_s=v[-1])
        for k, v in _busiest(made, 0)
    ]


def _add(into: dict[str, list[float]], site: str, counts: tuple[int, ...], span_s: float) -> None:
    entry = into.setdefault(site, [0.0] * len(counts) + [0.0])
    for i, v in enumerate(counts):
        entry[i] += v
    entry[-1] = max(entry[-1], span_s)


def _busiest(sites: dict[str, list[float]], key: int) -> list[tuple[str, list[float]]]:
    return sorted(sites.items(), key=lambda kv: kv[1][key], reverse=True)[:10]
