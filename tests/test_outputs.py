"""advisor.outputs: the one --output check and the one atomic writer every command uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.errors import InputError
from advisor.outputs import check_output_path, write_atomically, write_json


def test_a_directory_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        check_output_path(tmp_path, "--output")
    assert str(caught.value) == f"--output {str(tmp_path)!r} is a directory: give a file path"


def test_a_missing_directory_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        check_output_path(tmp_path / "nope" / "r.json", "--output")
    assert str(caught.value) == f"--output: directory {str(tmp_path / 'nope')!r} does not exist"


def test_a_new_file_in_an_existing_directory_is_fine(tmp_path: Path) -> None:
    check_output_path(tmp_path / "r.json", "--output")
    (tmp_path / "old.json").write_text("{}")
    check_output_path(tmp_path / "old.json", "--output")  # replacing a file is what -o does


def test_write_replaces_the_file_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    target.write_text("old")
    assert write_atomically(target, "new ü") == target
    assert target.read_bytes() == "new ü".encode()  # UTF-8 whatever the locale
    write_atomically(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_failed_write_keeps_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills half-way: the reader still finds the previous version, and no stray
    temporary file is left behind."""
    target = tmp_path / "report.json"
    target.write_text('{"old": true}')

    def half_then_full(self: Path, data: bytes) -> int:
        with self.open("wb") as f:
            f.write(data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(target, '{"new": true, "padding": "xxxxxxxxxxxxxxxx"}')
    monkeypatch.undo()
    assert target.read_text() == '{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_write_json_is_indented_with_a_final_newline(tmp_path: Path) -> None:
    target = write_json(tmp_path / "r.json", {"verdict": "pass", "checks": [1]})
    assert target.read_text() == '{\n  "verdict": "pass",\n  "checks": [\n    1\n  ]\n}\n'
    assert json.loads(target.read_text()) == {"verdict": "pass", "checks": [1]}


def test_save_report_says_why_it_could_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report that cannot be saved is said in one line; the caller prints it and exits 2."""
    from advisor.cli.common import save_report

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert save_report(blocker / "r.json", {"verdict": "pass"}) is False
    err = capsys.readouterr().err
    assert err == f"error: cannot write --output {blocker / 'r.json'}: Not a directory\n"
    assert save_report(tmp_path / "r.json", {"verdict": "pass"}) is True
    assert json.loads((tmp_path / "r.json").read_text()) == {"verdict": "pass"}
