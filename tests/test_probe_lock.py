"""probes.lock.gpu_lock: one probe per GPU, across processes and across open files."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from probes.errors import LockBusy
from probes.lock import gpu_lock, lock_path

KEY = "GPU-00000000-fake-h200"
REPO = Path(__file__).resolve().parents[1]

HOLDER = textwrap.dedent(
    """
    import sys
    from probes.lock import gpu_lock
    with gpu_lock(sys.argv[1], directory=sys.argv[2], wait_s=0):
        print("held", flush=True)
        sys.stdin.read()  # holds the lock until the test closes our stdin
    """
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock on KEY in tmp_path."""
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, KEY, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    yield p
    if p.poll() is None:
        p.kill()
    p.wait(timeout=10)


def test_second_process_is_refused_naming_the_holder(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    said: list[str] = []
    with (
        pytest.raises(LockBusy) as info,
        gpu_lock(KEY, wait_s=0.3, directory=str(tmp_path), on_wait=said.append, poll_s=0.05),
    ):
        pytest.fail("the lock was taken while another process held it")
    message = str(info.value)
    assert f"another probe (pid {holder.pid} since " in message
    assert f"is measuring GPU {KEY}; refusing after 0.3 s" in message
    assert len(said) == 1  # told once, however many times it polled
    assert said[0].startswith(f"GPU {KEY} is being probed by pid {holder.pid} since ")
    assert said[0].endswith("; waiting up to 0.3 s")


def test_the_lock_is_free_once_the_holder_exits(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    assert holder.wait(timeout=10) == 0
    with gpu_lock(KEY, wait_s=0, directory=str(tmp_path)) as path:
        assert path.read_text().startswith(f"pid {os.getpid()} since ")


def test_the_kernel_frees_the_lock_of_a_killed_holder(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    with gpu_lock(KEY, wait_s=0, directory=str(tmp_path)):
        pass


def test_waiting_ends_when_the_holder_leaves(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    said: list[str] = []
    assert holder.stdin is not None
    leave = threading.Timer(0.3, holder.stdin.close)  # the holder leaves while we wait
    leave.start()
    try:
        with gpu_lock(KEY, wait_s=10, directory=str(tmp_path), on_wait=said.append, poll_s=0.05):
            assert holder.wait(timeout=10) == 0
    finally:
        leave.cancel()
    assert len(said) == 1


def test_another_open_file_in_the_same_process_blocks(tmp_path: Path) -> None:
    # flock belongs to the open file description: a second open() in this process is refused
    said: list[str] = []
    with gpu_lock(KEY, directory=str(tmp_path)):
        with (
            pytest.raises(LockBusy, match=f"another probe \\(pid {os.getpid()} since "),
            gpu_lock(KEY, wait_s=0, directory=str(tmp_path), on_wait=said.append),
        ):
            pytest.fail("taken twice")
        assert said == []  # wait_s=0 refuses at once, without announcing a wait
        # the refused attempt did not release the lock held by the first open file
        with pytest.raises(LockBusy), gpu_lock(KEY, wait_s=0, directory=str(tmp_path)):
            pytest.fail("taken twice")
    with gpu_lock(KEY, wait_s=0, directory=str(tmp_path)):
        pass


def test_different_gpus_do_not_block_each_other(tmp_path: Path) -> None:
    with gpu_lock("GPU-a", directory=str(tmp_path)), gpu_lock("GPU-b", directory=str(tmp_path)):
        pass


def test_an_unreadable_holder_is_named_unknown(tmp_path: Path) -> None:
    path = lock_path(KEY, str(tmp_path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held, but nothing written yet
        with (
            pytest.raises(LockBusy, match=r"another probe \(an unknown process\)"),
            gpu_lock(KEY, wait_s=0, directory=str(tmp_path)),
        ):
            pytest.fail("taken twice")
    finally:
        os.close(fd)


# (case guarded, gpu key, file name)
PATHS = [
    ("a UUID is kept as it is", "GPU-1a2b-3c", "advisor-probe-GPU-1a2b-3c.lock"),
    (
        "path separators and spaces cannot escape the directory",
        "../x/y z",
        "advisor-probe-.._x_y_z.lock",
    ),
    ("an index key", "index0", "advisor-probe-index0.lock"),
]


@pytest.mark.parametrize(
    ("key", "name"), [(k, n) for _, k, n in PATHS], ids=[c for c, _, _ in PATHS]
)
def test_lock_path(tmp_path: Path, key: str, name: str) -> None:
    assert lock_path(key, str(tmp_path)) == tmp_path / name


def test_lock_dir_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISOR_PROBE_LOCK_DIR", str(tmp_path / "locks"))
    assert lock_path("k") == tmp_path / "locks" / "advisor-probe-k.lock"
    with gpu_lock("k", wait_s=0) as path:  # the directory is created
        assert path == tmp_path / "locks" / "advisor-probe-k.lock" and path.exists()


def test_the_cli_exits_3_when_another_probe_holds_the_gpu(
    tmp_path: Path, holder: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`advisor probe` takes the lock the CLI hands to run_probe (the real gpu_lock, in the
    directory of ADVISOR_PROBE_LOCK_DIR); the holder's lock makes it refuse with exit 3."""
    import probes.probe
    from advisor.cli import app

    def run_probe(
        *args: object, lock: Callable[[str], AbstractContextManager[object]], **kw: object
    ) -> None:
        with lock(KEY):
            pytest.fail("the lock held by another process was taken")

    monkeypatch.setattr(probes.probe, "run_probe", run_probe)
    result = CliRunner().invoke(
        app,
        ["probe", "--lock-wait-s", "0"],
        env={"ADVISOR_PROBE_LOCK_DIR": str(tmp_path), "COLUMNS": "200"},
    )
    assert result.exit_code == 3
    assert f"pid {holder.pid}" in result.stderr
