"""The query encoder: sentence-transformers' vectors without torch, loaded once a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from flows import embed
from flows.core.lake import open_lake
from flows.core.settings import PACKAGED_MODEL, PROJECT_ROOT, encoder_cache
from flows.embed import query as query_encoder
from flows.embed import tokens

SHORT_QUERIES = [
    "speculative decoding",
    "  graph neural networks for molecules  ",  # sentence-transformers strips
    "Chain-of-Thought (CoT) reasoning",
    "Ünïcode naïve café 数据 ≥ 10%",
    "",
]


def test_query_vectors_match_sentence_transformers_on_the_sample(sample_run):
    with open_lake(sample_run.settings) as con:
        papers = con.execute("select title, abstract from papers order by paper_id").pl()
    texts = [*embed.paper_text(papers).to_list(), *SHORT_QUERIES, "long " * 600]
    fast = query_encoder.encode_queries(texts, PACKAGED_MODEL)
    exact = embed.encode(texts, precision="fp32", show_progress=False)  # torch, fp32
    cosine = np.sum(fast * exact, axis=1)
    assert len(texts) == 44 and fast.shape == (44, 384)
    assert cosine.min() >= 0.9999, (cosine.min(), texts[int(cosine.argmin())])
    assert np.allclose(np.linalg.norm(fast, axis=1), 1, atol=1e-5)
    # One process, one load: the second call reuses the session and the tokenizer.
    first = query_encoder.query_encoder(PACKAGED_MODEL)
    assert query_encoder.query_encoder(PACKAGED_MODEL) is first
    # The export a run made where there is one (OpenVINO, where it encoded the papers, as on
    # a CPU with native bf16), else one made for queries (onnxruntime first).
    exported = query_encoder.export_folder(
        encoder_cache(), first.backend, embed.weights_sha256(embed.model_path(PACKAGED_MODEL))
    )
    assert (exported / query_encoder.RUNNERS[first.backend][0]).is_file()
    assert first.backend in query_encoder.installed_backends()


SEARCH_IN_A_FRESH_PROCESS = """
import json, sys
from flows.read import search_papers
from flows.core.lake import open_lake
from flows.core.settings import Settings

settings = Settings(warehouse=sys.argv[1])
with open_lake(settings) as con:
    hits = search_papers(con, "speculative decoding", settings, k=3)
    again = search_papers(con, "sparse attention", settings, k=3, mode="dense")
loaded = sorted(
    name for name in sys.modules
    if name.split(".")[0] in ("torch", "sentence_transformers", "transformers")
)
print(json.dumps({"first": hits["abstract"][0][:40], "again": again.height, "loaded": loaded}))
"""


def test_a_search_in_a_fresh_process_imports_no_torch(sample_run):
    query_encoder.query_encoder(PACKAGED_MODEL)  # the export exists (made here if not)
    result = subprocess.run(
        [sys.executable, "-c", SEARCH_IN_A_FRESH_PROCESS, str(sample_run.settings.warehouse)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.splitlines()[-1])
    assert out == {"first": "Speculative sampling reduces the latency", "again": 3, "loaded": []}


def test_weights_digest_is_kept_and_redone_when_the_weights_change(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    weights = model / "model.safetensors"
    weights.write_bytes(b"weights one")
    (model / "config.json").write_text("{}")  # not a weight file
    cache = tmp_path / "cache"
    digest = query_encoder.weights_digest(model, cache)
    assert digest == embed.weights_sha256(model)
    records = list((cache / "digests").glob("*.txt"))
    assert [r.read_text().strip() for r in records] == [digest]
    weights.write_bytes(b"weights two, longer")
    changed = query_encoder.weights_digest(model, cache)
    assert changed != digest and changed == embed.weights_sha256(model)
    assert len(list((cache / "digests").glob("*.txt"))) == 2


def test_tokenizer_truncates_at_max_seq_length_and_pads_to_the_longest(tmp_path):
    path = embed.model_path(PACKAGED_MODEL)
    tokenizer = tokens.load_tokenizer(path)
    long, short = tokenizer.encode_batch(["word " * 600, "one word"])
    # tokenizer.json says 128 and a fixed padding; sentence-transformers uses 256.
    assert tokens.max_seq_length(path) == 256
    assert len(long.ids) == len(short.ids) == 256
    assert sum(short.attention_mask) == 4  # [CLS] one word [SEP]
    assert json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"] == 256


def test_the_search_command_imports_no_torch(sample_run):
    # The export exists (made here if not); the command loads the same backend's.
    backend = query_encoder.query_encoder(PACKAGED_MODEL).backend
    wh = str(sample_run.settings.warehouse)
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "flows.cli", "search", "speculative decoding",
         "-k", "2", "--format", "jsonl", "-w", wh],
        capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    hits = [json.loads(line) for line in result.stdout.splitlines()]
    assert [h["rank"] for h in hits] == [1, 2]
    assert hits[0]["abstract"].startswith("Speculative sampling reduces the latency")
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert backend in imported and "tokenizers" in imported
    heavy = ("torch", "sentence_transformers", "transformers")
    assert not [name for name in imported if name.startswith(heavy)]
