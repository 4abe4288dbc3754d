"""Where a job's time goes: each stack sample of its main thread placed in one stage, and the
share of each stage. Pure, no I/O (the line texts come with the samples, read by probes.stacks).

A sample is placed by the first rule that holds, in this order:
1. data_loading: a frame in torch/utils/data (the DataLoader fetching a batch in this process,
   or waiting for its workers);
2. collective: a frame in torch/distributed (a collective or a barrier: waiting for the other
   ranks; NCCL's are asynchronous and show as gpu_wait where the result is read);
3. periodic: a frame saving or loading a checkpoint (torch/serialization.py), logging (the
   logging module) or writing metrics (TensorBoard, Weights & Biases, MLflow);
4. gpu_wait: a frame of torch.cuda's synchronisation (torch.cuda.synchronize, a stream's or an
   event's synchronize), a tensor printed (it is read from the GPU), or the job's line reads a
   GPU value (.item(), .tolist(), .cpu(), .numpy(), synchronize());
5. copy: the job's line copies to a device (.cuda(), .to(device / 'cuda'), .copy_(), non_blocking);
6. waiting: py-spy says the thread is idle (sleep, I/O, a lock, a queue);
7. launch: a frame inside PyTorch (its modules, autograd, optimisers queue the kernels), or the
   job's line is in native code without the GIL in a process that holds a GPU context (a torch
   operator at the job's line: a launch, or a launch waiting for room in the GPU's queue);
8. host_compute: the job's own code, running (its Python, or native code it called);
9. other: no Python frame.
Samples inside an import (the job's start-up) are counted apart and left out of the shares.

The rules read PyTorch's and Python's module paths and call names, which are stable across
releases (torch/utils/data/dataloader.py, torch/cuda/__init__.py:synchronize since torch 1.x).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from probes.stacks import Frame, StackSample, ThreadStack
from probes.stage_report import Stage, StageReport, StageShare, StageSite

TOP_SITES = 3
# Installed packages, the standard library, and the doctor's own --torch hook (probes/doctor_hook:
# it wraps torch's factories, so from a source checkout its frame would pass for the job's line).
_LIBRARY = re.compile(r"/(site|dist)-packages/|/lib/python3\.\d+/|^<|/probes/doctor_hook/")
_STARTUP = re.compile(r"^<frozen importlib")
_DATA = "/torch/utils/data/"
_DISTRIBUTED = "/torch/distributed/"
_IN_PROCESS_FETCH = "/torch/utils/data/_utils/fetch.py"
_PERIODIC = re.compile(
    r"/torch/serialization\.py$|/logging/__init__\.py$|/torch/utils/tensorboard/|/wandb/|/mlflow/"
)
_SYNC_FRAMES = {
    "/torch/cuda/__init__.py": {"synchronize"},
    "/torch/cuda/streams.py": {"synchronize", "query"},
    "/torch/_tensor.py": {"__repr__", "__format__", "__str__"},
}
_SYNC_LINE = re.compile(r"\.item\(\)|\.tolist\(\)|\.cpu\(\)|\.numpy\(\)|synchronize\(")
_COPY_LINE = re.compile(r"\.cuda\(|\.to\([^)]*(cuda|device)|\.copy_\(|non_blocking")
_TORCH = "/torch/"


def is_library(frame: Frame) -> bool:
    """A frame of an installed package or of the standard library, not of the job."""
    return bool(_LIBRARY.search(frame.filename))


def job_frame(frames: Sequence[Frame]) -> Frame | None:
    """The innermost frame of the job's own code."""
    return next((f for f in frames if not is_library(f)), None)


def site_of(frame: Frame) -> str:
    return f"{frame.filename}:{frame.line}"


def is_startup(thread: ThreadStack) -> bool:
    return any(_STARTUP.match(f.filename) for f in thread.frames)


def _sync_frame(f: Frame) -> bool:
    return any(f.filename.endswith(p) and f.name in names for p, names in _SYNC_FRAMES.items())


def classify(thread: ThreadStack, uses_gpu: bool) -> Stage:
    """The stage of one sample of one thread (the rules in the module's docstring, in order)."""
    frames = thread.frames
    if not frames:
        return "other"
    mine = job_frame(frames)
    code = (mine.code or "") if mine is not None else ""
    if any(_DATA in f.filename for f in frames):
        return "data_loading"
    if any(_DISTRIBUTED in f.filename for f in frames):
        return "collective"
    if any(_PERIODIC.search(f.filename) for f in frames):
        return "periodic"
    if any(_sync_frame(f) for f in frames) or _SYNC_LINE.search(code):
        return "gpu_wait"
    if _COPY_LINE.search(code):
        return "copy"
    if not thread.active:
        return "waiting"
    if any(_TORCH in f.filename for f in frames):
        return "launch"
    if mine is None:
        return "other"
    if uses_gpu and not thread.owns_gil:
        return "launch"
    return "host_compute"


def loads_in_process(thread: ThreadStack) -> bool:
    """The DataLoader fetches in this process (num_workers=0): its fetcher is on the stack."""
    return any(f.filename.endswith(_IN_PROCESS_FETCH) for f in thread.frames)


def stage_report(
    samples: Sequence[StackSample], uses_gpu: bool, interval_s: float
) -> StageReport | None:
    """Each stage's share of the main thread's samples (the job's start-up left out), with the
    job's lines that took most; None without a sample."""
    placed: list[tuple[Stage, ThreadStack]] = []
    startup = 0
    for s in samples:
        thread = s.main_thread()
        if thread is None:
            continue
        if is_startup(thread):
            startup += 1
            continue
        placed.append((classify(thread, uses_gpu), thread))
    if not placed:
        return None
    total = len(placed)
    counts = Counter(stage for stage, _ in placed)
    sites: dict[Stage, Counter[tuple[str, str | None]]] = {}
    for stage, thread in placed:
        mine = job_frame(thread.frames)
        if mine is not None:
            sites.setdefault(stage, Counter())[(site_of(mine), mine.code)] += 1
    shares = [
        StageShare(
            stage=stage,
            share=round(n / total, 4),
            samples=n,
            sites=[
                StageSite(site=site, share=round(k / total, 4), code=code)
                for (site, code), k in sites.get(stage, Counter()).most_common(TOP_SITES)
            ],
        )
        for stage, n in counts.most_common()
    ]
    loading = [t for stage, t in placed if stage == "data_loading"]
    in_process = sum(loads_in_process(t) for t in loading) * 2 > len(loading) if loading else None
    return StageReport(
        pid=samples[0].pid,
        rank=samples[0].rank,
        samples=total,
        startup_samples=startup,
        interval_s=interval_s,
        shares=shares,
        loading_in_process=in_process,
    )


def by_process(samples: Sequence[StackSample]) -> list[list[StackSample]]:
    """The samples of each process, rank order (the process sampled first when no rank). Where
    some processes are ranks, the others are left out: a launcher sampled while its ranks were
    still starting (a slow import on a busy machine) is not a rank of its own."""
    ranked = any(s.rank is not None for s in samples)
    groups: dict[int, list[StackSample]] = {}
    for s in samples:
        if s.rank is not None or not ranked:
            groups.setdefault(s.pid, []).append(s)
    first = {pid: i for i, pid in enumerate(groups)}
    ordered = sorted(
        groups.items(), key=lambda kv: (kv[1][0].rank is None, kv[1][0].rank or 0, first[kv[0]])
    )
    return [g for _, g in ordered]


def share_of(report: StageReport | None, *stages: Stage) -> float:
    """The stages' summed share (0 without a report)."""
    if report is None:
        return 0.0
    return sum(s.share for s in report.shares if s.stage in stages)


def top_site(report: StageReport, *stages: Stage) -> StageSite | None:
    """The job's line that took most within the stages."""
    found = [site for s in report.shares if s.stage in stages for site in s.sites]
    return max(found, key=lambda site: site.share, default=None)
