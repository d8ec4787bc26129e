"""One settings object shared by the CLI, the flow and the tests."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, get_type_hints

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SQL_DIR = PROJECT_ROOT / "sql"
EXPECTATIONS_DIR = PROJECT_ROOT / "expectations"

# The packaged model is the default; any local sentence-transformers folder works too.
PACKAGED_MODEL = "all-MiniLM-L6-v2"
NEIGHBOR_METHODS = ("auto", "exact", "hnsw")
PRECISIONS = ("auto", "bf16", "fp32", "openvino-fp32", "openvino-bf16", "onnx-fp32")
DEVICES = ("auto", "cpu", "cuda")


@functools.cache
def package_version(name: str) -> str:
    """The installed version of package `name`, read once a process: importlib.metadata
    reads the installed distributions' files on each call (about 3 ms), and a run records
    a dozen versions. The process runs the code it imported, so the version it read first
    stays the one in use."""
    from importlib.metadata import version

    return version(name)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Large imports without Python's cyclic garbage collector, which otherwise runs over
    and over on the objects they make: the Prefect server's imports take 2.6 s instead of
    3.3, the stages' and Great Expectations' 3.8 s instead of 4.7 (2 cores). What they
    made is then frozen out of later collections (gc.freeze)."""
    import gc

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def configure_environment() -> None:
    """Process-wide defaults for the libraries paperlake drives; explicit env vars win.

    Runs offline: model weights from installed packages, no telemetry, no hub lookups.
    """
    defaults = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        # Tokenizing on every core: 1,000 abstracts in 0.3 s where 0.5 s on 2 cores. Set,
        # it also keeps `tokenizers` quiet in a process forked after it ran (Dask's and
        # Prefect's processes are spawned or exec'd, so none tokenizes in a fork).
        "TOKENIZERS_PARALLELISM": "true",
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


def paperlake_cache() -> Path:
    """paperlake's folder in the user's cache folder ($XDG_CACHE_HOME, else ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "paperlake"


def encoder_cache() -> Path:
    """Where exported encoders are kept, one per model's weights and library versions:
    $PAPERLAKE_ENCODER_CACHE, else paperlake/encoders in the user's cache folder."""
    if given := os.environ.get("PAPERLAKE_ENCODER_CACHE"):
        return Path(given)
    return paperlake_cache() / "encoders"


def from_env(name: str):
    """A default read from the environment variable `name` when Settings is made (None if unset)."""
    return lambda: os.environ.get(name) or None


def setting(default: Any = MISSING, help: str = "", choices: tuple[str, ...] = (), **kw: Any):
    """A Settings field with its help text (and allowed values), declared once for the CLI
    options and the flow parameters derived from it."""
    return field(default=default, metadata={"help": help, "choices": choices}, **kw)


# Texts a batch of the embedding model: with OpenVINO's streams on 2 cores, 59 abstracts a
# second at 16 where 57 at 32 (53 at 32 one batch at a time); shorter batches pad less.
BATCH_SIZE = 16


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on. Paths, model, batch size and thresholds live here only."""

    warehouse: Path = setting(
        default_factory=default_warehouse,
        help="Warehouse folder (default: $PAPERLAKE_WAREHOUSE, else warehouse/).",
    )
    catalog: str | None = setting(
        default_factory=from_env("PAPERLAKE_CATALOG"),
        help="DuckLake catalog shared by several machines: postgresql://USER@HOST:PORT/DB "
        "(default: $PAPERLAKE_CATALOG, else WAREHOUSE/catalog.ducklake).",
    )
    data_path: str | None = setting(
        default_factory=from_env("PAPERLAKE_DATA_PATH"),
        help="Folder of the data files, one every machine can reach: a path or "
        "s3://BUCKET/PREFIX (default: $PAPERLAKE_DATA_PATH, else WAREHOUSE/data).",
    )
    cluster: str | None = setting(
        default_factory=from_env("PAPERLAKE_CLUSTER"),
        help="Run the tasks on Dask: local:N for N workers here, or tcp://HOST:PORT of a "
        "running scheduler (default: $PAPERLAKE_CLUSTER, else in this process).",
    )
    raw: tuple[Path, ...] = setting(
        (Path("data/raw"),), help="Raw file or folder, read recursively; repeatable."
    )
    model: str = setting(
        PACKAGED_MODEL,
        help="The packaged all-MiniLM-L6-v2 or a local sentence-transformers folder.",
    )
    batch_size: int = setting(BATCH_SIZE, help="Embedding batch size.")
    precision: str = setting(
        "auto",
        help="Embedding precision and backend: fp32 and bf16 run torch; openvino-fp32, "
        "openvino-bf16 and onnx-fp32 an export of the model; auto: openvino-bf16 where the "
        "CPU computes bf16 natively, else openvino-fp32 (the fastest measured that agree "
        "with torch fp32).",
        choices=PRECISIONS,
    )
    device: str = setting("auto", help="Where to embed.", choices=DEVICES)
    neighbors_k: int = setting(10, help="Nearest neighbours kept per paper.")
    neighbors_method: str = setting(
        "auto",
        help="Neighbour search; auto: exact up to exact_neighbors_max papers, HNSW above.",
        choices=NEIGHBOR_METHODS,
    )
    exact_neighbors_max: int = setting(
        20_000, help="Most papers for which auto searches neighbours exactly."
    )
    duplicate_threshold: float = setting(
        0.95, help="Cosine score from which two papers are near-duplicates, in (0, 1]."
    )
    duplicate_group_max: int = setting(
        50,
        help="Largest near-duplicate group whose pairs duplicates lists (every group is in "
        "duplicate_groups).",
    )
    n_topics: int | None = setting(
        None, help="Number of topics (default: chosen from the data by silhouette)."
    )
    seed: int = setting(42, help="Random seed of the topic clustering.")
    refit_topics: bool = setting(
        False,
        help="Fit topics afresh instead of carrying the last version's over (a run even "
        "when nothing changed).",
    )
    compact_every: int = setting(
        100,
        help="Versions between the compactions a run does after it publishes (paperlake "
        "compact); 0: never.",
    )
    min_words: int = setting(20, help="Fewest words of an untitled abstract.")
    max_words: int = setting(1500, help="Most words of an abstract.")
    max_reject_share: float = setting(
        0.5, help="Share of a file's records rejected above which the file gets a warning."
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "warehouse", Path(self.warehouse))
        object.__setattr__(self, "raw", tuple(Path(p) for p in self.raw))
        for spec in fields(self):
            choices = spec.metadata["choices"]
            if choices and getattr(self, spec.name) not in choices:
                raise ValueError(
                    f"{spec.name} must be {', '.join(choices[:-1])} or {choices[-1]}, "
                    f"not {getattr(self, spec.name)!r}"
                )
        if self.cluster:
            from flows.core.cluster import check_spec

            check_spec(self.cluster)
        if not 0 < self.duplicate_threshold <= 1:
            raise ValueError("duplicate_threshold must be in (0, 1]")

    @property
    def catalog_path(self) -> Path:
        return self.warehouse / "catalog.ducklake"

    @property
    def data_location(self) -> str:
        """Where the data files live: the data_path given, else WAREHOUSE/data."""
        return self.data_path or str(self.warehouse / "data")

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
        # refit_topics asks for a run, like --force, and compact_every for upkeep: neither
        # is part of what a version is.
        for key in (
            "warehouse",
            "raw",
            "device",
            "catalog",
            "data_path",
            "cluster",
            "refit_topics",
            "compact_every",
        ):
            out.pop(key)
        return out


@dataclass(frozen=True)
class Parameter:
    """A setting as a run parameter: what a CLI option or a flow parameter is made from."""

    name: str
    type: Any  # the field's type, resolved: int, int | None, tuple[Path, ...], ...
    default: Any  # the value a run takes when the parameter is not given
    help: str
    choices: tuple[str, ...] = ()  # the allowed values, where only some are


def run_parameters() -> list[Parameter]:
    """Every setting a run takes, in declaration order: name, type, default and help."""
    types = get_type_hints(Settings)
    defaults = Settings()
    return [
        Parameter(
            spec.name,
            types[spec.name],
            getattr(defaults, spec.name),
            spec.metadata["help"],
            spec.metadata["choices"],
        )
        for spec in fields(Settings)
    ]
