"""What publishing a 1% change costs on a large warehouse: plan_changes and publish, old and new.

A synthetic warehouse of N papers is published through the real `publish()`: every keyed
table with the shapes a run stages (papers with text and lists, 384-float embeddings,
about ten neighbours a paper, mentions, topics, the aggregates). Then a second run stages
N/100 new papers, a few changed ones (titles, and one float inside some embeddings) and a
few removed ones, and the same change is published twice, into two copies of the
warehouse: once with the full-row EXCEPT ALL planning publish used before (kept below as
`plan_by_except_all`), once with flows.publish.plan_changes. Printed: seconds of the
planning alone (all tables, lake attached, nothing written) and of the whole publish, old
and new, their ratio, and whether both published the same rows and table checksums.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flows import publish as publish_module  # noqa: E402
from flows.core.lake import LAKE, attach, connect  # noqa: E402
from flows.core.settings import Settings  # noqa: E402
from flows.publish import checksums  # noqa: E402

DIM = 384
STAGE = publish_module.STAGE

# One statement per staged table, over `ids` (i, paper_id, revised, nudged) of the papers
# of the version being staged and n, their count; {dim} is the vector size.
TABLES = {
    "sources": """
        select 'raw/dump_' || f || '.txt' as path, md5('file' || f) as sha256,
            count(*) * 1200 as bytes, 'blocks' as format, 'ICLR' as venue, 2026 as year,
            count(*) as records_seen, count(*) as accepted, 0::bigint as rejected,
            null::varchar as error, '{}' as rejected_by_rule, '{}' as flag_counts,
            0::bigint as control_chars_removed, 'header' as metadata_from,
            0::bigint as no_venue, 0::bigint as no_year, null::varchar as warning
        from (select i // 10000 as f from ids) group by f""",
    "papers": """
        select paper_id, 'raw/dump_' || (i // 10000) || '.txt' as source_path,
            md5('file' || (i // 10000)) as source_sha256, i % 10000 + 1 as record_no,
            (i % 10000) * 4 + 1 as line, (i % 10000) * 1200 as byte_offset,
            1 as n_locations, ['ICLR', 'NeurIPS', 'ICML', 'ACL', null][i % 5 + 1] as venue,
            (2020 + i % 7)::integer as year, 'ext' || i as external_id,
            'A study of ' || md5('t' || i)[:12] || (if(revised, ' (revised)', '')) as title,
            ['Author ' || i % 97, 'Author ' || i % 89] as authors,
            ['kw' || i % 31] as keywords, []::varchar[] as categories,
            'Accept' as decision,
            repeat(md5(i::varchar) || ' ' || md5((i + 1)::varchar) || ' ', 15) as abstract,
            repeat(md5(i::varchar) || ' ' || md5((i + 1)::varchar) || ' ', 15) as abstract_raw,
            60 as word_count,
            if(i % 3 = 0, [{'url': 'https://github.com/x/r' || i, 'kind': 'code'}],
               []::struct(url varchar, kind varchar)[]) as links,
            []::varchar[] as unresolved_macros, []::varchar[] as flags,
            0 as control_chars_removed
        from ids""",
    "paper_sources": """
        select paper_id, 'raw/dump_' || (i // 10000) || '.txt' as source_path,
            md5('file' || (i // 10000)) as source_sha256, i % 10000 + 1 as record_no,
            (i % 10000) * 4 + 1 as line, (i % 10000) * 1200 as byte_offset
        from ids""",
    "rejects": """
        select 'raw/dump_' || (i // 10000) || '.txt' as source_path,
            md5('file' || (i // 10000)) as source_sha256, 20000 + i as record_no,
            i * 4 + 3 as line, i * 1200 + 600 as byte_offset, 'too_short' as rule,
            'abstract has 3 words' as reason, 'short text ' || i as raw_snippet
        from ids where i % 100 = 5""",
    "embeddings": """
        select paper_id, 'sentence-transformers/all-MiniLM-L6-v2' as model, {dim} as dim,
            list_transform(range({dim}),
                k -> if(nudged and k = 100, 0.5, sin(i * 0.7 + k * 1.3) / 14)::float
            ) as embedding
        from ids""",
    "paper_topics": """
        select paper_id, (i % 100)::integer as topic_id, (i % 1000) / 1000.0 as distance
        from ids""",
    "paper_coordinates": """
        select paper_id, sin(i)::double as x, cos(i)::double as y from ids""",
    "neighbors": """
        select paper_id, md5('paper' || (i + r * 37 + if(i % 100 = 0, getvariable('n') % 1000, 0))
                % getvariable('n')) as neighbor_id,
            r as rank, (1 - r / 100)::float as score
        from ids, range(1, 11) t(r)""",
    "duplicates": """
        select a.paper_id as paper_a, b.paper_id as paper_b, 0.97::float as score,
            'near' as kind, 'raw/a.txt' as source_a, a.i as line_a, 'raw/b.txt' as source_b,
            b.i as line_b
        from ids a join ids b on b.i = a.i + 1 where a.i % 100 = 1""",
    "duplicate_groups": """
        select least(a.paper_id, b.paper_id) as group_id, p.paper_id, 2::bigint as group_size,
            'title ' || p.i as title, 'raw/a.txt' as source_path, p.i as line
        from ids a join ids b on b.i = a.i + 1 join ids p on p.i in (a.i, b.i)
        where a.i % 100 = 1""",
    "topic_terms": """
        select (i % 100)::integer as topic_id, 'term' || (i // 100) as term,
            count(*) as docs, count(*) * 3 as df, 0.5::double as weight,
            (i // 100)::bigint as term_rank
        from ids where i < 1000 group by all""",
    "topics": """
        select (i % 100)::integer as topic_id, 'label ' || (i % 100) as label,
            count(*) as papers, avg(i % 1000) / 1000.0 as mean_distance,
            ['a', 'b', 'c'] as top_terms,
            list_transform(range({dim}), k -> cos(k + i % 100)::float) as centroid
        from ids group by all""",
    "topic_stats": """
        select (i % 100)::integer as topic_id, 'label ' || (i % 100) as label,
            ['ICLR', 'NeurIPS', 'ICML', 'ACL', null][i % 5 + 1] as venue,
            (2020 + i % 7)::integer as year, count(*) as papers
        from ids group by all""",
    "mentions": """
        select paper_id, kind, kind || ' ' || i % 50 as name, null::varchar as value,
            'we evaluate on ' || kind || ' ' || i % 50 as context
        from ids, unnest(['benchmark', 'dataset']) t(kind)""",
    "venue_stats": """
        select ['ICLR', 'NeurIPS', 'ICML', 'ACL', null][i % 5 + 1] as venue,
            (2020 + i % 7)::integer as year, count(*) as papers, 60.0::double as mean_words,
            60 as min_words, 60 as max_words, count(*) filter (i % 3 = 0) as papers_with_code,
            count(distinct i % 100) as topics
        from ids group by all""",
    "source_stats": """
        select 'raw/dump_' || f || '.txt' as source_path, 'blocks' as format, 'ICLR' as venue,
            2026 as year, count(*) as records_seen, count(*) as accepted, 0::bigint as rejected,
            count(*) as papers, 0::bigint as duplicate_records, null::varchar as error
        from (select i // 10000 as f from ids) group by f""",
    "dq_results": """
        select 'run-' || getvariable('version') as run_id, 'papers' as suite,
            'expect_column_values_to_not_be_null' as expectation, 'paper_id' as column_name,
            '{}' as kwargs, 'critical' as severity, true as blocking, true as success,
            count(*) as element_count, 0::bigint as unexpected_count,
            []::varchar[] as unexpected_ids, null::varchar as observed_value
        from ids""",
    "runs": """
        select 'run-' || getvariable('version') as run_id, null::bigint as snapshot_id,
            now() as started_at, now() as finished_at, 'published' as status,
            md5(getvariable('version')::varchar) as fingerprint, 10::bigint as files,
            1::bigint as files_parsed, count(*) as records_seen, count(*) as accepted,
            0::bigint as rejected, count(*) as papers, 1000::bigint as embedded,
            0::bigint as embeddings_reused, 100::bigint as topics, 'passed' as dq_outcome,
            'all-MiniLM-L6-v2' as model_id, 'sha' as model_weights_sha256,
            'fp32' as precision, '{}' as agreement_with_fp32, '{}' as config,
            '{}' as packages, '{}' as input_hashes, '{}' as stage_seconds
        from ids""",
}


def stage(con: duckdb.DuckDBPyConnection, papers: int, version: int) -> None:
    """Stage every table of version 1 (`papers` papers) or 2 (+1%, a few changed, removed)."""
    con.execute(f"set variable version = {version}")
    total = papers if version == 1 else papers + papers // 100
    # Version 2: one paper in 5,000 removed, one in 2,000 retitled, one in 10,000 with one
    # float of its vector changed.
    changed = version == 2
    con.execute(
        f"create or replace table {STAGE}.ids as select i, md5('paper' || i) as paper_id, "
        f"{changed} and i % 2000 = 3 as revised, {changed} and i % 10000 = 11 as nudged "
        f"from range({total}) t(i) where not ({changed} and i % 5000 = 7)"
    )
    con.execute(f"set variable n = {total}")
    for name, sql in TABLES.items():
        con.execute(f"create or replace table {STAGE}.{name} as {sql.replace('{dim}', str(DIM))}")


def plan_by_except_all(
    con: duckdb.DuckDBPyConnection, name: str, keys: tuple[str, ...], columns=None
) -> str:
    """The planning publish used before: full-row EXCEPT ALL in both directions."""
    target, staged = f"{LAKE}.main.{name}", f"{STAGE}.{name}"
    lake, stage = columns or (
        publish_module.table_columns(con, LAKE),
        publish_module.table_columns(con, "memory"),
    )
    if name not in lake or lake[name] != stage[name]:
        return "replace"
    key_list = ", ".join(keys)
    con.execute(
        f"create or replace table {STAGE}.{name}__removed as select distinct {key_list} "
        f"from (select * from {target} except all select * from {staged})"
    )
    con.execute(
        f"create or replace table {STAGE}.{name}__added as "
        f"select * from {staged} except all select * from {target}"
    )
    return "merge"


def planned(con: duckdb.DuckDBPyConnection, name: str) -> tuple[list, list]:
    """The keys removed and the rows added that a plan staged, sorted, to compare plans."""
    removed = con.execute(f"select * from {STAGE}.{name}__removed order by all").fetchall()
    added = con.execute(f"select * from {STAGE}.{name}__added order by all").fetchall()
    return removed, added


def time_plans(con, settings: Settings, plan) -> tuple[float, dict[str, tuple[list, list]]]:
    """Seconds to plan every keyed table against the lake, and what each plan staged."""
    attach(con, settings)
    try:
        started = time.perf_counter()
        modes = {name: plan(con, name, keys) for name, keys in publish_module.TABLE_KEYS.items()}
        seconds = time.perf_counter() - started
        assert set(modes.values()) == {"merge"}, modes
        return seconds, {name: planned(con, name) for name in modes}
    finally:
        con.execute("use memory")
        con.execute(f"detach {LAKE}")


def time_publish(con, settings: Settings, plan) -> tuple[float, dict[str, tuple[int, int]]]:
    """Seconds of one publish of the staged tables with `plan` as its planning of each
    table, then publish.commit."""
    started = time.perf_counter()
    attach(con, settings, create=True)
    columns = publish_module.table_columns(con, LAKE), publish_module.table_columns(con, "memory")
    keyed = publish_module.TABLE_KEYS
    plans = {name: plan(con, name, keys, columns) for name, keys in keyed.items()}
    _, changes = publish_module.commit(con, settings, plans, "bench", {}, DIM)
    return time.perf_counter() - started, changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="plan timings, best of")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as work:
        base = Settings(warehouse=Path(work) / "base")
        con = connect(extensions=())
        started = time.perf_counter()
        stage(con, args.papers, version=1)
        publish_module.publish(con, base, "version 1", {}, DIM)
        print(f"version 1: {args.papers:,} papers staged and published in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip

        stage(con, args.papers, version=2)
        old_plan, new_plan = [], []
        for _ in range(args.repeat):  # interleaved, so that load on the machine hits both
            seconds, old_rows = time_plans(con, base, plan_by_except_all)
            old_plan.append(seconds)
            seconds, new_rows = time_plans(con, base, publish_module.plan_changes)
            new_plan.append(seconds)
        differ = [name for name in old_rows if old_rows[name] != new_rows[name]]

        lakes = {}
        for label in ("old", "new"):
            lakes[label] = Settings(warehouse=Path(work) / label)
            shutil.copytree(base.warehouse, lakes[label].warehouse)
        old_publish, old_changes = time_publish(con, lakes["old"], plan_by_except_all)
        new_publish, new_changes = time_publish(con, lakes["new"], publish_module.plan_changes)
        same_sums = checksums(lakes["old"])[1:] == checksums(lakes["new"])[1:]
        con.close()

    print(f"version 2: +{args.papers // 100:,} papers, a few changed and removed")
    for name, (deleted, inserted) in new_changes.items():
        print(f"  {name:18} deleted {deleted:>7,}  inserted {inserted:>7,}")
    print(f"{'':22}{'old (EXCEPT ALL)':>18}{'new':>10}{'old/new':>9}")
    best_old, best_new = min(old_plan), min(new_plan)
    print(f"{'plan_changes (best)':22}{best_old:>16.2f} s{best_new:>8.2f} s"
          f"{best_old / best_new:>8.1f}x")  # fmt: skip
    print(f"{'publish':22}{old_publish:>16.2f} s{new_publish:>8.2f} s"
          f"{old_publish / new_publish:>8.1f}x")  # fmt: skip
    print(f"same plans: {not differ} {differ or ''}")
    print(f"same rows deleted and inserted: {old_changes == new_changes}")
    print(f"same table checksums: {same_sums}")


if __name__ == "__main__":
    main()
