"""Where a job's time goes (advisor.fleet.stages): the rules on single stacks, the shares over
stacks recorded from real py-spy runs of tests/jobs/ (tests/data/stacks/, paths made relative),
and py-spy for real on a live job where this machine lets it read another process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil  # type: ignore[import-untyped]
import pytest

from advisor.fleet.stages import by_process, classify, job_frame, stage_report
from probes.job import hook_dir
from probes.stacks import (
    Frame,
    StackError,
    StackSample,
    StackSampler,
    ThreadStack,
    dump,
    find_py_spy,
    is_ptrace_refusal,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "stacks"
SITE = "/venv/lib/python3.12/site-packages"


def load(name: str) -> list[StackSample]:
    out = []
    for s in json.loads((DATA / f"{name}.json").read_text()):
        threads = tuple(
            ThreadStack(
                t["thread_id"],
                t["os_thread_id"],
                t["active"],
                t["owns_gil"],
                tuple(Frame(**f) for f in t["frames"]),
            )
            for t in s["threads"]
        )
        out.append(StackSample(s["t_s"], s["pid"], threads))
    return out


def thread(*frames: Frame, active: bool = True, gil: bool = True) -> ThreadStack:
    return ThreadStack(1, 1, active, gil, frames)


def mine(line: int, code: str, name: str = "main") -> Frame:
    return Frame(name, "train.py", line, code)


def lib(path: str, name: str, line: int = 1) -> Frame:
    return Frame(name, f"{SITE}/{path}", line, None)


# --- the rules, one stack each (expected stage: the rule in the module's docstring) ----------


@pytest.mark.parametrize(
    ("stack", "uses_gpu", "stage"),
    [
        # rule 1: the DataLoader's fetcher runs the dataset in this process
        (
            thread(
                mine(9, "x = [f(v) for v in raw]", "__getitem__"),
                lib("torch/utils/data/_utils/fetch.py", "fetch"),
                lib("torch/utils/data/dataloader.py", "__next__"),
                mine(20, "for batch in loader:"),
            ),
            True,
            "data_loading",
        ),
        # rule 2: a collective waits for the other ranks (gloo's all_reduce blocks in Python)
        (
            thread(
                lib("torch/distributed/distributed_c10d.py", "all_reduce"),
                lib("torch/distributed/c10d_logger.py", "wrapper"),
                mine(25, "dist.all_reduce(t)"),
                active=False,
            ),
            True,
            "collective",
        ),
        # rule 3: torch.save under the job's checkpoint line
        (
            thread(lib("torch/serialization.py", "save"), mine(30, "torch.save(m, 'c.pt')")),
            True,
            "periodic",
        ),
        # rule 4: torch.cuda.synchronize is a Python frame; .item() is read from the job's line
        (thread(lib("torch/cuda/__init__.py", "synchronize"), mine(12, "torch.cuda.synchronize()")), True, "gpu_wait"),
        (thread(mine(14, "total += loss.item()"), gil=False), True, "gpu_wait"),
        # rule 5: a copy to the device at the job's line
        (thread(mine(15, "x = x.to(device, non_blocking=True)"), gil=False), True, "copy"),
        # rule 6: idle (time.sleep is C: the job's line, py-spy says idle)
        (thread(mine(16, "time.sleep(0.1)"), active=False, gil=False), True, "waiting"),
        # rule 7: inside torch's modules; a torch operator at the job's line without the GIL
        (thread(lib("torch/nn/modules/linear.py", "forward"), mine(17, "y = model(x)")), True, "launch"),
        (thread(mine(18, "y = a @ b"), gil=False), True, "launch"),
        # rule 8: the same line in a process with no GPU context is the host computing
        (thread(mine(18, "y = a @ b"), gil=False), False, "host_compute"),
        (thread(mine(19, "s = sum(v * v for v in xs)")), True, "host_compute"),
        # rule 9: no Python frame
        (thread(), True, "other"),
    ],
)  # fmt: skip
def test_each_rule_places_its_stack(stack: ThreadStack, uses_gpu: bool, stage: str) -> None:
    assert classify(stack, uses_gpu) == stage


def test_start_up_imports_are_left_out_of_the_shares() -> None:
    importing = thread(
        lib("torch/_ops.py", "__getattr__"), Frame("_call", "<frozen importlib._bootstrap>", 241)
    )
    working = thread(mine(19, "s = sum(v * v for v in xs)"))
    samples = [StackSample(0.1 * i, 1, (importing if i < 3 else working,)) for i in range(8)]
    report = stage_report(samples, False, 0.1)
    assert report is not None
    assert (report.samples, report.startup_samples) == (5, 3)
    assert [(s.stage, s.share) for s in report.shares] == [("host_compute", 1.0)]


# --- recorded py-spy runs of tests/jobs/ -------------------------------------------------------


def test_a_sleeping_job_is_waiting_at_its_sleep_line() -> None:
    """tests/jobs/sleepy.py: ~2,000 squares (well under a millisecond) then sleep(0.1): the
    main thread waits >99% of the time; at least 90% of 40 samples, allowing for samples torn
    by --nonblocking."""
    report = stage_report(load("sleepy"), False, 0.1)
    assert report is not None and report.samples == 40
    top = report.shares[0]
    assert top.stage == "waiting" and top.share >= 0.9
    assert top.sites[0].site == "tests/jobs/sleepy.py:15"
    assert top.sites[0].code == "time.sleep(0.1)"


def test_a_loader_without_workers_loads_in_the_main_process_at_its_transform_line() -> None:
    """tests/jobs/cpu_loader.py with num_workers=0: a 30,000-element Python list per sample,
    four samples a batch, against a 4x64 Linear: loading is the largest stage, in-process, at
    the transform (line 16)."""
    report = stage_report(load("cpu_loader_in_process"), False, 0.1)
    assert report is not None
    top = report.shares[0]
    assert top.stage == "data_loading" and top.share >= 0.5
    assert report.loading_in_process is True
    assert top.sites[0].site == "tests/jobs/cpu_loader.py:16"


def test_a_loader_with_workers_waits_for_them_in_the_main_process() -> None:
    """num_workers=1: the main thread waits in the DataLoader's queue for the one worker,
    not in the dataset's code: loading is not in-process, at the loop's line (23)."""
    report = stage_report(load("cpu_loader_workers"), False, 0.1)
    assert report is not None
    loading = next(s for s in report.shares if s.stage == "data_loading")
    assert loading.share >= 0.3
    assert report.loading_in_process is False
    assert loading.sites[0].site == "tests/jobs/cpu_loader.py:23"


# --- py-spy for real --------------------------------------------------------------------------


def _live_py_spy(pid: int) -> str:
    py_spy = find_py_spy()
    if py_spy is None:
        pytest.skip("py-spy is not installed (the probe extra)")
    for _ in range(50):  # the interpreter needs a moment before py-spy can find it
        try:
            dump(py_spy, pid, 0.0)
            return py_spy
        except StackError as exc:
            if is_ptrace_refusal(str(exc)):
                pytest.skip(f"this machine refuses ptrace to py-spy: {exc}")
            time.sleep(0.1)
    pytest.fail("py-spy never read the job")


def test_py_spy_samples_a_live_sleeping_job_as_waiting() -> None:
    job = subprocess.Popen([sys.executable, str(ROOT / "tests" / "jobs" / "sleepy.py"), "30"])
    try:
        _live_py_spy(job.pid)
        sampler = StackSampler(lambda: [psutil.Process(job.pid)], 0.05)
        sampler.start()
        deadline = time.monotonic() + 60
        while len(sampler.samples) < 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        sampler.stop()
    finally:
        job.kill()
        job.wait()
    report = stage_report(sampler.samples, False, 0.05)
    assert report is not None and report.samples >= 20
    waiting = next(s for s in report.shares if s.stage == "waiting")
    assert waiting.share >= 0.8  # ~99.8% by the program's design; torn samples allowed
    assert waiting.sites[0].site.endswith("tests/jobs/sleepy.py:15")


def test_the_doctors_own_hook_is_never_the_jobs_line() -> None:
    """Under --torch the hook wraps torch's factories: from a source checkout (no site-packages in
    its path) its frame sits innermost above the job's; the job's line is the caller's."""
    hook = Frame("wrapper", str(Path(hook_dir()) / "sitecustomize.py"), 155)
    mine = Frame("load", "/home/me/train/input_pipeline.py", 34)
    torch_frame = Frame("randn", "/usr/lib/python3/dist-packages/torch/random.py", 9)
    assert job_frame([torch_frame, hook, mine]) == mine


def test_a_launcher_sampled_before_its_ranks_started_is_not_a_rank() -> None:
    """The launcher (no RANK) sampled for 3 readings while its two ranks imported, then the ranks:
    two groups, rank order; a job of one process (no RANK anywhere) keeps its one group."""
    launcher = [StackSample(0.1 * i, 10, ()) for i in range(3)]
    ranks = [StackSample(0.3 + 0.1 * i, 12 - i % 2, (), rank=1 - i % 2) for i in range(6)]
    groups = by_process([*launcher, *ranks])
    assert [(g[0].pid, g[0].rank, len(g)) for g in groups] == [(11, 0, 3), (12, 1, 3)]
    assert [len(g) for g in by_process(launcher)] == [3]
