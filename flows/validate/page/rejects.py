"""The rejected records a data-quality page lists: by file, then rule, each with its
file:line, reason and first characters (sql/dq/rejects.sql)."""

from __future__ import annotations

import duckdb

from flows.core.lake import read_sql
from flows.core.wording import location, relative, snippet
from flows.validate.page.page import RejectedRecord, RejectGroup

SHOWN = 200  # rejected records a page lists; a query lists the rest
PER_RULE = 20  # of one file's rule, so that one flood leaves room for the others


def reject_groups(
    con: duckdb.DuckDBPyConnection, root: str, shown: int = SHOWN, per_rule: int = PER_RULE
) -> tuple[list[RejectGroup], int]:
    """The listed rejects of the `rejects` table on `con`, grouped by file and rule, and
    how many rejects there are in all (0 where the table is missing).

    Args:
        root: the folder file names are given relative to.
    """
    try:
        frame = con.execute(read_sql("dq/rejects"), {"per_rule": per_rule, "shown": shown}).pl()
    except duckdb.CatalogException:
        return [], 0  # a run without a rejects table
    groups: dict[tuple, RejectGroup] = {}
    for row in frame.iter_rows(named=True):
        key = (row["source_path"], row["rule"])
        if key not in groups:
            groups[key] = RejectGroup(
                file=relative(row["source_path"], root) or "?",
                path=row["source_path"],
                rule=row["rule"],
                count=row["of_rule"],
                records=[],
            )
        groups[key].records.append(
            RejectedRecord(
                location=location(row["source_path"], root, row["line"], row["record_no"]),
                record_no=row["record_no"],
                reason=row["reason"] or "",
                snippet=snippet(row["raw_snippet"]),
            )
        )
    total = frame["total"][0] if frame.height else 0
    return list(groups.values()), int(total)
