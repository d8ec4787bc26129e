"""The whole Prefect flow end to end: real model, real Great Expectations, real DuckLake."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import polars as pl
import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.core.lake import open_lake, published_versions
from flows.core.settings import PROJECT_ROOT, Settings
from flows.pipeline import paperlake
from flows.read import dense_search
from flows.validate import DataQualityError
from tests.conftest import SAMPLE_RAW, write


def test_sample_run_publishes_version_1(sample_run):
    summary, con = sample_run.summary, open_lake(sample_run.settings)
    assert (summary.version, summary.status, summary.dq_outcome) == (1, "published", "passed")
    assert (summary.records_seen, summary.accepted, summary.rejected, summary.papers) == (
        38,
        38,
        0,
        38,
    )
    assert published_versions(con) == [1]
    assert con.execute("select count(*) from papers").fetchone() == (38,)
    assert con.execute(
        "select count(*), min(len(embedding)), max(len(embedding)), "
        "min(list_cosine_similarity(embedding, embedding)) from embeddings"
    ).fetchone() == (38, 384, 384, pytest.approx(1.0, abs=1e-5))
    assert con.execute(
        "select count(*) from papers anti join embeddings using (paper_id)"
    ).fetchone() == (0,)
    assert con.execute("select path, records_seen, accepted, rejected from sources").fetchall() == [
        (str(SAMPLE_RAW / "000_891c899881bf48af.txt"), 19, 19, 0),
        (str(SAMPLE_RAW / "003_1f2bd0aed823d1af.txt"), 19, 19, 0),
    ]
    assert con.execute("select distinct venue, year from papers").fetchall() == [("ICLR", 2026)]
    # Every paper has k neighbours, a topic, and the topics carry readable labels.
    assert con.execute("select count(*) from neighbors").fetchone() == (380,)
    assert con.execute("select count(distinct paper_id) from paper_topics").fetchone() == (38,)
    labels = [r[0] for r in con.execute("select label from topics").fetchall()]
    assert labels and all(len(label.split(", ")) in (3, 4) for label in labels)
    runs = con.execute("select snapshot_id, papers, dq_outcome, model_id from runs").fetchall()
    assert runs == [(1, 38, "passed", "sentence-transformers/all-MiniLM-L6-v2")]
    precision, agreement = con.execute("select precision, agreement_with_fp32 from runs").fetchone()
    check = json.loads(agreement)
    if precision.endswith("bf16"):  # bf16 where the CPU has it: a sample checked against fp32
        assert check["sample"] == 8 and check["min_cosine"] >= 0.999
    elif precision == "openvino-fp32":  # else the fp32 export, checked once on this CPU kind
        assert check["checked"] == "export, on this kind of CPU"
        assert check["min_cosine"] >= 0.999
    else:
        assert precision == "fp32" and check is None
    extra = json.loads(
        con.execute(
            "select commit_extra_info from lake.snapshots() where snapshot_id = 1"
        ).fetchone()[0]
    )
    assert extra["model"]["precision"] == precision
    assert sorted(extra["inputs"]) == [
        str(SAMPLE_RAW / "000_891c899881bf48af.txt"),
        str(SAMPLE_RAW / "003_1f2bd0aed823d1af.txt"),
    ]
    assert extra["counts"]["papers"] == 38 and "embed" in extra["stage_seconds"]
    # The process's peak memory as each stage before the commit ended: a real figure,
    # never falling (a peak so far).
    stages = ["ingest", "embed", "derive", "validate"]
    peaks = [extra["stage_peak_mb"][stage] for stage in stages]
    assert sorted(extra["stage_peak_mb"]) == sorted(stages)
    assert peaks[0] > 100 and peaks == sorted(peaks)
    # Its CPU seconds a stage: embedding 38 abstracts takes the process's CPU.
    assert sorted(extra["stage_cpu_s"]) == sorted(stages) and extra["stage_cpu_s"]["embed"] > 0
    outcomes = con.execute(
        "select count(*), count(distinct suite), bool_and(success or not blocking) from dq_results"
    ).fetchone()
    assert outcomes[1] == 19 and outcomes[2] is True  # a suite for every table
    references = con.execute(
        "select count(*), bool_and(success) from dq_results "
        "where expectation = 'expect_column_values_to_be_keys_of_table'"
    ).fetchone()
    assert references == (18, True)
    message = con.execute(
        "select commit_message from lake.snapshots() where snapshot_id = 1"
    ).fetchone()[0]
    assert "38 papers from 2 files" in message


def test_search_finds_the_right_abstracts(sample_run):
    con = open_lake(sample_run.settings)
    settings = sample_run.settings
    top = dense_search(con, "optimal transport for multi-draft speculative sampling", 1, settings)
    assert "multi-draft" in top["abstract"][0]
    hits = dense_search(con, "diffusion language model decoding", 3, settings)["abstract"]
    assert any("Prophet" in a for a in hits) and any("SparseD" in a for a in hits)


def test_bad_records_rejected_duplicates_kept_and_blocking_dq_stops_publish(
    prefect_server, raw_copy, tmp_path, monkeypatch
):
    sample = (SAMPLE_RAW / "000_891c899881bf48af.txt").read_text().split("\n\n")
    duplicated = sample[1].strip()
    messy = write(
        raw_copy / "messy.txt",
        "ICLR 2026 Papers\n\n"
        + duplicated
        + "\n\n   \n\n"
        + "A fresh abstract on retrieval augmented generation for chemistry questions, "
        "where a retriever selects reactions and a reader answers with cited evidence "
        "from the literature of organic synthesis.\n",
    )
    warehouse = tmp_path / "warehouse"
    summary = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    assert (summary.version, summary.records_seen, summary.accepted, summary.rejected) == (
        1,
        41,
        40,
        1,
    )
    assert (summary.papers, summary.duplicate_records) == (39, 1)
    con = open_lake(Settings(warehouse=warehouse))
    assert con.execute("select source_path, line, rule from rejects").fetchall() == [
        (str(messy), 5, "empty_abstract")
    ]
    locations = con.execute(
        "select source_path, line from paper_sources where paper_id = "
        "(select paper_id from paper_sources where source_path = ? and line = 3) order by 1",
        [str(messy)],
    ).fetchall()
    assert locations == [(str(raw_copy / "000_891c899881bf48af.txt"), 3), (str(messy), 3)]
    assert con.execute(
        "select records_seen, accepted, rejected from sources where path = ?", [str(messy)]
    ).fetchone() == (3, 2, 1)
    con.close()

    # A file that names no venue or year is published with NULLs and a warning that names
    # it and the settings line that would fill them; a venue and year in a folder name count.
    no_header = write(
        raw_copy / "no_header.txt",
        "Sparse mixtures of experts route each token to two of sixty-four feed-forward experts, "
        "and a load-balancing loss keeps every expert busy during pre-training at scale.\n",
    )
    in_folder = write(
        raw_copy / "NeurIPS2023-OpenReviewData" / "oral.txt",
        "Diffusion policies for robot manipulation are distilled into a single-step policy "
        "that keeps the success rate of the teacher while acting forty times faster.\n",
    )
    summary = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    assert (summary.version, summary.papers, summary.dq_outcome) == (
        2,
        41,
        "passed with warnings",
    )
    assert summary.file_warnings == [
        f"{no_header}: of 1 accepted records, 1 no venue and 1 no year; set them in "
        f'{raw_copy / "paperlake.toml"}: files."no_header.txt" = '
        '{ venue = "<venue>", year = <year> }'
    ]
    assert "papers: 1 paper has no venue" in summary.dq_warnings
    con = open_lake(Settings(warehouse=warehouse))
    assert con.execute(
        "select source_path, venue, year from papers where venue is null or venue <> 'ICLR' "
        "order by source_path"
    ).fetchall() == [(str(in_folder), "NeurIPS", 2023), (str(no_header), None, None)]
    assert con.execute(
        "select metadata_from from sources where path = ?", [str(in_folder)]
    ).fetchone() == ("path NeurIPS2023-OpenReviewData",)
    con.close()

    # A blocking failure stops the publish: vectors that are not unit length, as a broken
    # model would give, leave version 2 current, and the CLI names the failed check.
    from flows.embed import papers

    encode = papers.encode
    monkeypatch.setattr(papers, "encode", lambda *a, **k: encode(*a, **k) * 2)
    write(raw_copy / "iclr_2024" / "extra.txt", "Graph transformers " * 12 + "\n")
    # Only the new paper is embedded (the others' vectors are reused): one bad vector.
    norm = r"embeddings: 1 embedding has a norm outside 0\.999 to 1\.001"
    with pytest.raises(DataQualityError, match=norm):
        paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    result = CliRunner().invoke(app, ["run", "--raw", str(raw_copy), "--warehouse", str(warehouse)])
    assert result.exit_code == 1
    assert "run stopped before publish" in result.output
    assert re.search(norm, result.output), result.output
    assert "Traceback" not in result.output
    con = open_lake(Settings(warehouse=warehouse))
    assert published_versions(con) == [1, 2]
    assert con.execute("select count(*) from papers").fetchone() == (41,)
    dq_files = sorted((warehouse / "dq").glob("*.json"))
    assert len(dq_files) == 4  # the two published runs and the two stopped ones


def test_second_version_changes_only_what_changed(prefect_server, raw_copy, tmp_path):
    warehouse = tmp_path / "warehouse"
    paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    removed = raw_copy / "003_1f2bd0aed823d1af.txt"
    removed.unlink()
    summary = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    assert summary.version == 2
    assert summary.changes["papers"] == [19, 0]
    con = open_lake(Settings(warehouse=warehouse))
    assert con.execute("select count(*) from papers").fetchone() == (19,)
    assert con.execute("select count(*) from sources").fetchone() == (1,)
    con.close()
    old = open_lake(Settings(warehouse=warehouse), version=1)
    assert old.execute("select count(*) from papers").fetchone() == (38,)
    assert old.execute("select count(*) from sources").fetchone() == (2,)


def test_flow_run_leaves_summary_and_data_quality_artifacts(sample_run):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.core.run_record import slug

    key = slug(sample_run.settings.warehouse)
    assert key and set(key) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
    with get_client(sync_client=True) as client:
        summaries = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[f"paperlake-run-summary-{key}"])
            )
        )
        tables = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[f"paperlake-data-quality-{key}"])
            )
        )
    run_id = sample_run.summary.run_id[:8]
    summary = next(a.data for a in summaries if f"paperlake run {run_id}" in (a.data or ""))
    assert f"paperlake run {run_id}: published" in summary
    assert f"- warehouse: {sample_run.settings.warehouse}" in summary
    assert "- version: 1" in summary
    assert tables and all(a.type == "table" for a in tables)
    assert sample_run.summary.flow_run  # Prefect's name of the run, printed by the CLI


def test_run_with_nothing_usable_reports_everything_and_does_not_crash(prefect_server, tmp_path):
    raw = tmp_path / "raw"
    write(raw / "data.json", bytes(range(256)) * 8)
    write(raw / "short.txt", "ICLR 2026 Papers\n\nToo short to be an abstract.\n")
    summary = paperlake(raw=[str(raw)], warehouse=str(tmp_path / "warehouse"))
    assert (summary.version, summary.papers, summary.records_seen, summary.rejected) == (1, 0, 1, 1)
    assert summary.file_errors == [f"{raw / 'data.json'}: binary content (control bytes), not text"]
    with open_lake(Settings(warehouse=tmp_path / "warehouse")) as con:
        assert con.execute("select count(*) from papers").fetchone() == (0,)
        assert con.execute("select rule, line from rejects").fetchall() == [("too_short", 3)]


def test_the_flow_takes_every_setting_as_a_parameter():
    import inspect

    from flows.core.settings import run_parameters

    names = list(inspect.signature(paperlake.fn).parameters)
    assert sorted(names) == sorted([p.name for p in run_parameters()] + ["force"])
    assert all(
        inspect.signature(paperlake.fn).parameters[p.name].default is None for p in run_parameters()
    )


def test_second_version_updates_neighbours_as_a_fresh_search_finds_them(
    prefect_server, raw_copy, tmp_path
):
    """Version 2 updates version 1's neighbour lists (5 papers in, 19 out); what it publishes
    equals a fresh exact search over version 2's vectors."""
    import numpy as np
    import polars as pl

    from flows.derive import neighbours
    from tests.test_history import add_new_dump

    warehouse = tmp_path / "warehouse"
    paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    (raw_copy / "003_1f2bd0aed823d1af.txt").unlink()
    add_new_dump(raw_copy)
    lists = [p / "ids.parquet" for p in (warehouse / "cache" / "neighbors").glob("lists-*")]
    assert len(lists) == 1 and pl.read_parquet(lists[0])["paper_id"].n_unique() == 38
    summary = paperlake(raw=[str(raw_copy)], warehouse=str(warehouse))
    assert summary.version == 2 and summary.papers == 24
    with open_lake(Settings(warehouse=warehouse)) as con:
        published = con.execute(
            "select paper_id, neighbor_id, rank, score from neighbors order by all"
        ).pl()
        vectors = con.execute("select paper_id, embedding from embeddings order by 1").pl()
    ids = vectors["paper_id"].to_list()
    matrix = np.asarray(vectors["embedding"].to_list(), dtype=np.float32)
    top, _ = neighbours.split_candidates(
        neighbours.candidates(ids, matrix, 32, 0.95, "exact"), 10, 0.95
    )
    fresh = top.with_columns(rank=pl.int_range(1, pl.len() + 1).over("paper_id"))
    both = published.join(fresh, on=["paper_id", "neighbor_id"], how="full", suffix="_fresh")
    assert published.height == fresh.height == 24 * 10
    assert both["rank"].null_count() == both["rank_fresh"].null_count() == 0
    assert (both["rank"] == both["rank_fresh"]).all()
    assert np.allclose(both["score"], both["score_fresh"], atol=2e-6)
    assert pl.read_parquet(lists[0])["paper_id"].n_unique() == 24


def test_a_run_on_hostile_exports_and_the_sample_publishes_and_accounts_for_every_file(
    prefect_server, tmp_path
):
    """tests/hostile.py's exports (bad links, shifted and headerless CSV, wrong encodings,
    a huge line, JSON that is not, ...) beside data/raw: a version is published, and every
    file is in sources with seen = accepted + rejected and every reject in rejects."""
    from tests.hostile import write_all

    hostile = tmp_path / "hostile"
    written = write_all(hostile, scale=0.02)  # about 60 records: the run embeds them
    warehouse = tmp_path / "warehouse"
    summary = paperlake(raw=[str(hostile), str(SAMPLE_RAW)], warehouse=str(warehouse))
    assert summary.version == 1 and summary.status == "published"
    with open_lake(Settings(warehouse=warehouse)) as con:
        sources = con.execute(
            "select path, records_seen, accepted, rejected, error from sources"
        ).fetchall()
        rejects = dict(
            con.execute("select source_path, count(*) from rejects group by 1").fetchall()
        )
        papers = con.execute("select count(*) from papers").fetchone()[0]
    paths = {row[0] for row in sources}
    assert {str(p) for p in written} <= paths
    for path, seen, accepted, rejected, error in sources:
        # A file is read (its records accepted or rejected) or, where no record of it can
        # be read at all (a tiny gzip cut short), listed with its error.
        assert seen == accepted + rejected and (error is None or seen == 0), path
        assert rejects.get(path, 0) == rejected, path
    assert papers >= 38 and sum(row[2] for row in sources) >= papers


def test_above_the_exact_limit_the_kept_index_and_lists_are_updated_not_searched_again(
    prefect_server, raw_copy, tmp_path, caplog
):
    """With the sample above `exact_neighbors_max`, version 1 builds an HNSW graph and keeps
    it with its lists; version 2 updates both for the file it adds: every published
    neighbour is a paper, recall@10 against an exact search is at least 0.95, and the
    papers it adds get their exact nearest."""
    import numpy as np
    import polars as pl

    from flows.derive import neighbours
    from tests.test_history import add_new_dump

    warehouse = tmp_path / "warehouse"
    run = {"warehouse": str(warehouse), "exact_neighbors_max": 20}
    paperlake(raw=[str(raw_copy)], **run)
    folder = warehouse / "cache" / "neighbors"
    (first,) = folder.glob("lists-*")
    assert len(list(folder.glob("graph-*.faiss"))) == len(list(folder.glob("graph-*.parquet"))) == 1
    with open_lake(Settings(warehouse=warehouse)) as con:
        before = {r[0] for r in con.execute("select paper_id from papers").fetchall()}
    add_new_dump(raw_copy)
    with caplog.at_level("INFO"):
        summary = paperlake(raw=[str(raw_copy)], **run)
    assert summary.version == 2
    assert "the kept graph updated (5 papers added, 0 gone)" in caplog.text
    assert "the last run's lists updated (5 papers new, 0 gone)" in caplog.text
    assert list(folder.glob("lists-*")) == [first]  # the index's lists, kept
    with open_lake(Settings(warehouse=warehouse)) as con:
        published = con.execute("select paper_id, neighbor_id, rank from neighbors").pl()
        vectors = con.execute("select paper_id, embedding from embeddings order by 1").pl()
        papers = con.execute("select paper_id from papers").pl()["paper_id"]
    assert published["paper_id"].is_in(papers.implode()).all()
    assert published["neighbor_id"].is_in(papers.implode()).all()
    ids = vectors["paper_id"].to_list()
    added = sorted(set(ids) - before)
    assert len(added) == 5
    matrix = np.asarray(vectors["embedding"].to_list(), dtype=np.float32)
    exact, _ = neighbours.split_candidates(
        neighbours.candidates(ids, matrix, 32, 0.95, "exact"), 10, 0.95
    )
    pairs = [set(f.select("paper_id", "neighbor_id").rows()) for f in (published, exact)]
    assert len(pairs[0] & pairs[1]) / len(pairs[1]) >= 0.95
    expected = exact.filter(pl.col("paper_id").is_in(added)).with_columns(
        rank=pl.int_range(1, pl.len() + 1).over("paper_id")
    )
    got = published.filter(pl.col("paper_id").is_in(added))
    assert got.sort("paper_id", "rank").select("paper_id", "neighbor_id", "rank").to_dicts() == (
        expected.sort("paper_id", "rank").select("paper_id", "neighbor_id", "rank").to_dicts()
    )


def test_suites_run_early_and_late_give_the_rows_of_all_run_at_once(sample_run, tmp_path):
    """The suites of ingest's tables and the embeddings run beside the derive stage, the
    others after it (StageRunner.validate): the same dq_results rows as all at once, in
    suite order, then the references between tables, and a suite result for the Data Docs
    from each suite that ran Great Expectations."""
    from concurrent.futures import Future

    from flows.pipeline import check_parameters
    from flows.runner import StageRunner
    from flows.tasks import validate_tables
    from flows.validate import suite_names

    lake = open_lake(sample_run.settings)
    tables = {name: lake.table(name).pl() for name in suite_names()}
    parameters = check_parameters(
        sample_run.settings, SimpleNamespace(info=SimpleNamespace(dim=384)), 38
    )
    at_once, docs = validate_tables.fn(
        tables, Settings(warehouse=tmp_path / "a"), "run-a", parameters
    )
    made = ("sources", "papers", "paper_sources", "rejects", "embeddings")  # before derive
    settings = Settings(warehouse=tmp_path / "b")
    runner = StageRunner(settings)
    first = Future()
    early = {name: tables[name] for name in made}
    first.set_result(validate_tables.fn(early, settings, runner.run_id, parameters))
    rows, results = runner.validate(first, tables, parameters)
    suites = rows.filter(pl.col("expectation") != "expect_column_values_to_be_keys_of_table")
    assert suites.drop("run_id").equals(at_once.drop("run_id"))
    assert suites["suite"].unique(maintain_order=True).to_list() == suite_names()
    references = rows.filter(pl.col("expectation") == "expect_column_values_to_be_keys_of_table")
    assert references.height == 18 and references["success"].all()
    assert set(rows["run_id"]) == {runner.run_id}
    assert sorted(r.table for r in results) == sorted(r.table for r in docs) != []


def test_a_run_with_nothing_new_says_up_to_date_at_its_version(sample_run):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.core.run_record import slug
    from flows.pipeline import paperlake

    settings = sample_run.settings
    again = paperlake(raw=[str(p) for p in settings.raw], warehouse=str(settings.warehouse))
    assert again.status == "up to date" and again.version == 1
    key = f"paperlake-run-summary-{slug(settings.warehouse)}"
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))
        )
    texts = [a.data for a in found if f"paperlake run {again.run_id[:8]}" in (a.data or "")]
    assert texts and "up to date at version 1" in texts[0]
    assert "papers: 0" not in texts[0]


def test_a_served_deployment_loads_the_flow_named_paperlake():
    """The deployment's entrypoint is the flow itself, so a scheduled run's log names the
    flow as the UI does (it once loaded the undecorated function: 'run-flow')."""
    from prefect.flows import load_flow_from_entrypoint

    from flows.pipeline import paperlake

    deployment = paperlake.to_deployment(name="check", _sync=True)
    assert deployment.entrypoint.endswith("flows/pipeline.py:paperlake")
    loaded = load_flow_from_entrypoint(str(PROJECT_ROOT / deployment.entrypoint))
    assert loaded.name == "paperlake"
