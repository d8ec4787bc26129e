"""The warehouse opens the same whatever its path looks like: relative, absolute, through a
symlink, from another working directory, or copied elsewhere."""

from __future__ import annotations

import shutil

from flows.lake import open_lake, published_versions
from flows.settings import Settings


def papers_and_versions(warehouse) -> tuple[int, list[int]]:
    with open_lake(Settings(warehouse=warehouse)) as con:
        return con.execute("select count(*) from papers").fetchone()[0], published_versions(con)


def test_any_spelling_of_the_warehouse_path_opens_the_same(sample_run, tmp_path, monkeypatch):
    original = sample_run.settings.warehouse.resolve()
    expected = papers_and_versions(original)
    assert expected == (38, [1])

    link = tmp_path / "link"
    link.symlink_to(original)
    assert papers_and_versions(link) == expected

    monkeypatch.chdir(original.parent)
    assert papers_and_versions(original.name) == expected  # relative, as `make run` makes it
    monkeypatch.chdir(tmp_path)
    assert papers_and_versions(original) == expected  # absolute, from elsewhere

    copy = tmp_path / "copy" / "warehouse"
    shutil.copytree(original, copy, ignore=shutil.ignore_patterns(".lock"))
    assert papers_and_versions(copy) == expected
    assert papers_and_versions("copy/warehouse") == expected
