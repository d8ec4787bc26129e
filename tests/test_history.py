"""Incremental versions, diff, time travel, checksums, crash safety and the run lock."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest
from typer.testing import CliRunner

from flows import publish
from flows.cli import app
from flows.core import cache
from flows.core.lake import open_lake, published_versions
from flows.core.locks import run_lock
from flows.core.settings import Settings
from flows.pipeline import paperlake
from flows.publish import PublishedRows, history
from flows.publish import plan as publish_plan
from flows.publish import snapshot as publish_snapshot
from flows.publish.compaction import live_files
from flows.read import dense_search
from tests.conftest import SAMPLE_RAW, write

NEW_ABSTRACTS = [
    "We propose a retrieval benchmark for chemistry questions where a retriever selects "
    "reactions from patents and a reader answers with cited evidence; grounded systems beat "
    "closed-book models by twelve points.",
    "Sparse mixtures of experts route each token to two of sixty-four experts; a new "
    "load-balancing loss keeps every expert busy during pre-training and improves perplexity "
    "at equal compute on three corpora.",
    "We study federated learning with heterogeneous clients and show that server-side "
    "momentum removes client drift, matching centralised accuracy with one tenth of the "
    "communication rounds on image classification.",
    "Weather forecasting with graph neural networks over an icosahedral mesh reaches the skill "
    "of numerical weather prediction at ten day lead times while running in under a minute.",
    "A protein language model conditioned on structure designs enzymes whose measured activity "
    "matches natural sequences; we release the model, the data and wet-lab results for two "
    "hundred variants.",
]


LATER_ABSTRACT = (
    "Tabular foundation models pre-trained on synthetic tables classify small real datasets "
    "in one forward pass; we show where they fail on wide tables and propose a fix."
)


def first_words(abstract: str) -> str:
    """How an untitled paper is listed: its abstract's first 14 words."""
    words = abstract.split()
    return " ".join(words[:14]) + ("…" if len(words) > 14 else "")


def add_new_dump(raw):
    return write(raw / "new_dump.txt", "ICLR 2026 Papers\n\n" + "\n\n".join(NEW_ABSTRACTS) + "\n")


def cli(*args, env=None):
    """paperlake in a subprocess, as a user or a scheduler runs it."""
    from prefect.settings import PREFECT_API_URL

    full_env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value() or "", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *map(str, args)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_unchanged_new_and_edited_inputs(prefect_server, raw_copy, tmp_path):
    warehouse = tmp_path / "warehouse"
    settings = Settings(warehouse=warehouse, raw=(raw_copy,))
    first = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    assert (first.version, first.embedded, first.files_parsed) == (1, 38, 2)

    # Nothing changed: no flow work, no new version, zero embeddings.
    again = CliRunner().invoke(app, ["run", "--raw", str(raw_copy), "-w", str(warehouse)])
    assert again.exit_code == 0
    assert "up to date at version 1" in again.output and "embeddings computed: 0" in again.output
    assert paperlake(raw=[str(raw_copy)], warehouse=str(warehouse)).status == "up to date"
    assert publish.up_to_date(settings) == 1

    # Five new abstracts: exactly five embedded, the two old files not parsed again.
    add_new_dump(raw_copy)
    second = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    assert (second.version, second.embedded, second.embeddings_reused) == (2, 5, 38)
    assert second.files_parsed == 1
    change = history.diff_versions(settings, 1, 2)
    assert change.counts() == {
        "added": 5, "removed": 0, "changed": 0, "metadata_changed": 0, "sources_changed": 0,
    }  # fmt: skip
    venue = change.groups.filter(change.groups["dimension"] == "venue").row(0, named=True)
    assert (venue["papers_a"], venue["papers_b"], venue["delta"]) == (38, 43, 5)
    shown = CliRunner().invoke(app, ["diff", "1", "2", "-w", str(warehouse)])
    assert "papers +5 added, -0 removed, ~0 changed" in shown.output
    # Each added paper is listed by id and name (untitled: its abstract's first words).
    added = dict(zip(change.papers["title"], change.papers["new_id"], strict=True))
    assert sorted(added) == sorted(map(first_words, NEW_ABSTRACTS))
    chemistry = added[first_words(NEW_ABSTRACTS[0])]
    assert re.search(rf"added +│ {chemistry} │ We propose a retrieval benchmark", shown.output)

    # One abstract edited: one changed paper; each version sees its own text.
    dump = raw_copy / "new_dump.txt"
    dump.write_text(dump.read_text().replace("twelve points", "fifteen points"))
    third = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    assert (third.version, third.embedded) == (3, 1)
    change = history.diff_versions(settings, 2, 3)
    assert change.counts() == {
        "added": 0, "removed": 0, "changed": 1, "metadata_changed": 0, "sources_changed": 0,
    }  # fmt: skip
    sql = "select abstract from papers where abstract like '%closed-book%'"
    for version, words in ((2, "twelve"), (3, "fifteen")):
        with open_lake(settings, version) as con:
            (text,) = con.execute(sql).fetchone()
            assert f"by {words} points" in text
            hit = dense_search(
                con, "chemistry questions answered from patent reactions", 1, settings
            )
            assert f"by {words} points" in hit["abstract"][0]

    # A removed file: its papers leave the latest version and stay in earlier ones.
    (raw_copy / "003_1f2bd0aed823d1af.txt").unlink()
    fourth = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    assert fourth.version == 4 and fourth.papers == 24
    change = history.diff_versions(settings, 3, 4)
    # A removed paper is counted once, as removed: not again as a lost source.
    assert change.counts() == {
        "added": 0, "removed": 19, "changed": 0, "metadata_changed": 0, "sources_changed": 0,
    }  # fmt: skip
    with open_lake(settings, 3) as con:
        assert con.execute("select count(*) from papers").fetchone() == (43,)
        # A removed paper is named as the older version had it.
        removed = dict(con.execute("select paper_id, abstract from papers").fetchall())
    assert {r["old_id"]: r["title"] for r in change.papers.iter_rows(named=True)} == {
        paper_id: first_words(removed[paper_id]) for paper_id in change.papers["old_id"]
    }
    with open_lake(settings) as con:
        assert published_versions(con) == [1, 2, 3, 4]
        assert con.execute("select count(*) from neighbors").fetchone() == (240,)
        assert con.execute("select count(*) from paper_topics").fetchone() == (24,)
        runs = con.execute("select snapshot_id, embedded from runs order by 1").fetchall()
        assert runs == [(1, 38), (2, 5), (3, 1), (4, 0)]

    # Compacted: every version reads as before, from fewer files, and runs go on.
    sums = {version: history.checksums(settings, version) for version in (1, 2, 3, 4)}
    done = publish.compact(settings)
    assert done.version == 4 and done.removed > 0
    assert sum(done.files_after.values()) < sum(done.files_before.values())
    assert max(done.files_after.values()) == 1
    assert {version: history.checksums(settings, version) for version in (1, 2, 3, 4)} == sums
    write(raw_copy / "later.txt", "ICLR 2026 Papers\n\n" + LATER_ABSTRACT + "\n")
    # A run compacts by itself every compact_every versions (here each), after publishing.
    fifth = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse), compact_every=1)
    assert fifth.status == "published" and (fifth.embedded, fifth.papers) == (1, 25)
    with open_lake(settings) as con:
        assert set(live_files(con).values()) <= {0, 1}
    compacted = cache.read_record(settings.cache_path / "published" / "compacted.json")
    assert compacted["version"] == fifth.version
    assert history.diff_versions(settings, 4, fifth.version).counts() == {
        "added": 1, "removed": 0, "changed": 0, "metadata_changed": 0, "sources_changed": 0,
    }  # fmt: skip
    with open_lake(settings) as con:
        assert published_versions(con) == [1, 2, 3, 4, fifth.version]


def test_same_input_gives_same_checksums(prefect_server, sample_run, tmp_path):
    other = tmp_path / "other"
    paperlake(raw=[str(SAMPLE_RAW)], warehouse=str(other))
    version_a, tables_a, whole_a = history.checksums(sample_run.settings)
    version_b, tables_b, whole_b = history.checksums(Settings(warehouse=other))
    assert (version_a, version_b) == (1, 1)
    assert tables_a == tables_b and whole_a == whole_b
    assert set(tables_a) == set(history.CONTENT_TABLES)
    shown = CliRunner().invoke(app, ["checksum", "-w", str(other), "--format", "csv"])
    assert f"(version),{whole_a}" in shown.stdout


@pytest.mark.parametrize("point", ["before_commit", "mid_publish"])
def test_run_killed_during_publish_leaves_previous_version(
    prefect_server, raw_copy, tmp_path, point
):
    warehouse = tmp_path / "warehouse"
    settings = Settings(warehouse=warehouse)
    paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    before = history.checksums(settings)
    add_new_dump(raw_copy)

    killed = cli("run", "--raw", raw_copy, "-w", warehouse, env={"PAPERLAKE_FAULT": point})
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert history.checksums(settings) == before
    with open_lake(settings) as con:
        assert published_versions(con) == [1]
        assert con.execute("select count(*) from papers").fetchone() == (38,)

    rerun = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    assert rerun.version == 2

    # The same two runs, never interrupted, in another warehouse.
    clean_raw = tmp_path / "clean_raw"
    clean = tmp_path / "clean"
    write(
        clean_raw / "000_891c899881bf48af.txt", (raw_copy / "000_891c899881bf48af.txt").read_text()
    )
    write(
        clean_raw / "003_1f2bd0aed823d1af.txt", (raw_copy / "003_1f2bd0aed823d1af.txt").read_text()
    )
    paperlake(raw=[str(clean_raw)], warehouse=str(clean))
    add_new_dump(clean_raw)
    paperlake(raw=[str(clean_raw)], warehouse=str(clean))
    _, crashed_tables, _ = history.checksums(settings)
    _, clean_tables, _ = history.checksums(Settings(warehouse=clean))
    # Paths differ between the two raw folders; every table without paths must match.
    for table in ("embeddings", "neighbors", "duplicates", "paper_topics", "topics", "topic_terms"):
        assert crashed_tables[table] == clean_tables[table], table

    # The files the killed run wrote belong to no snapshot: the next run dropped them.
    def files(root) -> Counter:
        return Counter(p.parent.name for p in (root / "data").rglob("*.parquet"))

    assert files(warehouse) == files(clean)


def test_second_run_at_once_waits_for_the_first(tmp_path):
    settings = Settings(warehouse=tmp_path / "warehouse")
    code = (
        "import time; from flows.core.locks import run_lock\n"
        "from flows.core.settings import Settings\n"
        f"with run_lock(Settings(warehouse={str(settings.warehouse)!r})):\n"
        "    print('got it', time.time(), flush=True)"
    )
    with run_lock(settings):
        other = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        time.sleep(2)  # the other run is waiting, not refused
        assert other.poll() is None
        released = time.time()
    out, err = other.communicate(timeout=30)
    assert other.returncode == 0, err
    # It said once for whom it waited, then took the lock once the holder let go.
    assert err.count("waiting for the run holding") == 1
    assert f"pid {os.getpid()} on host {socket.gethostname()} since " in err
    got = float(out.split()[-1])
    assert released <= got < released + 10  # polled twice a second; a busy host is slower
    with run_lock(settings):
        pass  # free again once the holder is done


def test_diff_of_unknown_version_is_a_clear_error(sample_run):
    result = CliRunner().invoke(app, ["diff", "1", "9", "-w", str(sample_run.settings.warehouse)])
    assert result.exit_code == 1 and "version 9 is not a published version" in result.output


def test_a_publish_planned_from_kept_row_hashes_publishes_what_one_planned_from_the_catalog_does(
    prefect_server, raw_copy, tmp_path, monkeypatch
):
    """The same two runs into two warehouses: one plans its publish from the row hashes its
    last commit kept (as warehouses of 20,000 rows and more do), the other by comparing
    with the catalog. Every table of both versions holds the same content."""
    hashed = Settings(warehouse=tmp_path / "hashed")
    compared = Settings(warehouse=tmp_path / "compared")
    plans = ((hashed, 0), (compared, 10**12))  # HASHED_PLAN_ROWS
    planned_from_hashes = []
    plan_from_hashes = publish_plan.plan_from_hashes

    def counted(con, frames, *args, **kwargs):
        planned_from_hashes.append(sorted(frames))
        return plan_from_hashes(con, frames, *args, **kwargs)

    monkeypatch.setattr(publish_plan, "plan_from_hashes", counted)
    prepare, prepared = publish_snapshot.prepare, []

    def kept_plans(*args, **kwargs):
        prepared.append(prepare(*args, **kwargs))
        return prepared[-1]

    monkeypatch.setattr(publish_snapshot, "prepare", kept_plans)
    changes = {}

    def run_both(version: int) -> list[int]:
        calls = []
        for settings, rows in plans:
            monkeypatch.setattr(publish_snapshot, "HASHED_PLAN_ROWS", rows)
            before = len(planned_from_hashes)
            run = paperlake(raw=[str(raw_copy)], warehouse=str(settings.warehouse))
            assert run.version == version
            changes[settings.warehouse.name] = run.changes
            calls.append(len(planned_from_hashes) - before)
            with open_lake(settings, extensions=()) as con:  # what the next plan will use
                assert (PublishedRows(settings).load(con) is not None) == (rows == 0)
        return calls

    assert run_both(1) == [0, 0]  # nothing kept yet: both compare with the catalog
    assert "same" not in prepared[-1].values()
    add_new_dump(raw_copy)
    assert run_both(2) == [1, 0]
    # The compared run read from the catalog only the tables whose digest changed since
    # version 1; the others it left as they are.
    same = {name for name, mode in prepared[-1].items() if mode == "same"}
    assert same and "papers" not in same and prepared[-1]["papers"] == "merge"
    assert all(changes["hashed"][name] == [0, 0] for name in same)
    assert changes["compared"] == changes["hashed"]
    for version in (1, 2):
        _, hashed_tables, _ = history.checksums(hashed, version)
        _, compared_tables, _ = history.checksums(compared, version)
        assert hashed_tables == compared_tables, version


def test_a_paper_keeps_the_source_it_showed_and_diff_tells_its_metadata_and_sources(
    prefect_server, tmp_path
):
    """One abstract in an ICLR dump, then also in a JSON Lines file whose name sorts first
    (NeurIPS 2023, its own id): the paper still shows the ICLR record, and diff lists the
    source it gained. Once the dump is gone it shows the JSON Lines record: diff names the
    venue, year and id that changed and the source it lost."""
    raw = tmp_path / "raw"
    abstract = NEW_ABSTRACTS[1]
    write(raw / "iclr.txt", "ICLR 2026 Papers\n\n" + "\n\n".join(NEW_ABSTRACTS[:3]) + "\n")
    warehouse = tmp_path / "warehouse"

    def run() -> int:
        return paperlake(raw=[str(raw)], warehouse=str(warehouse)).version

    assert run() == 1
    line = {"id": "2307.01234", "abstract": abstract, "venue": "NeurIPS", "year": 2023}
    write(raw / "000_also.jsonl", json.dumps(line) + "\n")
    assert run() == 2
    (raw / "iclr.txt").write_text("ICLR 2026 Papers\n\n" + "\n\n".join(
        [NEW_ABSTRACTS[0], NEW_ABSTRACTS[2]]) + "\n")  # fmt: skip
    assert run() == 3
    settings = Settings(warehouse=warehouse)
    with open_lake(settings) as con:
        shown = "select venue, year, external_id from papers at (version => {}) where abstract = ?"
        assert con.execute(shown.format(2), [abstract]).fetchone() == ("ICLR", 2026, None)
        assert con.execute(shown.format(3), [abstract]).fetchone() == (
            "NeurIPS",
            2023,
            "2307.01234",
        )
        sources = con.execute(
            "with s as (from paper_sources at (version => 2)), "
            "p as (from papers at (version => 2)) "
            "select s.source_path, s.venue, s.year, s.external_id from s join p using (paper_id) "
            "where p.abstract = ? order by 1",
            [abstract],
        ).fetchall()
    assert [(p.rsplit("/", 1)[1], v, y, i) for p, v, y, i in sources] == [
        ("000_also.jsonl", "NeurIPS", 2023, "2307.01234"),
        ("iclr.txt", "ICLR", 2026, None),
    ]
    one_two = history.diff_versions(settings, 1, 2)
    assert one_two.metadata.height == 0
    assert [(r["change"], r["source_path"].rsplit("/", 1)[1]) for r in
            one_two.sources.iter_rows(named=True)] == [("gained", "000_also.jsonl")]  # fmt: skip
    two_three = history.diff_versions(settings, 2, 3)
    assert sorted(two_three.metadata.select("field", "old", "new").rows()) == [
        ("external_id", None, "2307.01234"),
        ("venue", "ICLR", "NeurIPS"),
        ("year", "2026", "2023"),
    ]
    assert [(r["change"], r["source_path"].rsplit("/", 1)[1]) for r in
            two_three.sources.iter_rows(named=True)] == [("lost", "iclr.txt")]  # fmt: skip
    assert two_three.counts() | {} == {
        "added": 0, "removed": 0, "changed": 0, "metadata_changed": 1, "sources_changed": 1,
    }  # fmt: skip
    printed = CliRunner().invoke(app, ["diff", "2", "3", "-w", str(warehouse)],
                                 env={"COLUMNS": "160"})  # fmt: skip
    assert printed.exit_code == 0, printed.output
    assert "new metadata: 1, new sources: 1" in printed.output
    assert "NeurIPS" in printed.output and "lost" in printed.output


def test_a_raw_abstract_that_changes_while_its_clean_text_stays_is_published_as_read(
    prefect_server, tmp_path, monkeypatch
):
    """The run holds the raw abstracts' hashes, not the texts (flows/core/held.py): a
    raw abstract edited where cleaning hides the edit (spaces) changes that one papers row,
    and the version publishes the text as read, planned from kept row hashes and from the
    catalog's rows alike, its rows filled with their texts a slice at a time."""
    raw = tmp_path / "raw"
    spaced = NEW_ABSTRACTS[1].replace("two of", "two  of")
    others = [NEW_ABSTRACTS[0], *NEW_ABSTRACTS[2:]]
    write(raw / "iclr.txt", "ICLR 2026 Papers\n\n" + "\n\n".join(others) + "\n")
    monkeypatch.setattr(publish_snapshot, "HASHED_PLAN_ROWS", 0)
    monkeypatch.setattr(publish_plan, "FILL_ROWS", 2)  # filled and staged in slices
    for name in ("kept", "catalog"):
        settings = Settings(warehouse=tmp_path / name)
        one = write(raw / "one.txt", "ICLR 2026 Papers\n\n" + NEW_ABSTRACTS[1] + "\n")
        assert paperlake(raw=[str(raw)], warehouse=str(settings.warehouse)).version == 1
        one.write_text(one.read_text().replace(NEW_ABSTRACTS[1], spaced))
        if name == "catalog":  # no kept hashes: the catalog's rows are hashed instead
            (settings.cache_path / "published" / "stamp.json").unlink()
        run = paperlake(raw=[str(raw)], warehouse=str(settings.warehouse))
        assert run.version == 2 and run.changes["papers"] == [1, 1], name
        with open_lake(settings) as con:
            rows = con.execute(
                "select abstract, abstract_raw from papers order by paper_id"
            ).fetchall()
        assert sorted(raw_text.strip() for _, raw_text in rows) == sorted([spaced, *others]), name
        assert sorted(clean for clean, _ in rows) == sorted(NEW_ABSTRACTS), name
