"""Validate: the real Great Expectations suites from expectations/ on tiny frames."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flows import validate
from flows.core import cache
from flows.core.settings import EXPECTATIONS_DIR
from flows.validate.checks import duplicate_rows, failed_lists
from flows.validate.docs import prune_results
from flows.validate.gx import GxProject

PARAMS = {
    "min_words": 20,
    "max_words": 1500,
    "model_dim": 3,
    "papers": 2,
    "neighbors_k": 10,
    "duplicate_threshold": 0.95,
    "max_reject_share": 0.5,
}


def papers(**changes) -> pl.DataFrame:
    base = {
        "paper_id": ["00000000000000aa", "00000000000000bb"],
        "source_path": ["f.txt", "f.txt"],
        "venue": ["ICLR", "ICLR"],
        "year": [2026, 2026],
        "abstract": ["word " * 30, "other " * 40],
        "abstract_raw": ["word " * 30, "other " * 40],
        "word_count": [30, 40],
        "links": [[], []],
        "authors": [[], []],
        "keywords": [[], []],
        "unresolved_macros": [[], []],
    }
    base.update(changes)
    return pl.DataFrame(base)


@pytest.fixture(scope="module")
def validator(tmp_path_factory):
    return validate.Validator(tmp_path_factory.mktemp("gx"), run_id="test-run")


def store(validator: validate.Validator) -> None:
    """Store the suite results `validator` left, as building the Data Docs does."""
    project = GxProject.at(validator.root)
    for result in validator.unstored:
        project.store(validator.run_id, result)
    validator.unstored.clear()


def build_docs(validator: validate.Validator, **options) -> Path | None:
    """Build the Data Docs of the suite results `validator` left, as a run does."""
    index = validate.build_data_docs(
        validator.root, validator.run_id, validator.unstored, **options
    )
    validator.unstored.clear()
    return index


def test_every_table_suite_is_a_json_file_named_after_its_table():
    from flows.core.tables import registry

    names = validate.suite_names()
    assert names == sorted(table.name for table in registry())
    for name in names:
        spec = json.loads((EXPECTATIONS_DIR / f"{name}.json").read_text())
        assert spec["name"] == name
        assert {e["severity"] for e in spec["expectations"]} <= {"critical", "warning"}


def test_clean_papers_pass(validator):
    results = validator.validate("papers", papers(), PARAMS)
    assert results["success"].all()
    assert validate.blocking_failures(results).height == 0
    assert set(results["suite"]) == {"papers"}
    assert results["run_id"].unique().to_list() == ["test-run"]


def test_duplicate_ids_block_and_missing_venue_warns_naming_rows(validator):
    frame = papers(paper_id=["00000000000000aa", "00000000000000aa"], venue=["ICLR", None])
    results = validator.validate("papers", frame, PARAMS)
    failures = validate.blocking_failures(results)
    failed = {(r["expectation"], r["column_name"]): r for r in failures.iter_rows(named=True)}
    assert set(failed) == {("expect_column_values_to_be_unique", "paper_id")}
    assert failed[("expect_column_values_to_be_unique", "paper_id")]["unexpected_count"] == 2
    warned = results.filter(~pl.col("success") & ~pl.col("blocking"))
    assert warned.select("expectation", "column_name", "unexpected_ids").rows() == [
        ("expect_column_values_to_not_be_null", "venue", ["00000000000000aa"])
    ]
    message = str(validate.DataQualityError(failures))
    # In words, without ids: the data-quality page names the rows.
    assert message == (
        "blocking data-quality checks failed:\n"
        "  papers: 2 papers have a paper_id that another row has too"
    )


def test_only_checks_that_would_corrupt_the_warehouse_block():
    """Keys, references, embeddings, and invariants of derived tables block; whatever bad
    input can cause (missing metadata, implausible values, file errors) only warns."""
    blocking = {
        (name, e["type"], json.dumps(e["kwargs"], sort_keys=True))
        for name in validate.suite_names()
        for e in json.loads((EXPECTATIONS_DIR / f"{name}.json").read_text())["expectations"]
        if e["severity"] == "critical"
    }
    columns = {(name, json.loads(kwargs).get("column")) for name, _, kwargs in blocking}
    for input_dependent in ("venue", "year", "word_count", "error", "reject_share", "label"):
        assert not any(column == input_dependent for _, column in columns), input_dependent
    assert ("papers", "paper_id") in columns and ("embeddings", "norm") in columns


def test_word_count_bounds_come_from_parameters(validator):
    results = validator.validate("papers", papers(), {**PARAMS, "max_words": 35})
    warned = results.filter(~pl.col("success"))
    assert validate.blocking_failures(results).height == 0
    assert warned.select("column_name", "unexpected_count", "unexpected_ids").rows() == [
        ("word_count", 1, ["00000000000000bb"])
    ]


def test_embedding_checks_dimension_nan_and_norm(validator):
    frame = pl.DataFrame(
        {
            "paper_id": ["a", "b", "c"],
            "model": ["m"] * 3,
            "dim": [3, 3, 2],
            "embedding": pl.Series(
                [[1.0, 0.0, 0.0], [float("nan"), 0.0, 0.0], [0.5, 0.5]], dtype=pl.List(pl.Float32)
            ),
        }
    )
    failures = validate.blocking_failures(
        validator.validate("embeddings", frame, {**PARAMS, "papers": 3})
    )
    by_column = {r["column_name"]: r["unexpected_ids"] for r in failures.iter_rows(named=True)}
    # A NaN norm is missing to pandas, so the NaN check, not the norm check, names "b".
    # Rows are named by the table's key: paper and model.
    assert by_column == {"dim": ["c/m"], "nan_count": ["b/m"], "norm": ["c/m"]}


def test_sources_must_account_for_every_record(validator):
    frame = pl.DataFrame(
        {
            "path": ["a.txt", "b.txt"],
            "sha256": ["x", "y"],
            "records_seen": [3, 4],
            "accepted": [2, 3],
            "rejected": [1, 0],
            "error": [None, None],
        }
    )
    failures = validate.blocking_failures(validator.validate("sources", frame, PARAMS))
    assert failures.select("expectation", "unexpected_ids").rows() == [
        ("expect_column_pair_values_to_be_equal", ["b.txt"])
    ]


def test_data_docs_are_built(validator):
    index = build_docs(validator)
    assert index is not None and index.name == "index.html"
    assert "papers" in index.read_text()


def test_data_docs_name_the_run_and_table_and_carry_severity(validator):
    """Each stored result is named by the paperlake run and its table, each expectation
    carries its severity in its meta, and no pandas query names a frame readers lack."""
    validator.validate("papers", papers(venue=["ICLR", None]), PARAMS)
    index = build_docs(validator)  # the results stored, their pages built
    runs = Path(validator.context.root_directory) / "uncommitted" / "validations" / "papers"
    stored = json.loads(sorted((runs / "test-run").glob("*/*.json"))[-1].read_text())
    assert stored["meta"]["run_id"]["run_name"] == "test-run"
    assert stored["meta"]["batch_spec"]["data_asset_name"] == "papers"
    meta = {
        (r["expectation_config"]["type"], r["expectation_config"]["kwargs"].get("column")): r[
            "expectation_config"
        ]["meta"]["paperlake"]
        for r in stored["results"]
    }
    assert meta[("expect_column_values_to_not_be_null", "venue")] == {
        "severity": "warning",
        "blocks_publish": False,
    }
    assert meta[("expect_column_values_to_not_be_null", "paper_id")] == {
        "severity": "critical",
        "blocks_publish": True,
    }
    # Whole-table checks are computed in DuckDB: Great Expectations sees only row checks.
    assert ("expect_column_values_to_be_unique", "paper_id") not in meta
    assert not any("unexpected_index_query" in r["result"] for r in stored["results"])
    page = max((index.parent / "validations" / "papers" / "test-run").glob("*/*.html"))
    text = page.read_text()
    assert "Data asset: papers" in text and "df.filter" not in text


def test_old_results_are_pruned_before_the_docs_are_built(validator):
    for _ in range(3):
        validator.validate("papers", papers(), PARAMS)
    store(validator)
    root = Path(validator.context.root_directory) / "uncommitted" / "validations" / "papers"
    assert len(list(root.glob("*/*"))) >= 3
    prune_results(validator.root, keep=2)
    assert len(list(root.glob("*/*"))) == 2


def many_papers(n: int, **changes) -> pl.DataFrame:
    frame = pl.concat([papers()] * (n // 2)).with_columns(
        paper_id=pl.format("{}", pl.int_range(pl.len()).map_elements(lambda i: f"{i:016x}",
                                                                    return_dtype=pl.String)),
        word_count=pl.int_range(pl.len()) % 60 + 5,  # some below min_words: warnings
    )  # fmt: skip
    return frame.with_columns(**changes) if changes else frame


def comparable(results: pl.DataFrame) -> list[dict]:
    return results.drop("run_id").sort("expectation", "kwargs").to_dicts()


def test_a_memo_checks_only_new_rows_and_gives_the_full_results(tmp_path):
    """With a memo, Great Expectations runs on the rows it has not seen; every result
    still counts the whole table and equals a run without memo, row for row."""
    memo = tmp_path / "memo"
    frames = [
        many_papers(40),
        many_papers(40).vstack(  # +2 rows: one empty venue (a warning), one duplicate id
            papers(paper_id=["00000000000000ff", "0000000000000001"], venue=[None, "ICLR"])
        ),
        many_papers(40).slice(5),  # rows removed, among them failing ones
        many_papers(40).with_columns(  # a change in place
            venue=pl.when(pl.col("paper_id") == "0000000000000007")
            .then(None)
            .otherwise(pl.lit("ICLR"))
        ),
    ]
    gx_rows = []
    for number, frame in enumerate(frames):
        with_memo = validate.Validator(tmp_path / "gx", f"run-{number}", memo)
        fresh = validate.Validator(tmp_path / "gx-full", f"run-{number}")
        got = with_memo.validate("papers", frame, PARAMS)
        assert comparable(got) == comparable(fresh.validate("papers", frame, PARAMS))
        assert set(got["element_count"].drop_nulls()) == {frame.height}
        store(with_memo)
        runs = tmp_path / "gx" / "gx" / "uncommitted" / "validations" / "papers" / f"run-{number}"
        stored = [json.loads(p.read_text()) for p in runs.glob("*/*.json")]
        gx_rows.append(stored[0]["results"][0]["result"]["element_count"] if stored else 0)
    # All; the 2 new; none; the 5 rows back (the memo keeps the current rows only) and the
    # 1 changed.
    assert gx_rows == [40, 2, 0, 6]
    second = validate.Validator(tmp_path / "gx", "again", memo).validate(
        "papers", frames[1], PARAMS
    )
    assert second.filter(pl.col("expectation") == "expect_column_values_to_be_unique").select(
        "success", "unexpected_count", "unexpected_ids"
    ).to_dicts() == [
        {"success": False, "unexpected_count": 2, "unexpected_ids": ["0000000000000001"]},
    ]


def test_the_memo_is_one_row_per_hash_in_any_order_with_the_failures_it_saw(tmp_path):
    memo = tmp_path / "memo"
    frame = many_papers(40).vstack(many_papers(40).slice(0, 3))  # 3 rows twice
    frame = frame.with_columns(  # 2 rows with no venue (a warning), one of them twice
        venue=pl.when(pl.col("paper_id").is_in(["0000000000000001", "0000000000000009"]))
        .then(None)
        .otherwise(pl.col("venue"))
    )
    first = validate.Validator(tmp_path / "gx", "first", memo).validate("papers", frame, PARAMS)
    [path] = memo.glob("papers-*.parquet")
    rows = pl.read_parquet(path)
    assert rows["row_hash"].n_unique() == rows.height == 40
    fields = cache.read_record(path.with_suffix(".json"))
    [venue_check] = [i for i, f in enumerate(fields) if f["column"] == "venue"]
    assert rows.filter(pl.col("failed").list.contains(venue_check)).height == 2
    venue = first.filter(pl.col("column_name") == "venue")
    assert venue.select("unexpected_count", "unexpected_ids").to_dicts() == [
        {"unexpected_count": 3, "unexpected_ids": ["0000000000000001", "0000000000000009"]}
    ]
    cache.write_parquet(path, rows.reverse())  # the same rows in another order, sealed
    again = validate.Validator(tmp_path / "gx", "again", memo)
    assert comparable(again.validate("papers", frame, PARAMS)) == comparable(first)
    assert not again.ran_gx


def test_a_run_with_nothing_new_never_loads_great_expectations(tmp_path):
    memo = tmp_path / "memo"
    validate.Validator(tmp_path / "gx", "first", memo).validate("papers", papers(), PARAMS)
    again = validate.Validator(tmp_path / "gx", "again", memo)
    results = again.validate("papers", papers(), PARAMS)
    assert again._project is None and not again.ran_gx
    assert results["success"].all() and set(results["element_count"].drop_nulls()) == {2}
    # A changed parameter is another suite: its rows are checked again.
    strict = validate.Validator(tmp_path / "gx", "strict", memo)
    failed = strict.validate("papers", papers(), {**PARAMS, "min_words": 35})
    assert strict.ran_gx
    row = failed.filter(pl.col("kwargs").str.contains('"min_value": 35')).to_dicts()[0]
    assert (row["success"], row["unexpected_count"]) == (False, 1)
    assert row["unexpected_ids"] == ["00000000000000aa"]


def test_data_docs_are_built_for_new_results_and_list_every_kept_one(tmp_path):
    import re

    pages = []
    for number in range(4):
        validator = validate.Validator(tmp_path / "gx", f"run-{number}")
        validator.validate("papers", papers(), PARAMS)
        index = build_docs(validator, keep=3)
        pages.append(sorted(p.relative_to(index.parent) for p in index.parent.rglob("*.html")))
    linked = set(re.findall(r"'_table_row_link_path': '(validations/[^']+)'", index.read_text()))
    results = {str(p) for p in pages[-1] if str(p).startswith("validations/")}
    assert len(results) == 3  # the oldest run's page went with its result
    assert linked == results  # the index lists every kept result, each page is there
    assert not any("run-0" in page for page in (tmp_path / "gx").rglob("*") for page in [str(page)])


def test_a_clean_batch_is_stored_with_counts_and_a_failing_one_with_every_failing_row(tmp_path):
    """Great Expectations validates a batch for counts (stored for the Data Docs); an
    expectation that rows failed is validated again for each failing row's index, and
    every one reaches dq_results."""
    runs = tmp_path / "gx" / "gx" / "uncommitted" / "validations" / "papers"
    clean = validate.Validator(tmp_path / "gx", "clean")
    passed = clean.validate("papers", many_papers(40, word_count=pl.lit(30)), PARAMS)
    assert passed["success"].all()
    store(clean)
    stored = json.loads(next((runs / "clean").glob("*/*.json")).read_text())
    counted = {r["result"]["element_count"] for r in stored["results"]}
    assert counted == {40} and {r["result"]["unexpected_count"] for r in stored["results"]} == {0}
    assert not any("unexpected_index_list" in r["result"] for r in stored["results"])

    failing = validate.Validator(tmp_path / "gx", "failing")
    frame = many_papers(60)  # word counts cycle 5..64: 5..19 fall below min_words
    results = failing.validate("papers", frame, PARAMS)
    short = results.filter(pl.col("kwargs").str.contains('"min_value": 20')).to_dicts()[0]
    below = frame.filter(pl.col("word_count") < 20)
    assert short["unexpected_count"] == below.height == 15
    assert short["unexpected_ids"] == sorted(below["paper_id"].to_list())
    store(failing)
    stored = json.loads(next((runs / "failing").glob("*/*.json")).read_text())
    listed = [r["result"] for r in stored["results"] if r["result"].get("unexpected_count")]
    assert [(r["unexpected_count"], len(r["partial_unexpected_list"])) for r in listed] == [
        (15, 15)
    ]


def test_a_warmed_up_process_validates_without_defining_a_suite(tmp_path, monkeypatch):
    """`warm_up(root)` (what `paperlake serve` does at its start) opens the project and
    defines every suite, so that its first run only validates."""
    root = tmp_path / "gx"
    validate.warm_up(root)
    project = GxProject.at(root)
    assert len(project.definitions) == len(validate.suite_names())

    def defined_again(suite):
        raise AssertionError(f"suite {suite.name} defined again")

    monkeypatch.setattr(project, "define", defined_again)
    checked = validate.Validator(root, "first-run")
    results = checked.validate("papers", papers(venue=["ICLR", None]), PARAMS)
    assert checked.ran_gx and not results.filter(pl.col("blocking") & ~pl.col("success")).height
    warned = results.filter(~pl.col("success")).select("column_name", "unexpected_ids").rows()
    assert warned == [("venue", ["00000000000000bb"])]


def test_a_warmed_up_process_renders_only_its_runs_pages(tmp_path, monkeypatch):
    """Where the Data Docs exist, `warm_up(root)` renders the suites' pages, so that the
    first run's build renders its results and the index, not every suite page again."""
    root = tmp_path / "gx"
    first = validate.Validator(root, "earlier-process")
    first.validate("papers", papers(), PARAMS)
    assert build_docs(first) is not None
    monkeypatch.setattr(GxProject, "open", {})  # as in a new process
    validate.warm_up(root)
    project = GxProject.at(root)
    assert project.suite_pages_due(validate.suite_names()) == []
    built = []
    monkeypatch.setattr(
        project.context, "build_data_docs", lambda resource_identifiers=None: built.extend(
            type(key).__name__ for key in resource_identifiers or ["everything"]
        )
    )  # fmt: skip
    run = validate.Validator(root, "first-run")
    run.validate("papers", papers(venue=["ICLR", None]), PARAMS)
    build_docs(run)
    assert built == ["ValidationResultIdentifier"]


def test_failed_lists_name_each_rows_failed_expectations_in_order():
    hashes = pl.Series([5, 7, 9, 7], dtype=pl.UInt64)
    made = failed_lists(hashes, [{7}, set(), {9, 7}, {1}])  # hash 1 is not among the rows
    assert made["row_hash"].to_list() == [5, 7, 9, 7]
    assert made["failed"].to_list() == [[], [0, 2], [2], [0, 2]]
    assert made.schema["failed"] == pl.List(pl.UInt16)
    assert failed_lists(hashes, [set(), set()])["failed"].to_list() == [[], [], [], []]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", None]), st.sampled_from([1, 2, None])),
        max_size=30,
    )
)
def test_duplicate_rows_are_the_rows_whose_present_key_repeats_in_table_order(rows):
    frame = pl.DataFrame(rows, schema={"k": pl.String, "n": pl.Int64}, orient="row")
    frame = frame.with_row_index("at")
    found = duplicate_rows(frame, ["k", "n"])["at"].to_list()
    keys = [(k, n) for k, n in rows]
    expected = [i for i, key in enumerate(keys) if key != (None, None) and keys.count(key) > 1]
    assert found == expected
    single = duplicate_rows(frame, ["k"])["at"].to_list()
    assert single == [i for i, (k, _) in enumerate(rows) if k is not None
                      and [r[0] for r in rows].count(k) > 1]  # fmt: skip


def test_write_data_docs_stores_each_runs_results_and_lists_every_kept_run(tmp_path):
    """`write_data_docs` (a run's step beside its commit) stores the run's suite results
    and builds their pages and the index, leaving the project's configuration as it was;
    a run that checked no row leaves the Data Docs as they are."""
    from flows.core.settings import Settings
    from flows.runner import write_data_docs

    root = tmp_path / "gx"
    first = validate.Validator(root, "run-1")
    first.validate("papers", papers(), PARAMS)
    assert build_docs(first) is not None  # the site exists
    config = (root / "gx" / "great_expectations.yml").read_text()
    for name in ("run-2", "run-3"):
        run = validate.Validator(root, name)
        run.validate("papers", papers(venue=["ICLR", None]), PARAMS)
        index = write_data_docs(Settings(warehouse=tmp_path), name, run.unstored)
    site = root / "gx" / "uncommitted" / "data_docs" / "local_site"
    assert index == str(site / "index.html")
    linked = set(re.findall(r"'_table_row_link_path': 'validations/papers/([^/']+)/", Path(
        index).read_text()))  # fmt: skip
    assert linked == {"run-1", "run-2", "run-3"}
    assert len(list((site / "validations" / "papers" / "run-2").rglob("*.html"))) == 1
    assert (root / "gx" / "great_expectations.yml").read_text() == config
    assert validate.build_data_docs(root, "run-4", []) == site / "index.html"
    assert not (site / "validations" / "papers" / "run-4").exists()


def test_a_new_process_uses_the_projects_suites_and_writes_only_a_changed_one(
    tmp_path, monkeypatch
):
    """A process that opens the project anew finds its datasource, assets and unchanged
    suites as they are, and writes none of them again; a changed suite is written, and
    its Data Docs page is due again."""
    root = tmp_path / "gx"
    first = validate.Validator(root, "run-1")
    first.validate("papers", papers(), PARAMS)
    assert build_docs(first) is not None
    config = root / "gx" / "great_expectations.yml"
    suite_file = root / "gx" / "expectations" / "papers.json"
    written = {p: p.stat().st_mtime_ns for p in (config, suite_file)}
    monkeypatch.setattr(GxProject, "open", {})  # as in a new process
    again = validate.Validator(root, "run-2")
    results = again.validate("papers", papers(venue=["ICLR", None]), PARAMS)
    assert again.ran_gx and results.filter(~pl.col("success")).height == 1
    assert {p: p.stat().st_mtime_ns for p in written} == written
    assert again.project.suite_pages_due(["papers"]) == []

    monkeypatch.setattr(GxProject, "open", {})
    project = GxProject.at(root)
    suite = validate.Suite.load("papers").row_level()
    project.definition(validate.Suite(suite.name, suite.id_columns, suite.expectations[:-1]))
    assert suite_file.stat().st_mtime_ns > written[suite_file]
    assert [key.name for key in project.suite_pages_due(["papers"])] == ["papers"]


def test_derived_columns_hand_duckdb_only_the_columns_they_name(monkeypatch):
    """A suite's derived columns read only the columns their expressions name: the other
    columns (a million abstracts) are never handed to DuckDB, which copied them; an
    expression that names none still gives one value a row."""
    import duckdb
    import polars as pl

    from flows.validate import suites

    handed, connect = [], duckdb.connect

    class Watched:
        """A real DuckDB connection that notes the columns of each frame registered."""

        def __init__(self):
            self.con = connect()

        def register(self, name, frame):
            handed.append(frame.columns)
            return self.con.register(name, frame)

        def __getattr__(self, name):
            return getattr(self.con, name)

    monkeypatch.setattr(suites.duckdb, "connect", Watched)
    frame = pl.DataFrame(
        {"flags": [["a", "b"], None, []], "abstract": ["x", "y", "z"], "year": [1, 2, 3]}
    )
    out = suites.derived_columns(frame, (("flag_count", "coalesce(len(flags), 0)"), ("one", "1")))
    assert out.columns == ["flag_count", "one"]
    assert out["flag_count"].to_list() == [2, 0, 0]
    assert out["one"].to_list() == [1, 1, 1]
    assert suites.derived_columns(frame, (("one", "1"),))["one"].to_list() == [1, 1, 1]
    assert handed == [["flags"], ["flags"]]
