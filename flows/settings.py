"""One settings object shared by the CLI, the flow and the tests."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = PROJECT_ROOT / "sql"
EXPECTATIONS_DIR = PROJECT_ROOT / "expectations"

# The packaged model is the default; any local sentence-transformers folder works too.
PACKAGED_MODEL = "all-MiniLM-L6-v2"
NEIGHBOR_METHODS = ("auto", "exact", "hnsw")


def configure_environment() -> None:
    """Process-wide defaults for the libraries paperlake drives; explicit env vars win.

    Runs offline: model weights from installed packages, no telemetry, no hub lookups.
    """
    defaults = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "TRANSFORMERS_VERBOSITY": "error",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "GX_ANALYTICS_ENABLED": "False",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        # INFO: each stage's counts reach the Prefect API and the console.
        "PREFECT_LOGGING_LEVEL": "INFO",
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)


def default_warehouse() -> Path:
    """The warehouse folder: $PAPERLAKE_WAREHOUSE, else warehouse/ in the working directory."""
    return Path(os.environ.get("PAPERLAKE_WAREHOUSE", "warehouse"))


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on. Paths, model, batch size and thresholds live here only."""

    warehouse: Path = field(default_factory=default_warehouse)
    raw: tuple[Path, ...] = (Path("data/raw"),)
    model: str = PACKAGED_MODEL
    batch_size: int = 32
    precision: str = "auto"  # auto | bf16 | fp32
    device: str = "auto"  # auto | cpu | cuda
    neighbors_k: int = 10
    neighbors_method: str = "auto"  # auto | exact | hnsw
    exact_neighbors_max: int = 20_000  # auto: exact up to this many papers, HNSW above
    duplicate_threshold: float = 0.95
    n_topics: int | None = None  # None: chosen from the data
    seed: int = 42
    min_words: int = 20
    max_words: int = 1500
    max_reject_share: float = 0.5  # per file; above it the file gets a warning

    def __post_init__(self) -> None:
        object.__setattr__(self, "warehouse", Path(self.warehouse))
        object.__setattr__(self, "raw", tuple(Path(p) for p in self.raw))
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ValueError(f"precision must be auto, bf16 or fp32, not {self.precision!r}")
        if self.neighbors_method not in NEIGHBOR_METHODS:
            raise ValueError(
                f"neighbors_method must be auto, exact or hnsw, not {self.neighbors_method!r}"
            )
        if not 0 < self.duplicate_threshold <= 1:
            raise ValueError("duplicate_threshold must be in (0, 1]")

    @property
    def catalog_path(self) -> Path:
        return self.warehouse / "catalog.ducklake"

    @property
    def data_path(self) -> Path:
        return self.warehouse / "data"

    @property
    def cache_path(self) -> Path:
        return self.warehouse / "cache"

    @property
    def dq_path(self) -> Path:
        return self.warehouse / "dq"

    def with_(self, **changes) -> Settings:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """JSON-ready view, as recorded in the run manifest."""
        out = asdict(self)
        out["warehouse"] = str(self.warehouse)
        out["raw"] = [str(p) for p in self.raw]
        return out

    def content_config(self) -> dict:
        """The settings that shape published content (paths excluded)."""
        out = self.to_dict()
        for key in ("warehouse", "raw", "device"):
            out.pop(key)
        return out
