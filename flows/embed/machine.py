"""What this machine offers the encoders: a GPU or the CPU, native bf16, threads."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path


def cpu_has_bf16() -> bool:
    """True where the CPU computes bf16 natively (AVX-512 BF16 or AMX)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_key() -> str:
    """This CPU's model and flags: a reduced precision checked on one CPU holds on its kind."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    wanted = [line for line in lines if line.startswith(("model name", "flags"))][:2]
    return hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:16]


def choose_device(device: str) -> str:
    """`auto`: a CUDA GPU where torch sees one, else the CPU. Torch is asked only where an
    NVIDIA driver is loaded (or torch already is): elsewhere the answer is the CPU."""
    if device != "auto":
        return device
    if "torch" not in sys.modules and not Path("/proc/driver/nvidia/version").exists():
        return "cpu"
    import torch  # only where a GPU may be: elsewhere the answer needs no torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def choose_precision(precision: str, device: str) -> str:
    """The precision (and backend) `auto` means here: fp16 on a GPU; on a CPU, the fastest
    encoder installed that agrees with fp32 torch (mean cosine >= 0.9999, min >= 0.999)."""
    if precision != "auto":
        return precision
    if device == "cuda":
        return "fp16"
    # bench/encoders.py: OpenVINO outruns torch at each precision, bf16 outruns fp32 where
    # the CPU has it natively, and without it OpenVINO fp32 is the fastest exact encoder.
    openvino = importlib.util.find_spec("openvino") is not None
    if cpu_has_bf16():
        return "openvino-bf16" if openvino else "bf16"
    return "openvino-fp32" if openvino else "fp32"


def compute_threads() -> int:
    """Threads for torch and FAISS: $PAPERLAKE_THREADS where set; in a Dask worker, its
    share of the machine (cores over the task slots of all workers on this host); else
    every core."""
    if given := os.environ.get("PAPERLAKE_THREADS"):
        return max(1, int(given))
    cores = os.cpu_count() or 1
    # A Dask worker has imported distributed; elsewhere importing it only to learn that
    # this is no worker would cost every run its import.
    if "distributed" not in sys.modules:
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
