"""The pipeline's tasks: each stage's entry as a Prefect task that takes and returns plain
data (frames, small dataclasses), so it can run on any worker, and the tasks a stage fans
out over a Dask cluster (`--cluster`). Each task is named; none is cached by Prefect (the
stages keep their own sealed caches)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
from prefect import task
from prefect.cache_policies import NO_CACHE

from flows import derive, embed, ingest, publish, validate
from flows.core.cluster import cluster_workers, on_workers
from flows.core.held import IN_FRAME
from flows.core.settings import Settings


@dataclass
class Ingested:
    """What ingest hands on: the file, paper, location and reject tables, and where the
    papers' raw and clean abstracts lie (`texts`: the papers frame holds their hashes)."""

    result: ingest.IngestResult
    papers: pl.DataFrame
    paper_sources: pl.DataFrame

    @property
    def texts(self) -> ingest.RecordTexts:
        return self.result.texts

    @property
    def tables(self) -> dict[str, pl.DataFrame]:
        return {
            "sources": self.result.sources.sort("path"),
            "papers": self.papers,
            "paper_sources": self.paper_sources,
            "rejects": self.result.rejects.sort("source_path", "record_no"),
        }


@task(name="ingest_raw", cache_policy=NO_CACHE)
def ingest_raw(settings: Settings, shown: pl.DataFrame | None = None) -> Ingested:
    """Read the raw files (unchanged ones from the parse cache) into papers and rejects;
    a paper shows the record the last version showed it from (`shown`) while it holds it.

    On a cluster, each file not parsed yet is first parsed by a worker into the cache.
    """
    parsed: set[str] = set()  # files the workers parsed (the run reads them from the cache)
    if fan := on_workers(parse_file, settings=settings):
        jobs = ingest.pending_parses(
            settings.raw, settings.min_words, settings.max_words, settings.cache_path / "parsed"
        )
        fan(jobs)
        parsed = {ingest.shown(job.path) for job in jobs}  # as sources rows name them
    with ingest.reading_progress() as advance:
        result = ingest.ingest(
            settings.raw,
            min_words=settings.min_words,
            max_words=settings.max_words,
            cache_dir=settings.cache_path / "parsed",
            progress=advance,
        )
    for source in result.files:
        source.cached = source.cached and source.path not in parsed
    # The abstracts stay in the parts: each stage reads back those of the papers it works on.
    papers, paper_sources = ingest.build_papers(result.held_back_records(), shown)
    return Ingested(result, papers, paper_sources)


@task(name="parse_file", cache_policy=NO_CACHE)
def parse_file(job: ingest.ParseJob, settings: Settings) -> str:
    """Parse one raw file into the parse cache (on a worker); its counts, for the log."""
    cache = ingest.ParseCache(
        settings.cache_path / "parsed", settings.min_words, settings.max_words
    )
    source, _, _ = ingest.parse_into_cache(job, cache)
    return f"{source.path}: {source.accepted} accepted, {source.rejected} rejected"


@task(name="embed_papers", cache_policy=NO_CACHE)
def embed_papers(
    papers: pl.DataFrame, settings: Settings, texts: ingest.RecordTexts | None = None
) -> embed.EmbedResult:
    """Vectors for every paper (the table in paper_id order); only texts new for this model
    are encoded, their abstracts read back through `texts` where the papers hold them back.

    On a cluster, the texts to encode go to the workers in shards (`encode_shard`). The
    sample of reduced-precision vectors is left for `check_agreement`, which runs beside
    the derive stage.
    """
    _, info = embed.load_model(settings.model, settings.device, settings.precision)
    embedded = embed.embed_papers(
        papers,
        settings.model,
        settings.batch_size,
        settings.device,
        settings.precision,
        cache_dir=settings.cache_path / "embeddings",
        # Workers load the model the flow resolved: the same device and precision.
        on_workers=on_workers(
            encode_shard, settings=settings.with_(device=info.device, precision=info.precision)
        ),
        pieces=2 * cluster_workers(),
        check=False,
        texts=texts or IN_FRAME,
    )
    # In paper_id order, as the run publishes it: one frame of every vector, not two.
    embedded.table = embedded.table.sort("paper_id")
    return embedded


@task(name="encode_shard", cache_policy=NO_CACHE)
def encode_shard(shard: pl.DataFrame, settings: Settings) -> tuple[str, int]:
    """Encode one shard of texts into the embedding cache (on a worker): its part and count."""
    return embed.encode_shard(
        shard, settings.model, settings.batch_size, settings.device, settings.precision,
        settings.cache_path / "embeddings",
    )  # fmt: skip


@task(name="check_agreement", cache_policy=NO_CACHE)
def check_agreement(embedded: embed.EmbedResult, settings: Settings) -> dict | None:
    """Cosine of the run's reduced-precision vectors to fp32 ones, on a sample of the texts
    encoded now (None when none was, or at fp32)."""
    return embed.check_sample(embedded, settings.model, settings.device)


@task(name="neighbor_rows", cache_policy=NO_CACHE)
def neighbor_rows(rows: tuple[int, int], matrix: Path, graph: Path | None, settings: Settings):
    """Neighbours and near-duplicate pairs of rows [first, stop) of the matrix file, against
    every paper, exactly or through the graph file (on a worker)."""
    width = max(settings.neighbors_k, derive.PAIR_CAP)
    return derive.search_rows(rows, matrix, graph, width, settings.duplicate_threshold)


@task(name="derive_tables", cache_policy=NO_CACHE)
def derive_tables(
    inputs: dict[str, pl.DataFrame],
    embedded: embed.EmbedResult,
    settings: Settings,
    last: publish.Previous,
    texts: ingest.RecordTexts | None = None,
) -> dict[str, pl.DataFrame]:
    """Neighbours, near-duplicates, topics, mentions and stats, built in DuckDB from sql/.

    The last run's neighbour lists are updated only for vectors of the same model, weights
    and precision; `last` is what the latest version holds: its topics and map carry over.
    """
    info = embedded.info
    model_key = f"{info.model_id}:{info.weights_sha256}:{info.precision}"
    return derive.derive_tables(
        inputs, embedded.table, settings, model_key, last, neighbor_rows, texts or IN_FRAME
    )


@task(name="validate_tables", cache_policy=NO_CACHE)
def validate_tables(
    tables: dict[str, pl.DataFrame],
    settings: Settings,
    run_id: str,
    parameters: dict,
    texts: ingest.RecordTexts | None = None,
) -> tuple[pl.DataFrame, list]:
    """Run the suite of each table in `tables` that has one: the dq_results rows and the
    suite results for the Data Docs (the papers' abstracts read back through `texts` for
    the rows checked now, where the papers hold them back)."""
    memo = settings.cache_path / "dq"
    validator = validate.Validator(settings.warehouse / "gx", run_id, memo, texts or IN_FRAME)
    names = [name for name in validate.suite_names() if name in tables]
    rows = [validator.validate(name, tables[name], parameters) for name in names]
    return pl.concat(rows), validator.unstored


@task(name="publish_snapshot", cache_policy=NO_CACHE)
def publish_snapshot(
    tables: dict[str, pl.DataFrame],
    settings: Settings,
    message: str,
    manifest: dict,
    dim: int,
    texts: ingest.RecordTexts | None = None,
) -> tuple[int, dict]:
    """Commit the tables to the DuckLake catalog as one snapshot: its version and the rows
    each table gained and lost. `texts` gives back the abstracts of the papers rows that
    are published anew (the papers frame holds their hashes)."""
    fill = texts.filled if texts is not None else None
    return publish.publish_tables(tables, settings, message, manifest, dim, fill)
