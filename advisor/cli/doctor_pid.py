"""`advisor doctor --pid PID`: sample a job that is already running, without restarting or
changing it: every GPU through NVML (GPM where the GPU has it), the process and its descendants
through psutil, the main Python process's stacks through py-spy. No start-up hook can be put in
a running process, so what --torch counts is not counted, and the report says so."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from advisor.cli.doctor_stages import STACK_INTERVAL_S
from advisor.errors import InputError
from probes.job_sampler import JobSampler
from probes.nvml import Nvml
from probes.stacks import StackSampler

DEFAULT_WINDOW_S = 30.0
POLL_S = 0.2  # how often the doctor looks whether the process is still there
WITHOUT_HOOK = (
    "--pid: attached to a running process, so no --torch hook: host-device synchronisations, "
    "copies and CPU-made tensors are not counted by line (sync_bound and made_on_host cannot "
    "be found; transfer_bound rests on the PCIe counters); the stacks stand in where py-spy "
    "reads the process"
)


@dataclass
class Attached:
    command: list[str]
    created: dt.datetime
    wall_s: float
    sampled_s: float
    sampler: JobSampler
    stacks: StackSampler
    unmeasured: list[str]


def process(pid: int) -> Any:
    """The running process `pid` (psutil), or InputError naming --pid."""
    import psutil  # type: ignore[import-untyped]

    try:
        p = psutil.Process(pid)
        p.cmdline()  # readable: ours, or we are root
    except psutil.NoSuchProcess:
        raise InputError(f"--pid {pid}: no such process") from None
    except psutil.AccessDenied:
        raise InputError(
            f"--pid {pid}: not allowed to read this process (run as its user or as root)"
        ) from None
    return p


def tree_of(root: Any) -> Any:
    """A callable: the process and its descendants now, root first (empty once gone)."""
    import psutil

    def tree() -> list[Any]:
        try:
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    return tree


def attach(root: Any, nvml: Nvml | None, window_s: float | None, interval_s: float) -> Attached:
    """Sample the running process for `window_s` (DEFAULT_WINDOW_S when None), or until it
    exits."""
    window = DEFAULT_WINDOW_S if window_s is None else window_s
    tree = tree_of(root)
    try:
        command = list(root.cmdline()) or [root.name()]
    except Exception:  # gone already
        command = [f"pid {root.pid}"]
    created = dt.datetime.now(dt.UTC)
    sampler = JobSampler(nvml, tree, interval_s)
    stacks = StackSampler(tree, STACK_INTERVAL_S)
    started = time.monotonic()
    sampler.start()
    stacks.start()
    unmeasured = [WITHOUT_HOOK]
    while time.monotonic() - started < window:
        if not root.is_running():
            unmeasured.append(
                f"--pid {root.pid}: the process exited during the window (its exit code is "
                "not known to an attached doctor)"
            )
            break
        time.sleep(POLL_S)
    sampled_s = sampler.stop()
    stacks.stop()
    return Attached(
        command=command,
        created=created,
        wall_s=time.monotonic() - started,
        sampled_s=sampled_s,
        sampler=sampler,
        stacks=stacks,
        unmeasured=[*unmeasured, *sampler.unmeasured, *stacks.unmeasured],
    )
