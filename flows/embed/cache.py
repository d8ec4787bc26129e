"""The embedding stage's caches: vectors by model and text hash, and each paper's text hash
as the last run made it. Both are sealed (flows/core/cache.py) and checked when read."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from flows.core import cache
from flows.core.held import HELD_BACK, held_back, text_or_stand_in
from flows.embed.model import ModelInfo


def text_sha256(texts: pl.Series) -> pl.Series:
    """Content hash of each text embedded: the key of the embedding cache."""
    return texts.map_elements(
        lambda t: hashlib.sha256(t.encode("utf-8")).hexdigest()[:32], return_dtype=pl.String
    )


class EmbeddingCache:
    """Vectors already computed, keyed by model (id, weights, precision) and text hash.

    Kept in the warehouse as Parquet parts, one per run that computed anything, each
    written atomically; a crashed run leaves at most a temporary file behind.
    """

    def __init__(self, folder: Path, info: ModelInfo):
        key = f"{info.model_id}:{info.weights_sha256}:{info.precision}"
        self.folder = folder / hashlib.sha256(key.encode()).hexdigest()[:16]
        self.dim = info.dim

    def lookup(self, hashes: pl.Series) -> pl.DataFrame:
        """Cached vectors for `hashes`: text_sha256, embedding. Parts that fail their seal,
        and parts holding a vector that is not a unit vector of the model's dimension, are
        dropped with a warning: their texts are embedded again."""
        schema = {"text_sha256": pl.String, "embedding": pl.List(pl.Float32)}
        parts = self.checked_parts()
        if not parts:
            return pl.DataFrame(schema=schema)
        wanted = pl.DataFrame({"text_sha256": hashes.unique()})
        found = (
            pl.scan_parquet(parts, include_file_paths="_part")
            .join(wanted.lazy(), on="text_sha256", how="semi")
            # A text's first vector where parts repeat it: a filter on the hashes, faster
            # than unique(keep="first") over rows that carry the vectors.
            .filter(pl.col("text_sha256").is_first_distinct())
            .collect()
        )
        good = pl.Series(unit_vectors(found["embedding"], self.dim))
        bad = found.filter(~good)["_part"].unique()
        for part in bad.to_list():
            reason = f"vectors that are not unit vectors of dimension {self.dim}"
            cache.dropped(cache.Damaged(Path(part), reason), "its texts are embedded again")
        return found.filter(~pl.col("_part").is_in(bad.implode())).select(list(schema))

    def checked_parts(self) -> list[Path]:
        """The cache's parts whose bytes match their seals (the others are dropped)."""
        parts = sorted(self.folder.glob("*.parquet")) if self.folder.exists() else []
        good = []
        for part in parts:
            try:
                cache.verify(part)
                good.append(part)
            except FileNotFoundError:
                continue
            except cache.Damaged as damage:
                cache.dropped(damage, "its texts are embedded again")
        return good

    def add(self, hashes: pl.Series, vectors: pl.Series) -> Path | None:
        """Store vectors as a new part (written atomically and sealed); returns its path.

        Only unit vectors of the model's dimension are kept: others (an encoder that went
        wrong) are left out with a warning, to be computed again; the run's data-quality
        checks stop their publish.
        """
        good = pl.Series(unit_vectors(vectors, self.dim))
        if not good.all():
            logging.getLogger("paperlake").warning(
                "embed: %d vectors are not unit vectors of dimension %d: not cached",
                good.len() - good.sum(), self.dim,
            )  # fmt: skip
            hashes, vectors = hashes.filter(good), vectors.filter(good)
        if hashes.len() == 0:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        part = self.folder / f"{hashlib.sha256(''.join(hashes).encode()).hexdigest()[:16]}.parquet"
        frame = pl.DataFrame({"text_sha256": hashes, "embedding": vectors})
        cache.write_parquet(part, frame, whole=False)
        return part


def unit_vectors(vectors: pl.Series, dim: int) -> np.ndarray:
    """Whether each vector has `dim` finite values and unit norm (within float32 error)."""
    sized = (vectors.list.len() == dim).fill_null(False).to_numpy()
    good = sized.copy()
    if sized.any():
        kept = vectors if sized.all() else vectors.filter(pl.Series(sized))
        rows = kept.explode().to_numpy().reshape(-1, dim)
        norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))  # NaN where any value is
        good[sized] = np.abs(norms - 1) < 1e-3
    return good


class TextHashes:
    """Each paper's text hash as the last run made it, found again by a quick 64-bit hash
    of the paper's title and of its abstract's hash (flows/core/held.py: the run's papers
    hold that, not the text), with its id, instead of SHA-256 of every text, which takes
    several times as long and needs every text made (at a million papers, 3 s and a GB of
    strings, and the abstracts read back).

    polars' hashes may change between its versions: the file is one per version.
    """

    SCHEMA = {"paper_id": pl.String, "quick": pl.UInt64, "text_sha256": pl.String}

    def __init__(self, folder: Path):
        self.path = folder / "text-hashes" / f"held-polars-{pl.__version__}.parquet"

    def of(self, papers: pl.DataFrame, text: Callable[[pl.DataFrame], pl.Series]) -> pl.Series:
        """text_sha256 of each paper's text (`text` of some of `papers`: their title and
        abstract); the file keeps them."""
        abstract = text_or_stand_in(papers.columns, "abstract")
        held = held_back(papers.select("paper_id", "title", abstract))
        parts = pl.struct(pl.col("title").cast(pl.String), HELD_BACK["abstract"])
        now = held.select("paper_id", quick=parts.hash())
        kept = self.load()
        found = now.join(kept, on=["paper_id", "quick"], how="left",
                         maintain_order="left")["text_sha256"]  # fmt: skip
        todo = found.is_null()
        if todo.any():
            fresh = text_sha256(text(papers.filter(todo)))
            found = found.scatter(np.flatnonzero(todo.to_numpy()), fresh)
        if todo.any() or kept.height != now.height:
            cache.write_parquet(self.path, now.with_columns(text_sha256=found), whole=False)
            for other in self.path.parent.glob("*.parquet"):
                if other != self.path:
                    cache.drop(other)
        return found

    def load(self) -> pl.DataFrame:
        """The hashes the last run kept, checked (a damaged file is dropped: every text is
        hashed again)."""
        kept = cache.load(self.path, check_text_hashes, "every text is hashed again")
        return pl.DataFrame(schema=self.SCHEMA) if kept is None else kept


def check_text_hashes(kept: pl.DataFrame) -> str | None:
    """Why kept text hashes cannot be trusted (not the file's columns, a paper twice, a
    hash that is not one); None where they can."""
    if dict(kept.schema) != TextHashes.SCHEMA:
        return f"columns {dict(kept.schema)}"
    if kept["paper_id"].null_count() or kept["paper_id"].n_unique() != kept.height:
        return "papers missing or twice"
    if not kept["text_sha256"].str.contains("^[0-9a-f]{32}$").fill_null(False).all():
        return "text hashes that are not sha256 prefixes"
    return None
