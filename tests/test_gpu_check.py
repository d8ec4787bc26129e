"""bench/gpu_check.sh's Python on the CPU, small, as the GPU machine runs it: without
polars, DuckDB, Prefect, pydantic or Great Expectations."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from flows.core.settings import PROJECT_ROOT
from flows.embed import model

sys.path.insert(0, str(PROJECT_ROOT / "bench"))
from corpus import abstracts  # noqa: E402
from gpu_texts import load, recombined, write  # noqa: E402

# What the GPU machine lacks: each resolves to a module that fails to import.
ABSENT = ("duckdb", "polars", "prefect", "pydantic", "pydantic_settings", "great_expectations")


@pytest.fixture
def without_lakehouse(tmp_path) -> dict[str, str]:
    """An environment whose Python finds none of ABSENT."""
    hidden = tmp_path / "absent"
    hidden.mkdir()
    for name in ABSENT:
        (hidden / f"{name}.py").write_text(f"raise ImportError('{name}: not on this machine')\n")
    path = os.pathsep.join([str(hidden), str(PROJECT_ROOT)])
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}


def test_the_hidden_modules_are_really_hidden(without_lakehouse):
    run = subprocess.run([sys.executable, "-c", "import polars"], env=without_lakehouse,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 1 and "polars: not on this machine" in run.stderr


def test_the_stage_s_encoding_modules_import_without_the_lakehouse(without_lakehouse):
    code = (
        "import sys, flows.embed, flows.embed.batches, flows.embed.encoders;"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {ABSENT!r}))"
    )
    run = subprocess.run([sys.executable, "-c", code], env=without_lakehouse,
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert run.stdout.strip() == "[]"


def test_texts_are_recombined_to_real_lengths_and_read_back(tmp_path):
    real = abstracts(40)
    texts = recombined(real, 300)
    assert len(set(texts)) == 300
    median = sorted(len(t) for t in real)[20]
    assert 0.7 * median < sorted(len(t) for t in texts)[150] < 1.3 * median
    write(tmp_path / "t.xz", texts)
    assert load(tmp_path / "t.xz") == texts and load(tmp_path / "t.xz", 5) == texts[:5]


def test_the_check_runs_on_the_cpu_and_reports_what_it_measured(tmp_path, without_lakehouse):
    write(tmp_path / "abstracts.txt.xz", recombined(abstracts(40), 64))
    packaged = model.model_path(model.PACKAGED_MODEL)
    args = ["--device", "cpu", "--precision", "fp32", "--n", "64", "--batch", "8",
            "--plain", "16", "--sample", "32", "--neighbours", "3000",
            "--model", str(packaged), "--texts", str(tmp_path / "abstracts.txt.xz")]  # fmt: skip
    env = {**without_lakehouse, "OUT": str(tmp_path / "out"), "PAPERLAKE_THREADS": "2"}
    subprocess.run([sys.executable, str(PROJECT_ROOT / "bench" / "gpu_embed.py"), *args],
                   env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert report["device"] == "cpu" and report["tokens"]["n"] == 64
    pipeline = report["pipeline"]
    assert pipeline["n"] == 64 and pipeline["abstracts_per_s"] > 0
    assert pipeline["without_overlap"]["abstracts_per_s"] > 0
    assert report["plain_sentence_transformers"]["n"] == 16
    agreement = report["agreement_with_fp32"]
    # fp32 against fp32 in other batches: equal but for padding's rounding.
    assert 0.9999 <= agreement["min_cosine"] <= agreement["mean_cosine"] <= 1.0 + 1e-6
    assert 0.0 <= agreement["top10_overlap"] <= 1.0 and agreement["sample"] == 32
    neighbours = report["exact_neighbours"]
    assert neighbours["n"] == 3000 and neighbours["seconds"] > 0
    assert neighbours["recall_at_k_vs_fp32_numpy"] >= 0.99
