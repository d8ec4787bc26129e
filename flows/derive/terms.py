"""Topic terms: the words left out of them, and the papers of each topic using each term
(term_counts, what sql/topic_terms.sql weighs), counted for what changed since the last
run (`TermCounts`)."""

from __future__ import annotations

import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path

import duckdb
import polars as pl

from flows.core import cache
from flows.core.held import IN_FRAME, Texts
from flows.core.lake import read_sql
from flows.core.settings import SQL_DIR
from flows.derive.paper_rows import PaperRows, PaperRowsUpdate

TOPIC_TERMS = 8


def stopwords() -> pl.DataFrame:
    """Words left out of topic terms: scikit-learn's English list plus the academic filler
    in sql/seeds/academic_stopwords.csv (one word a line; extend it freely)."""
    academic = pl.read_csv(SQL_DIR / "seeds" / "academic_stopwords.csv")["word"].to_list()
    return pl.DataFrame({"word": sorted(english_stop_words() | set(academic))})


@lru_cache(maxsize=1)
def english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop words, read from their own module: importing them
    through the package would load scikit-learn whole on every run."""
    spec = importlib.util.find_spec("sklearn")
    path = Path(spec.origin).parent / "feature_extraction" / "_stop_words.py"
    module = importlib.util.module_from_spec(
        importlib.util.spec_from_file_location("paperlake_sklearn_stop_words", path)
    )
    module.__spec__.loader.exec_module(module)
    return frozenset(module.ENGLISH_STOP_WORDS)


class TermCounts:
    """Papers of each topic using each term (table term_counts, what topic_terms weighs),
    kept in the cache between runs with the vocabulary and the papers and topics they were
    counted from. A run reads the tokens of the papers that came, left, changed text or
    topic, or use a plural whose folding changed (`changed_tokens`), so it costs what
    changed; without earlier counts every paper counts as come.

    One Parquet file per SQL text and token cache, replaced atomically after each build,
    with three kinds of rows: a paper counted (paper_id, digest, topic_id), a word of the
    vocabulary (word, papers) and a count (topic_id, term, docs).
    """

    SQL = (
        "aggregate/word_paper_changes",
        "aggregate/word_papers",
        "aggregate/word_terms",
        "aggregate/term_changes",
        "aggregate/term_counts",
    )
    PAPERS = {"paper_id": pl.String, "digest": pl.String, "topic_id": pl.Int32}
    WORDS = {"word": pl.String, "papers": pl.Int64}
    COUNTS = {"topic_id": pl.Int32, "term": pl.String, "docs": pl.Int64}

    def __init__(self, folder: Path | None, tokens: PaperRows):
        """Args:
        tokens: the cache of sql/aggregate/paper_tokens.sql the counts are made from.
        """
        self.path: Path | None = None
        if folder is not None and tokens.path is not None:
            # Named as when the tokens were one file: counts made then are used still.
            tokens_name = tokens.path.with_suffix(".parquet").name
            key = hashlib.sha256(f"{duckdb.__version__}\n{tokens_name}".encode())
            for name in self.SQL:
                key.update(read_sql(name).encode())
            self.path = folder / f"term-counts-{key.hexdigest()[:16]}.parquet"

    def build(
        self, con: duckdb.DuckDBPyConnection, tokens: PaperRowsUpdate, topics: pl.DataFrame
    ) -> None:
        """Create term_counts in `con` for the papers in `topics` (paper_id, topic_id).

        The changed papers' tokens are read and counted BATCH_PAPERS papers at a time, so a
        run that counts every paper holds one batch's tokens, not the corpus's.

        Args:
            tokens: the rows of sql/aggregate/paper_tokens.sql now and before this run.
        """
        now = tokens.digests.join(topics, on="paper_id").select(list(self.PAPERS))
        now = now.cast(self.PAPERS)
        counted, words, counts = self.load(tokens.before_digests)
        for name, frame in (("word_papers_before", words), ("term_counts_before", counts)):
            con.register(name, frame)
        con.execute("create or replace table word_paper_changes (word varchar, papers bigint)")
        summed_in_batches(con, tokens, changed_papers(tokens, counted, now), self.SQL[0])
        for name in self.SQL[1:3]:
            con.execute(f"create or replace table {name.split('/')[1]} as {read_sql(name)}")
        refolded = con.table("word_terms").filter("term_before <> term_after").pl()["word"]
        changed = changed_papers(tokens, counted, now, refolded if len(refolded) else None)
        con.execute(
            "create or replace table term_changes (topic_id integer, term varchar, docs bigint)"
        )
        summed_in_batches(con, tokens, changed, self.SQL[3])
        con.execute(f"create or replace table term_counts as {read_sql(self.SQL[4])}")
        self.save(now, con.table("word_papers").pl(), con.table("term_counts").pl())
        for name in ("word_papers_before", "term_counts_before"):
            con.unregister(name)
        for name in ("word_paper_changes", "word_papers", "word_terms", "term_changes"):
            con.execute(f"drop table {name}")

    def load(self, cached: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """The papers the last run counted, its vocabulary and its counts; none where there
        are none, or where the token cache no longer holds every counted paper's tokens.

        Args:
            cached: paper_id, digest of the papers whose tokens the token cache held.
        """
        empty = tuple(pl.DataFrame(schema=s) for s in (self.PAPERS, self.WORDS, self.COUNTS))
        if self.path is None:
            return empty
        state = cache.load(self.path, check_counts, "every paper's terms are counted again")
        if state is None:
            return empty
        counted = state.filter(pl.col("paper_id").is_not_null()).select(list(self.PAPERS))
        if counted.join(cached, on=["paper_id", "digest"], how="anti").height:
            return empty
        words = state.filter(pl.col("word").is_not_null()).select(list(self.WORDS))
        counts = state.filter(pl.col("term").is_not_null()).select(list(self.COUNTS))
        return counted, words, counts

    def save(self, counted: pl.DataFrame, words: pl.DataFrame, counts: pl.DataFrame) -> None:
        """Replace the file by these papers, vocabulary and counts; files of other SQL
        texts or token caches go."""
        if self.path is None:
            return
        state = pl.concat([counted, words, counts], how="diagonal_relaxed")
        cache.write_parquet(self.path, state)
        for stale in self.path.parent.glob("term-counts-*.parquet"):
            if stale != self.path:
                cache.drop(stale)


def check_counts(state: pl.DataFrame) -> str | None:
    """Why kept term counts cannot be trusted (a count below one, a count of no topic or
    term, a paper counted twice); None where they can."""
    columns = {**TermCounts.PAPERS, **TermCounts.WORDS, **TermCounts.COUNTS}
    if not set(columns) <= set(state.columns):
        return f"columns {state.columns}"
    counts = state.filter(pl.col("docs").is_not_null())
    if (counts["docs"] < 1).any() or counts.select(
        "topic_id", "term"
    ).null_count().sum_horizontal()[0]:
        return "counts that are no count of a topic's term"
    if (state.filter(pl.col("word").is_not_null())["papers"] < 1).any():
        return "words used by no paper"
    papers = state.filter(pl.col("paper_id").is_not_null())["paper_id"]
    if papers.n_unique() != papers.len():
        return "papers counted twice"
    return None


# Papers whose tokens are read and counted at once (`summed_in_batches`): at about 150
# tokens an abstract, a few million rows a batch.
BATCH_PAPERS = 20_000


def summed_in_batches(
    con: duckdb.DuckDBPyConnection, tokens: PaperRowsUpdate, changed: pl.DataFrame, sql: str
) -> None:
    """Add the rows of sql/<sql>.sql over the tokens of each batch of `changed` papers
    (`changed_papers`) to the table of its name in `con`: the SQL reads one batch's
    tokens as changed_tokens, and the table holds every batch's sums."""
    table = sql.split("/")[1]
    for start in range(0, changed.height, BATCH_PAPERS):
        con.register("changed_tokens", changed_tokens(tokens, changed.slice(start, BATCH_PAPERS)))
        try:
            con.execute(f"insert into {table} select * from ({read_sql(sql)})")
        finally:
            con.unregister("changed_tokens")


def changed_papers(
    tokens: PaperRowsUpdate,
    counted: pl.DataFrame,
    now: pl.DataFrame,
    refolded: pl.Series | None = None,
) -> pl.DataFrame:
    """The papers whose share of the term counts changes (paper_id, side, topic_before,
    topic_after), with the `side` they count on: -1 taken back from the topic they were
    counted under (topic_before), +1 given to their topic now (topic_after), 0 both.

    A paper that came, left or changed text (digest) counts its tokens now on +1 and its
    tokens before on -1. One that moved to another topic gives its terms to it and takes
    them from the topic before: its tokens once, on side 0. One that uses one of the
    `refolded` words (whose plural folding changed) makes other terms now: its tokens on
    -1 and on +1, as if its text had changed.

    Args:
        counted, now: paper_id, digest, topic_id of the papers counted last and of now.
    """
    same_text = ["paper_id", "digest"]
    stayed = counted.join(now, on=same_text, suffix="_now")
    if refolded is not None:
        using = tokens.rows.filter(pl.col("word").is_in(refolded.implode()))
        using = using.select("paper_id").collect()["paper_id"]
        refolding = stayed.filter(pl.col("paper_id").is_in(using.implode()))
    else:
        refolding = stayed.clear()
    moved = stayed.filter(pl.col("topic_id") != pl.col("topic_id_now"))
    moved = moved.join(refolding, on="paper_id", how="anti")
    gone = pl.concat([counted.join(now, on=same_text, how="anti").select("paper_id", "topic_id"),
                      refolding.select("paper_id", "topic_id")])  # fmt: skip
    came = pl.concat([now.join(counted, on=same_text, how="anti").select("paper_id", "topic_id"),
                      refolding.select("paper_id", topic_id="topic_id_now")])  # fmt: skip
    null = pl.lit(None, pl.Int32)
    return pl.concat([
        gone.select("paper_id", side=-1, topic_before="topic_id", topic_after=null),
        came.select("paper_id", side=1, topic_before=null, topic_after="topic_id"),
        moved.select("paper_id", side=0, topic_before="topic_id", topic_after="topic_id_now"),
    ]).cast({"side": pl.Int32, "topic_before": pl.Int32, "topic_after": pl.Int32})  # fmt: skip


def changed_tokens(tokens: PaperRowsUpdate, papers: pl.DataFrame) -> pl.DataFrame:
    """The tokens of `papers` (from `changed_papers`) with their side and topics: those
    taken back (side -1) as the cache held them, the others as they are now."""
    back = papers.filter(pl.col("side") < 0)
    return pl.concat([with_topics(tokens.before, back),
                      with_topics(tokens.rows, papers.filter(pl.col("side") >= 0))])  # fmt: skip


def with_topics(tokens: pl.LazyFrame, papers: pl.DataFrame) -> pl.DataFrame:
    """The tokens of `papers` (paper_id, side, topic_before, topic_after), with the
    paper's side and topics."""
    picked = tokens.filter(pl.col("paper_id").is_in(papers["paper_id"].implode()))
    return (
        picked.join(papers.lazy(), on="paper_id")
        .select("side", "topic_before", "topic_after", "paper_id", "word", "position")
        .collect()
    )


def count_topic_terms(
    con: duckdb.DuckDBPyConnection,
    cache: Path | None,
    topics: pl.DataFrame,
    papers: pl.DataFrame,
    texts: Texts = IN_FRAME,
) -> None:
    """Create term_counts in `con` (which holds stopwords): papers of each topic in `topics`
    (paper_id, topic_id) using each term of their abstracts (in `papers`, or read back
    through `texts`), from the tokens and counts kept in `cache` where there are some
    (`PaperRows`, `TermCounts`)."""
    tokens = PaperRows(con, cache, "aggregate/paper_tokens", ("stopwords",), papers, texts)
    TermCounts(cache, tokens).build(con, tokens.update(con), topics)
