"""Catalog loader error paths that tests/test_loader.py leaves out: each problem is located by
file, entry and field, and worded so that the user can fix it without reading the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor import CatalogError, load_catalog
from advisor.errors import CatalogIssue
from tests.factories import TODAY, acc, mini_catalog_data, write_catalog


def problems(directory: Path) -> list[CatalogIssue]:
    with pytest.raises(CatalogError) as info:
        load_catalog(directory, replace=True, today=TODAY)
    return info.value.issues


def catalog_with(tmp_path: Path, name: str, text: str | bytes) -> Path:
    """The mini catalog plus one more file, `name`, holding `text`."""
    directory = write_catalog(tmp_path / "c", mini_catalog_data())
    target = directory / name
    target.write_bytes(text if isinstance(text, bytes) else text.encode())
    return directory


# (case guarded, the extra file's text, (entry, field) expected, words the message must hold)
CASES: list[tuple[str, str | bytes, tuple[str | None, str | None], list[str]]] = [
    (
        "a tab cannot indent YAML: the position is line 2, column 1 (the tab itself)",
        "accelerators:\n\t- id: x\n",
        (None, None),
        ["YAML syntax error at line 2, column 1"],
    ),
    (
        "a file that is not UTF-8 cannot be read",
        b"accelerators: []\n# \xff\xfe\n",
        (None, None),
        ["cannot read"],
    ),
    (
        "a list at the top level instead of sections",
        "- id: x\n  name: X\n",
        (None, None),
        ["top level must be a mapping of sections"],
    ),
    (
        "a section holding one entry, not a list of entries",
        "accelerators:\n  id: x\n  name: X\n",
        (None, "accelerators"),
        ["must be a list of entries"],
    ),
    (
        "an entry that is a bare string: located by section and index",
        "accelerators:\n  - just-a-name\n",
        ("accelerators[0]", None),
        ["entry must be a mapping"],
    ),
    (
        "an unknown section is answered with the closest one and the valid list",
        "instance_type:\n  - id: x\n",
        (None, None),
        [
            "unknown section 'instance_type'",
            "did you mean 'instance_types'",
            "valid: accelerators, instance_types, workloads, probe_expectations, models",
        ],
    ),
]


@pytest.mark.parametrize(
    ("text", "where", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_problem_is_located(
    tmp_path: Path, text: str | bytes, where: tuple[str | None, str | None], words: list[str]
) -> None:
    directory = catalog_with(tmp_path, "extra.yaml", text)
    (issue,) = problems(directory)  # one problem, and the good file adds none
    assert issue.file == str(directory / "extra.yaml")
    assert (issue.entry, issue.field) == where
    for word in words:
        assert word in issue.message, issue.message


def test_a_directory_named_like_a_catalog_file_cannot_be_read(tmp_path: Path) -> None:
    directory = write_catalog(tmp_path / "c", mini_catalog_data())
    (directory / "more.yaml").mkdir()  # found by the *.yaml glob, then cannot be read
    (issue,) = problems(directory)
    assert issue.file == str(directory / "more.yaml")
    assert issue.message.startswith("cannot read: ") and "Is a directory" in issue.message


def test_a_duplicate_id_in_one_file_names_that_file(tmp_path: Path) -> None:
    data = mini_catalog_data()
    data["accelerators"].append(acc("small", memory_gb=48))
    directory = write_catalog(tmp_path / "c", data)
    (issue,) = problems(directory)
    path = str(directory / "catalog.yaml")
    assert (issue.file, issue.entry, issue.field) == (path, "small", "id")
    assert issue.message == f"duplicate id (also defined in {path})"


def test_a_directory_without_yaml_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    issues = problems(tmp_path / "empty")
    assert issues[0].file == str(tmp_path / "empty")
    assert issues[0].message == "no *.yaml files found"


def test_the_rendered_error_lists_every_problem_with_its_place(tmp_path: Path) -> None:
    directory = catalog_with(tmp_path, "extra.yaml", "accelerators:\n  - just-a-name\n  - 3\n")
    with pytest.raises(CatalogError) as info:
        load_catalog(directory, replace=True, today=TODAY)
    extra = directory / "extra.yaml"
    assert str(info.value).splitlines() == [
        "invalid catalog (2 problem(s)):",
        f"  - {extra}: accelerators[0]: entry must be a mapping",
        f"  - {extra}: accelerators[1]: entry must be a mapping",
    ]
