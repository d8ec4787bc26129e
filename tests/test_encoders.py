"""Exported encoders (OpenVINO, ONNX Runtime) against fp32 torch, with the real model."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from flows import embed
from flows.core.settings import PACKAGED_MODEL
from flows.embed import agreement, encoders, exports, graphs, machine, model, vectors
from flows.embed import tokens as embed_tokens
from tests.conftest import SAMPLE_RAW

PRECISIONS = list(encoders.EXPORTED)  # openvino-fp32, openvino-bf16, onnx-fp32


def sample_texts() -> list[str]:
    """The 38 abstracts of data/raw, as the hand-written baseline reads them."""
    return [
        block.strip()
        for path in sorted(SAMPLE_RAW.glob("*.txt"))
        for block in path.read_text(encoding="utf-8").split("\n\n")[1:]
        if block.strip()
    ]


@pytest.fixture(scope="module")
def export_cache(tmp_path_factory) -> Path:
    """One fresh encoder cache for this module: every backend is exported here once."""
    return tmp_path_factory.mktemp("encoders")


@pytest.fixture(scope="module")
def fp32():
    return model.load_torch(PACKAGED_MODEL, "cpu", "fp32")


def exported(fp32, precision: str, cache: Path, threads: int = 2) -> encoders.GraphEncoder:
    pytest.importorskip(encoders.EXPORTED[precision])
    torch_encoder, info = fp32
    return exports.exported_encoder(
        torch_encoder.st, Path(info.path), info.weights_sha256, precision, cache, threads
    )


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_export_agrees_with_fp32_torch_on_the_sample(fp32, export_cache, precision):
    encoder = exported(fp32, precision, export_cache)
    texts = sample_texts()
    assert len(texts) == 38
    together = encoder.encode(texts, 8)  # five batches, OpenVINO's run side by side
    fast = unit(together)
    exact = unit(fp32[0].encode(texts, 8))
    # Each batch gives the same bits whether it runs alone or beside others, in order.
    alone = np.concatenate([encoder.encode(texts[i : i + 8], 8) for i in range(0, 38, 8)])
    assert np.array_equal(together, alone)
    cosine = np.sum(fast * exact, axis=1)
    assert cosine.mean() >= exports.MIN_MEAN_COSINE
    assert cosine.min() >= exports.MIN_COSINE
    # The graph holds the whole model: mean pooling and normalisation included.
    np.testing.assert_allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    backend = encoders.EXPORTED[precision]
    folder = exports.export_folder(export_cache, backend, fp32[1].weights_sha256)
    files = sorted(p.name for p in folder.iterdir() if not p.name.startswith("checked-"))
    assert files == (
        ["compiled", "model.bin", "model.xml", "probe.json", "seal.json"]
        if backend == "openvino"
        else ["model.onnx", "probe.json", "seal.json"]
    )
    # fp32 torch's vectors of the probe texts, against which later loads are checked.
    np.testing.assert_allclose(
        exports.read_probe(folder), fp32[0].encode(list(graphs.PROBE_TEXTS), 4), atol=1e-6
    )
    if backend == "openvino":  # the compiled model, loaded from here by the next process
        assert {p.suffix for p in (folder / "compiled").iterdir()} == {".blob"}
    # The passed check is recorded for this kind of CPU, with what a torch-free load needs.
    record = json.loads(exports.check_record(folder, precision).read_text())
    assert record["dim"] == 384 and record["min_cosine"] >= exports.MIN_COSINE
    if backend == "onnxruntime":  # the transformer fusions took: one Attention a layer
        import onnx

        ops = [node.op_type for node in onnx.load(str(folder / "model.onnx")).graph.node]
        assert ops.count("Attention") == 6


@pytest.mark.parametrize("precision", PRECISIONS)
def test_export_vectors_are_bit_identical_run_to_run_and_across_threads(
    fp32, export_cache, precision
):
    texts = sample_texts()[:20]
    two = exported(fp32, precision, export_cache, threads=2)
    first, again = two.encode(texts, 8), two.encode(texts, 8)
    # Loaded again from the cache with one thread, as a Dask worker with one slot would.
    one = exported(fp32, precision, export_cache, threads=1).encode(texts, 8)
    assert np.array_equal(first, again)
    assert np.array_equal(first, one)


def test_failed_export_falls_back_to_torch_and_says_why(tmp_path, monkeypatch, caplog):
    pytest.importorskip("openvino")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("the encoder cache cannot be made under a file")
    monkeypatch.setenv("PAPERLAKE_ENCODER_CACHE", str(blocker / "encoders"))
    embed.load_model.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="paperlake"):
            encoder, info = embed.load_model(PACKAGED_MODEL, "cpu", "openvino-fp32")
    finally:
        embed.load_model.cache_clear()  # later tests load the export from a working cache
    assert isinstance(encoder, encoders.TorchEncoder)
    assert info.precision == "fp32"
    assert "openvino-fp32 unavailable (NotADirectoryError" in caplog.text
    assert "encoding with torch fp32" in caplog.text


def test_encoder_that_disagrees_is_refused(fp32, export_cache):
    pytest.importorskip("openvino")
    torch_encoder, info = fp32
    # A bound no real encoder meets stands in for an export or a CPU that went wrong.
    with pytest.raises(RuntimeError, match=r"openvino-bf16 disagrees with fp32 torch: mean"):
        exports.exported_encoder(
            torch_encoder.st, Path(info.path), info.weights_sha256, "openvino-bf16",
            export_cache, 2, min_mean_cosine=1.5,
        )  # fmt: skip


@pytest.mark.parametrize("precision", PRECISIONS)
def test_recorded_precision_names_the_backend(precision, export_cache, monkeypatch, tmp_path):
    pytest.importorskip(encoders.EXPORTED[precision])
    monkeypatch.setenv("PAPERLAKE_ENCODER_CACHE", str(export_cache))
    embed.load_model.cache_clear()
    texts = sample_texts()[:3]
    papers = pl.DataFrame({"paper_id": ["a", "b", "c"], "title": [None] * 3, "abstract": texts})
    result = embed.embed_papers(
        papers, device="cpu", precision=precision, show_progress=False, cache_dir=tmp_path
    )
    exact = embed.embed_papers(
        papers, device="cpu", precision="fp32", show_progress=False, cache_dir=tmp_path
    )
    assert result.info.precision == precision
    assert (result.computed, exact.computed) == (3, 3)  # no vectors shared across backends
    folders = {embed.EmbeddingCache(tmp_path, r.info).folder for r in (result, exact)}
    assert len(folders) == 2 and all(f.exists() for f in folders)
    if agreement.reduced_precision(precision):  # each run checks a sample of its texts
        assert result.agreement["sample"] == 3 and result.agreement["reference"] != precision
    else:  # an fp32 export: its check against fp32 torch on this CPU, made at export
        assert result.agreement["sample"] == len(graphs.PROBE_TEXTS)
        assert result.agreement["checked"] == "export, on this kind of CPU"
        assert result.agreement["reference"] == "fp32"
    assert result.agreement["min_cosine"] >= exports.MIN_COSINE
    assert exact.agreement is None  # fp32 torch is the reference itself


def test_auto_picks_bf16_where_native_else_the_fastest_exact_export():
    pytest.importorskip("openvino")
    expected = "openvino-bf16" if machine.cpu_has_bf16() else "openvino-fp32"
    assert machine.choose_precision("auto", "cpu") == expected
    assert machine.choose_precision("fp32", "cpu") == "fp32"  # plain torch, as asked
    assert machine.choose_precision("auto", "cuda") == "fp16"


def test_tokenizers_alone_tokenize_the_sample_as_the_model_does(fp32):
    torch_encoder, info = fp32
    texts = [*sample_texts(), "", "x " * 400]  # empty, and one past max_seq_length (256)
    fast = embed_tokens.tokenizer_features(Path(info.path))(texts)
    own = embed_tokens.st_features(torch_encoder.st)(texts)
    assert sorted(own) == ["attention_mask", "input_ids", "token_type_ids"]
    for name, value in own.items():
        assert np.array_equal(fast[name], value), name
    assert fast["input_ids"].shape == (40, 256)


def test_texts_tokenized_once_give_the_models_tensors_for_any_batch_of_them(fp32):
    path = Path(fp32[1].path)
    texts = [*sample_texts(), "", "x " * 400, "Graph neural networks."]
    tokens = embed_tokens.tokenize(path, texts)
    one_at_a_time = embed_tokens.tokenizer_features(path)
    lengths = [int(one_at_a_time([t])["attention_mask"].sum()) for t in texts]
    assert tokens.lengths.tolist() == lengths
    assert lengths[-3:] == [2, 256, 6]  # [CLS] [SEP]; cut at max_seq_length; 4 words
    order = vectors.longest_first(tokens.lengths)
    for rows in (order[:4], order[-4:], np.array([38, 39, 40, 0]), np.array([38])):
        given = tokens.features(rows)
        expected = one_at_a_time([texts[r] for r in rows])
        assert sorted(given) == sorted(expected)
        for name, value in expected.items():
            assert given[name].dtype == value.dtype
            assert np.array_equal(given[name], value), (name, rows)


def test_encoding_tokens_gives_the_bits_of_encoding_their_texts(fp32, export_cache):
    texts = sample_texts()[:10]
    encoder = exported(fp32, "openvino-fp32", export_cache)
    tokens = embed_tokens.tokenize(Path(fp32[1].path), texts)
    rows = vectors.longest_first(tokens.lengths)
    from_texts = encoder.encode([texts[r] for r in rows], 4)
    assert np.array_equal(encoder.encode_tokens(tokens, rows, 4), from_texts)


@pytest.mark.parametrize("precision", ["openvino-bf16", "onnx-fp32"])
def test_checked_export_loads_without_torch_and_gives_the_same_vectors(
    fp32, export_cache, precision
):
    texts = sample_texts()[:12]
    checked = exported(fp32, precision, export_cache).encode(texts, 4)
    script = f"""
import json, sys
import numpy as np
from flows import embed
from flows.core.settings import PACKAGED_MODEL
encoder, info = embed.load_model(PACKAGED_MODEL, "auto", {precision!r})
vectors = encoder.encode(json.loads(sys.stdin.read()), 4)
np.save(sys.argv[1], vectors)
print(json.dumps({{"torch": "torch" in sys.modules, "dim": info.dim,
                  "precision": info.precision, "device": info.device,
                  "fed by tokenizer.json": encoder.tokenizer is not None}}))
"""
    out = export_cache / f"fresh-{precision}.npy"
    env = {"PAPERLAKE_ENCODER_CACHE": str(export_cache), "PAPERLAKE_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(out)], input=json.dumps(texts), text=True,
        capture_output=True, env={**os.environ, **env}, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout.splitlines()[-1])
    assert report == {"torch": False, "dim": 384, "precision": precision, "device": "cpu",
                      "fed by tokenizer.json": True}  # fmt: skip
    assert np.array_equal(np.load(out), checked)


def test_token_limit_without_max_seq_length_is_the_models_own(tmp_path):
    """sentence-transformers 6 saves sentence_bert_config.json without max_seq_length."""
    (tmp_path / "sentence_bert_config.json").write_text('{"do_lower_case": false}')
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 512}')
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": 1000000000000}')
    assert embed_tokens.max_seq_length(tmp_path) == 512
    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 256}')
    assert embed_tokens.max_seq_length(tmp_path) == 256


def damage_export(folder: Path, how: str) -> None:
    """The export's weights garbled in the middle, or cut short."""
    weights = folder / ("model.bin" if (folder / "model.bin").exists() else "model.onnx")
    data = bytearray(weights.read_bytes())
    if how == "garbled":
        middle = len(data) // 2
        data[middle : middle + 4096] = b"\xff" * 4096  # NaN as float32
    else:
        del data[len(data) // 2 :]
    weights.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["garbled", "truncated"])
def test_a_damaged_export_is_made_again_not_trusted_nor_left_for_torch(
    fp32, export_cache, tmp_path, monkeypatch, caplog, how
):
    """A run loads a checked export without torch; a damaged one gives NaN or stray vectors
    (or does not load): it is made again, and the run's vectors are the export's own."""
    pytest.importorskip("openvino")
    exported(fp32, "openvino-fp32", export_cache)
    cache = tmp_path / "encoders"
    shutil.copytree(export_cache, cache)
    folder = exports.export_folder(cache, "openvino", fp32[1].weights_sha256)
    shutil.rmtree(folder / "compiled")
    damage_export(folder, how)
    monkeypatch.setenv("PAPERLAKE_ENCODER_CACHE", str(cache))
    embed.load_model.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="paperlake"):
            encoder, info = embed.load_model(PACKAGED_MODEL, "cpu", "openvino-fp32")
        texts = sample_texts()[:6]
        vectors = encoder.encode(texts, 4)
    finally:
        embed.load_model.cache_clear()
    assert isinstance(encoder, encoders.GraphEncoder) and info.precision == "openvino-fp32"
    assert "export fails" in caplog.text and "made again" in caplog.text
    assert np.isfinite(vectors).all()
    cosine = np.sum(unit(vectors) * unit(fp32[0].encode(texts, 4)), axis=1)
    assert cosine.min() >= exports.MIN_COSINE


def test_a_damaged_query_export_is_made_again(fp32, export_cache, tmp_path, monkeypatch, caplog):
    pytest.importorskip("onnxruntime")
    from flows.embed import query as query_encoder

    exported(fp32, "onnx-fp32", export_cache)
    cache = tmp_path / "encoders"
    shutil.copytree(export_cache, cache)
    shutil.rmtree(exports.export_folder(cache, "openvino", fp32[1].weights_sha256))
    damage_export(exports.export_folder(cache, "onnxruntime", fp32[1].weights_sha256), "garbled")
    monkeypatch.setenv("PAPERLAKE_ENCODER_CACHE", str(cache))
    query_encoder.load_query_encoder.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="paperlake"):
            vectors = query_encoder.encode_queries(sample_texts()[:3], PACKAGED_MODEL)
    finally:
        query_encoder.load_query_encoder.cache_clear()
    assert "the onnxruntime export fails" in caplog.text
    cosine = np.sum(vectors * unit(fp32[0].encode(sample_texts()[:3], 4)), axis=1)
    assert np.isfinite(cosine).all() and cosine.min() >= exports.MIN_COSINE
