"""`paperlake` under cProfile, with the seconds of each SQL table the aggregate stage builds.

    python bench/profile_run.py OUT.prof run --raw ... --warehouse ...

cProfile sees the stages (Prefect runs the tasks in the flow's thread) but not which SQL
statement a DuckDB call ran: each table of sql/ that build_tables makes is timed from
its read_sql to the next (the statement and its row count), and the seconds are written to
OUT.sql.json. Nothing in flows/ changes: names of derive's modules are wrapped.
"""

from __future__ import annotations

import cProfile
import json
import sys
import time
from pathlib import Path


def main() -> None:
    out = Path(sys.argv[1])
    sys.argv = ["paperlake", *sys.argv[2:]]
    from flows.cli import main as cli
    from flows.derive import build as derived
    from flows.derive import mentions, paper_rows, terms

    marks: list[tuple[str, float]] = []
    read_sql, build = derived.read_sql, derived.build_tables

    def timed_read_sql(name: str) -> str:
        marks.append((name, time.perf_counter()))
        return read_sql(name)

    def timed_build(*args, **kwargs):
        marks.append(("<start>", time.perf_counter()))
        try:
            return build(*args, **kwargs)
        finally:
            marks.append(("<end>", time.perf_counter()))

    for module in (derived, mentions, paper_rows, terms):  # each reads sql/ itself
        module.read_sql = timed_read_sql
    derived.build_tables = timed_build
    profiler = cProfile.Profile()
    code = 0
    try:
        profiler.runcall(cli)
    except SystemExit as exc:
        code = exc.code
    finally:
        profiler.dump_stats(out)
        seconds = {
            name: round(after - at, 3)
            for (name, at), (_, after) in zip(marks, marks[1:], strict=False)
            if name in derived.SQL_TABLES
        }
        out.with_suffix(".sql.json").write_text(json.dumps(seconds, indent=2))
    sys.exit(code)


if __name__ == "__main__":
    main()
