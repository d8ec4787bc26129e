"""The keyword (BM25) index of a version: one DuckDB file per version beside the catalog
(DuckLake tables take no indexes), built on first use, checked against the version's
papers before it is used, and attached for the SQL that ranks by it.

The file holds DuckDB's full-text index of the papers' titles and abstracts (its words,
stems and statistics) and, beside it, each term's postings with their BM25 parts, sorted
by term (sql/search/postings.sql), which the search SQL reads; and every paper's card
(sql/search/cards.sql), which a long-lived search reads from here, not from memory."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb

from flows.core import cache
from flows.core.lake import LAKE, connect, read_sql
from flows.core.settings import Settings


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The snapshot the connection reads (latest, or the one it was attached at)."""
    return con.execute(f"select * from {LAKE}.current_snapshot()").fetchone()[0]


# What DuckDB may hold while it builds the full-text index (it spills the rest to disk):
# without a limit the build of a large version holds several times what the explorer
# holds afterwards (docs/scale.md).
BUILD_MEMORY = "1GB"
ATTACHED = itertools.count(1)  # a fresh name for each attach of a keyword index file
TABLES = ("docs", "postings", "cards")  # what a keyword index file holds beside the FTS index
KEEP_VERSIONS = 4  # versions whose search files are kept (`prune`)
# Named in the file's name: an index of another layout (an older paperlake's) is not read.
LAYOUT = "postings"


def index_path(settings: Settings, version: int) -> Path:
    return settings.cache_path / "search" / f"v{version}-{LAYOUT}.duckdb"


def vectors_folder(settings: Settings, version: int) -> Path:
    """Where a long-lived search keeps the version's vectors (flows/read/vectors.py)."""
    return settings.cache_path / "search" / f"v{version}-vectors"


def postings_folder(settings: Settings, version: int) -> Path:
    """Where a long-lived search keeps the keyword index's postings as arrays
    (flows/read/postings.py)."""
    return settings.cache_path / "search" / f"v{version}-keywords"


def build_keyword_index(con: duckdb.DuckDBPyConnection, path: Path) -> Path:
    """Write the full-text (BM25) index of the attached version's papers to `path`.

    DuckLake tables take no indexes, so the index lives beside the catalog, one file per
    version; it is written under a temporary name and moved into place whole.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        write_keyword_index(con, tmp)
    except BaseException:
        for left in (tmp, tmp.with_name(f"{tmp.name}.wal")):  # a failed build leaves nothing
            left.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return path


def write_keyword_index(con: duckdb.DuckDBPyConnection, tmp: Path) -> None:
    """Write the keyword index of the attached version's papers into the file `tmp`."""
    # Written by DuckDB from the version straight into the file, in pieces.
    building = f"keyword_build_{next(ATTACHED)}"
    con.execute(f"attach '{tmp}' as {building}")
    try:
        con.execute(f"create table {building}.docs as {read_sql('search/docs')}")
        con.execute(f"create table {building}.cards as {read_sql('search/cards')}", {"ids": None})
    finally:
        con.execute(f"detach {building}")
    index = connect(str(tmp))
    try:
        index.execute(f"set memory_limit = '{BUILD_MEMORY}'")
        index.execute(
            "pragma create_fts_index('docs', 'paper_id', 'text', stemmer = 'porter', "
            "stopwords = 'english', overwrite = 1)"
        )
        index.execute(f"create table postings as {read_sql('search/postings')}")
        # A hit's card is found by its id in a millisecond, not by reading every card.
        index.execute("create unique index cards_paper on cards (paper_id)")
    finally:
        index.close()


def keyword_index(con: duckdb.DuckDBPyConnection, settings: Settings) -> Path:
    """The keyword index file of the attached version, built on first use, and built again
    (with a warning) where the file cannot be opened or holds another count of papers or
    cards. Building one drops the search files of versions looked at long ago (`prune`)."""
    path = index_path(settings, current_version(con))
    if not path.exists():
        built = build_keyword_index(con, path)
        prune(path.parent)
        return built
    papers = con.execute("select count(*) from papers").fetchone()[0]
    try:
        with contextlib.closing(duckdb.connect(str(path), read_only=True)) as index:
            counts = {t: index.execute(f"select count(*) from {t}").fetchone()[0] for t in TABLES}
    except duckdb.Error as exc:
        reason = " ".join(str(exc).split())
    else:
        if counts["docs"] == counts["cards"] == papers:
            return path
        reason = f"{counts['docs']} papers indexed where the version holds {papers}"
        if counts["docs"] == papers:
            reason = f"{counts['cards']} cards where the version holds {papers} papers"
    cache.warn(cache.Damaged(path, reason), "built again")
    return build_keyword_index(con, path)


def prune(folder: Path, keep: int = KEEP_VERSIONS) -> None:
    """Drop the search files (keyword index, vectors, postings) of all but the `keep`
    versions whose files were written last, and files of an older layout: they are made
    again when a version is searched again. A process still reading a dropped file reads on (the
    system keeps a file open or mapped until it is let go)."""
    for kind in (f"-{LAYOUT}.duckdb", "-vectors", "-keywords"):
        written = [p for p in folder.glob(f"v*{kind}") if re.fullmatch(rf"v\d+{kind}", p.name)]
        for old in sorted(written, key=modified, reverse=True)[keep:]:
            cache.drop(old)
    for old in folder.glob("v*.duckdb"):
        if re.fullmatch(r"v\d+\.duckdb", old.name):
            cache.drop(old)


def modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # dropped by another process meanwhile
        return 0.0


@contextlib.contextmanager
def keyword_scope(con: duckdb.DuckDBPyConnection, index: Path) -> Iterator[None]:
    """The keyword index file attached and in use on `con`, for the SQL run inside (the
    index's macros read its tables by their bare names)."""
    current = con.execute("select current_database()").fetchone()[0]
    name = f"keyword_index_{next(ATTACHED)}"
    con.execute(f"attach '{index}' as {name} (read_only)")
    try:
        con.execute(f"use {name}")
        yield
    finally:
        con.execute(f"use {current}")
        con.execute(f"detach {name}")
