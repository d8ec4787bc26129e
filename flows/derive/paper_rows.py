"""Rows one SQL file derives from each paper alone, kept in the cache per paper, so that a
run reads only the papers it has not seen (`PaperRows`)."""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import duckdb
import polars as pl

from flows.core import cache
from flows.core.held import IN_FRAME, RECORD, Texts, held_back, text_or_stand_in
from flows.core.lake import read_sql
from flows.derive.mentions import MACRO_ROWS_MAX

# Papers read by one run of a per-paper SQL: a run that reads many (the first) writes their
# rows to the cache a batch at a time, and holds one batch.
BATCH_PAPERS = 20_000
# Tables of sql/ whose rows each come from one paper alone, and the other tables they read.
PER_PAPER_TABLES = {"mentions": ("mention_vocabulary",)}
# The columns of papers that per-paper SQL reads (and sql/aggregate/paper_digests.sql
# digests).
READ = ("paper_id", "abstract", "links")


@dataclass(frozen=True)
class PaperRowsUpdate:
    """A per-paper SQL's rows now and as the cache held them before this run.

    The rows are lazy: where the cache held them, they are read from its files only as
    far as they are used (the term counts read the words of the papers that changed).
    """

    rows: pl.LazyFrame  # the SQL's rows of every current paper
    digests: pl.DataFrame  # paper_id, digest of every current paper
    before: pl.LazyFrame  # the SQL's rows of every paper the cache held (none without one)
    before_digests: pl.DataFrame  # paper_id, digest of those papers


def over_papers(con: duckdb.DuckDBPyConnection, papers: pl.DataFrame, sql: str) -> pl.DataFrame:
    """The rows of `sql` where `papers` is the frame `papers`: a view of it in a schema
    searched first, which shadows the papers table of `con` for this query only."""
    con.execute("create or replace schema todo")
    con.register("todo_papers_frame", papers)
    try:
        con.execute("create view todo.papers as from todo_papers_frame")
        con.execute("set search_path = 'todo,main'")
        try:
            return con.execute(sql).pl()
        finally:
            con.execute("reset search_path")
    finally:
        con.execute("drop schema todo cascade")
        con.unregister("todo_papers_frame")


class PaperRows:
    """Rows that one SQL file derives from each paper alone (its abstract and links) and
    from fixed tables (a seed, the stop words), kept in the cache per paper: a run runs
    the SQL over the papers it has not seen only, so it costs what changed.

    One folder per SQL text, fixed tables and DuckDB version, of Parquet files that hold
    the SQL's rows of the current papers, and one row per paper read with the digest of
    the columns it was read from (sql/aggregate/paper_digests.sql), which also remembers
    the papers that gave no rows. A run that only adds papers writes their rows as a new
    part (`part-N`), beside what is there; one where papers left or changed text, or that
    finds PARTS_MAX parts, writes all current rows as one `whole-N`, which supersedes every
    file numbered below it. Each file is written atomically, as its rows are made
    (BATCH_PAPERS papers at a time; a whole streams from the files it supersedes), so no
    run holds every paper's rows. Without a folder, `build` runs the SQL over all papers.
    """

    PARTS_MAX = 16

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        folder: Path | None,
        name: str,
        reads: tuple[str, ...],
        papers: pl.DataFrame,
        texts: Texts = IN_FRAME,
    ):
        """Args:
        name: the SQL file, sql/<name>.sql; it reads `papers` (its columns READ) and the
            tables `reads`.
        papers: the papers, which the SQL reads as `papers`, their abstracts or their
            hashes (flows/core/held.py); the papers table of `con` need not hold the
            abstracts (copying them into DuckDB would cost every run).
        texts: where the abstracts of papers that hold them back are read back, for the
            papers the SQL reads.
        """
        self.digests = read_sql("aggregate/paper_digests")
        self.sql = read_sql(name)
        read = [text_or_stand_in(papers.columns, c) if c == "abstract" else c for c in READ]
        self.papers = papers.select(*read, *(c for c in RECORD if c in papers.columns))
        self.texts = texts
        self.macros, each_row = con.execute(
            "select getvariable('macros'), getvariable('macros_each_row')"
        ).fetchone()
        called = re.findall(r"macro (\w+)\(", self.macros or "")
        self.macros_each_row = each_row if any(f"{m}(" in self.sql for m in called) else None
        self.path: Path | None = None  # the folder of the files
        if folder is not None:
            key = hashlib.sha256(f"{duckdb.__version__}\n{self.digests}\n{self.sql}".encode())
            for table in reads:
                key.update(con.table(table).order("all").pl().write_csv().encode())
            # The macros the SQL may call (sql/macros), as `stage_vocabulary` defined them.
            key.update((self.macros or "").encode())
            self.stem = name.replace("/", "-")
            self.path = folder / f"{self.stem}-{key.hexdigest()[:16]}"

    def build(self, con: duckdb.DuckDBPyConnection, table: str, order: tuple[str, ...]) -> None:
        """Create `table` in `con`: the SQL's rows for all papers, sorted by `order`."""
        rows = self.update(con).rows.collect()
        con.register(f"{table}_frame", rows)
        sort = f" order by {', '.join(order)}" if order else ""
        con.execute(f"create or replace table {table} as from {table}_frame{sort}")
        con.unregister(f"{table}_frame")

    def update(self, con: duckdb.DuckDBPyConnection) -> PaperRowsUpdate:
        """The SQL's rows for all papers, read for new papers only, and the cache brought
        up to date; with the rows it held before."""
        digests = self.paper_digests(con)
        if self.path is None:
            rows = pl.concat(self.new_rows(con, digests["paper_id"]))
            return PaperRowsUpdate(rows.lazy(), digests, rows.clear().lazy(), digests.clear())
        files = self.files()
        stored = self.scan(files)
        read = stored.filter(pl.col("digest").is_not_null()).select("paper_id", "digest")
        read = read.collect()
        keep = digests.join(read, on=["paper_id", "digest"], how="semi")["paper_id"]
        todo = digests.filter(~pl.col("paper_id").is_in(keep.implode()))
        batches = self.new_rows(con, todo["paper_id"])
        first = next(batches)
        before = pl.concat([first.clear().lazy(), stored.filter(pl.col("digest").is_null())],
                           how="diagonal_relaxed").select(first.columns)  # fmt: skip
        if keep.len() == read.height and len(files) < self.PARTS_MAX:
            # Every paper held is here, its text unchanged: the new rows are a part beside
            # the files read (which stay), written a batch at a time, and every row is read
            # when used.
            new = self.save_part(chain([first], batches), todo) if todo.height else first.lazy()
            rows = pl.concat([before, new], how="diagonal_relaxed")
        else:  # the files are replaced by a whole, written as the rows are read
            whole = self.next_file("whole")
            rows = self.save_whole(whole, files, keep, chain([first], batches), digests)
            # The rows taken back: those of papers kept, as the whole holds them, and of
            # papers that left or changed text, read before their files go.
            left = before.filter(~pl.col("paper_id").is_in(keep.implode())).collect()
            kept = rows.filter(pl.col("paper_id").is_in(keep.implode()))
            before = pl.concat([kept, left.lazy()], how="diagonal_relaxed")
            self.tidy(whole)
        return PaperRowsUpdate(rows, digests, before, read)

    def new_rows(self, con: duckdb.DuckDBPyConnection, papers: pl.Series) -> Iterator[pl.DataFrame]:
        """The SQL's rows for `papers`, about BATCH_PAPERS papers at a time, their abstracts
        read back where held back (one empty frame of its columns where there are none)."""
        # Picked from the frame: a join in DuckDB would read every column of every paper.
        narrowed = self.papers.filter(pl.col("paper_id").is_in(papers.implode()))
        for batch in self.texts.batches(narrowed, BATCH_PAPERS):
            yield self.run_over(con, batch.select(READ))

    def save_part(self, batches: Iterator[pl.DataFrame], todo: pl.DataFrame) -> pl.LazyFrame:
        """Write the rows of `batches` and the digests of the papers they were read from
        (`todo`) as the next part, a batch at a time; its rows, to be read as used."""
        first = next(batches)
        columns = [*first.columns, "digest"]
        no_digest = pl.lit(None, pl.String).alias("digest")
        rows = (b.with_columns(no_digest).select(columns) for b in chain([first], batches))
        digests = pl.concat([first.clear(), todo], how="diagonal_relaxed").select(columns)
        path = self.next_file("part")
        cache.write_parquet_batches(path, chain(rows, [digests]))
        self.tidy(path)
        return pl.scan_parquet(path).filter(pl.col("digest").is_null()).select(first.columns)

    def paper_digests(self, con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
        """sql/aggregate/paper_digests.sql over the papers; every per-paper SQL of a build
        reads the same digests, so they are kept in `con` (table paper_digests)."""
        try:
            return con.table("paper_digests").pl()
        except duckdb.CatalogException:
            # The columns sql/aggregate/paper_digests.sql reads, the abstracts as their
            # hashes: only they are converted (DuckDB copies what it is handed).
            held = held_back(self.papers.drop(RECORD, strict=False))
            digests = over_papers(con, held, self.digests)
        con.register("paper_digests_frame", digests)
        con.execute("create table paper_digests as from paper_digests_frame")
        con.unregister("paper_digests_frame")
        return digests

    def run_over(self, con: duckdb.DuckDBPyConnection, narrowed: pl.DataFrame) -> pl.DataFrame:
        """The SQL's rows for the papers `narrowed` (their columns READ) only."""
        if self.macros_each_row is None or narrowed.height > MACRO_ROWS_MAX:
            return over_papers(con, narrowed, self.sql)
        con.execute(self.macros_each_row)
        try:
            return over_papers(con, narrowed, self.sql)
        finally:
            con.execute(self.macros)

    def files(self) -> list[tuple[int, Path]]:
        """The files that hold the current rows, by number: the latest whole and the parts
        after it, each checked against its seal. Where one fails, the folder is dropped
        (every paper's rows are computed again) and there are none."""
        found = self.numbered()
        wholes = [n for n, f in found if f.stem.startswith("whole-")]
        current = [(n, f) for n, f in found if n >= max(wholes, default=0)]
        try:
            for _, f in current:
                cache.verify(f)
        except cache.Damaged as damage:
            cache.dropped(damage, f"{self.stem}: every paper's rows computed again", self.path)
            return []
        return current

    @staticmethod
    def scan(files: list[tuple[int, Path]]) -> pl.LazyFrame:
        """The rows of `files` (from `files()`, checked), to be read as far as used."""
        if files:
            return pl.concat([pl.scan_parquet(f) for _, f in files], how="diagonal_relaxed")
        return pl.LazyFrame(schema={"paper_id": pl.String, "digest": pl.String})

    def save_whole(
        self,
        path: Path,
        files: list[tuple[int, Path]],
        keep: pl.Series,
        batches: Iterator[pl.DataFrame],
        digests: pl.DataFrame,
    ) -> pl.LazyFrame:
        """Write the whole `path` as its rows stream: the rows `files` hold of the papers
        in `keep`, the rows of `batches` (written a batch at a time beside it first) and
        the digests of every current paper; its rows, to be read as used. The files it
        supersedes stay until `tidy`."""
        first = next(batches)
        columns = [*first.columns, "digest"]
        no_digest = pl.lit(None, pl.String).alias("digest")
        new = (b.with_columns(no_digest).select(columns) for b in chain([first], batches))
        every = pl.concat([first.clear(), digests], how="diagonal_relaxed").select(columns)
        held = self.scan(files).filter(
            pl.col("digest").is_null() & pl.col("paper_id").is_in(keep.implode())
        )
        with tempfile.TemporaryDirectory(dir=self.path) as folder:
            made = Path(folder) / "new.parquet"
            cache.write_parquet_batches(made, new)
            parts = [held.select(columns), pl.scan_parquet(made), every.lazy()]
            cache.sink_parquet(path, pl.concat(parts, how="diagonal_relaxed"))
        return pl.scan_parquet(path).filter(pl.col("digest").is_null()).select(first.columns)

    def next_file(self, kind: str) -> Path:
        """The path of the next file (`part` or `whole`), numbered after every file there."""
        self.path.mkdir(parents=True, exist_ok=True)
        number = max((n for n, _ in self.numbered()), default=0) + 1
        return self.path / f"{kind}-{number:06d}.parquet"

    def numbered(self) -> list[tuple[int, Path]]:
        """Every part and whole in the folder, by number, checked or not."""
        if self.path is None or not self.path.is_dir():
            return []
        return sorted(
            (int(f.stem.split("-")[1]), f)
            for f in self.path.glob("*.parquet")
            if f.stem.split("-")[0] in ("part", "whole") and f.stem.split("-")[1].isdigit()
        )

    def tidy(self, written: Path) -> None:
        """Once `written` is: where it is a whole, the files numbered below it go (it
        supersedes them); and the files of other SQL texts or inputs."""
        if written.stem.startswith("whole-"):
            below = int(written.stem.split("-")[1])
            for _, old in (f for f in self.numbered() if f[0] < below):
                cache.drop(old)
        for stale in self.path.parent.glob(f"{self.stem}-*"):
            if stale != self.path:  # rows of another SQL text or input (or layout)
                cache.drop(stale)
