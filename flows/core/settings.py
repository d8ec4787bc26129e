"""One settings object shared by the CLI, the flow and the tests.

Each setting is declared once, in `Settings`: its type, default and help. A run takes each
from the first of: the argument given (a CLI option, a flow parameter), the environment
(PAPERLAKE_<NAME>, such as PAPERLAKE_WAREHOUSE), paperlake.toml in the working folder, the
warehouse's own paperlake.toml (WAREHOUSE/paperlake.toml: the project file that `run`,
`serve` and `search` read wherever they start), the default. A settings file's top-level
keys are named as the settings.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tomllib
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import Field, ValidationError, field_validator
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from flows.core.cluster import check_spec

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SQL_DIR = PROJECT_ROOT / "sql"
EXPECTATIONS_DIR = PROJECT_ROOT / "expectations"
# Settings of a run in the working folder; the same file beside raw files holds the
# per-file [files."<glob>"] tables ingest reads, which Settings leaves to it.
SETTINGS_FILE = "paperlake.toml"

# The packaged model is the default; any local sentence-transformers folder works too.
PACKAGED_MODEL = "all-MiniLM-L6-v2"
NeighborMethod = Literal["auto", "exact", "hnsw", "ivf"]
Precision = Literal["auto", "bf16", "fp32", "openvino-fp32", "openvino-bf16", "onnx-fp32"]
Device = Literal["auto", "cpu", "cuda"]
NEIGHBOR_METHODS: tuple[str, ...] = get_args(NeighborMethod)

# Texts a batch of the embedding model: shorter batches pad less, and with OpenVINO's
# streams a larger one was no faster (bench/encoders.py).
BATCH_SIZE = 16


@functools.cache
def package_version(name: str) -> str:
    """The installed version of package `name`, read once a process: importlib.metadata
    reads the installed distributions' files on each call, and a run records a dozen
    versions. The process runs the code it imported, so the version it read first stays
    the one in use."""

    return version(name)


def configure_environment() -> None:
    """Process-wide defaults for the libraries paperlake drives; explicit env vars win.

    Runs offline: model weights from installed packages, no telemetry, no hub lookups.
    """
    defaults = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        # Tokenizing on every core is faster than on one. Set, it also keeps `tokenizers`
        # quiet in a process forked after it ran (Dask's and Prefect's processes are
        # spawned or exec'd, so none tokenizes in a fork).
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
    decline_openvino_telemetry()


def decline_openvino_telemetry(home: Path | None = None) -> None:
    """Turn OpenVINO's telemetry off where the user has not chosen.

    Each `import openvino` sends a usage event over the network, from a process forked by
    a thread; a fork of a threaded process can hang for good in its name lookup (one such
    child was found stuck in getaddrinfo on the loader's lock, and a `paperlake run` or
    `serve` waiting on it). OpenVINO has no variable to turn it off: its documented
    opt-out is the file ~/intel/openvino_telemetry holding 0, which `opt_in_out
    --opt_out` writes (sending an event first). paperlake writes that file where there is
    none; a choice the user made is left as it is.
    """
    consent = (home or Path.home()) / "intel" / "openvino_telemetry"
    if consent.exists():
        return
    with contextlib.suppress(OSError):  # a read-only home: nothing to do about it
        consent.parent.mkdir(exist_ok=True)
        consent.write_text("0")


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


class SettingsError(ValueError):
    """Settings refused, in one line naming each setting at fault."""


class SettingsFile(TomlConfigSettingsSource):
    """The settings paperlake.toml in the working folder gives: its top-level keys."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path = Path(SETTINGS_FILE)) -> None:
        self.path = path
        try:
            super().__init__(settings_cls, toml_file=path)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{path}: not valid TOML: {exc}") from None

    def __call__(self) -> dict[str, Any]:
        values = super().__call__()
        values.pop("files", None)  # ingest's per-file tables
        unknown = sorted(set(values) - set(self.settings_cls.model_fields))
        if unknown:
            raise SettingsError(f"{self.path}: {', '.join(unknown)}: not a setting")
        return values


class WarehouseSettingsFile(PydanticBaseSettingsSource):
    """The settings the warehouse's own paperlake.toml gives (WAREHOUSE/paperlake.toml), the
    warehouse being the one the sources before it name, else the default."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # everything is read in __call__

    def __call__(self) -> dict[str, Any]:
        default = self.settings_cls.model_fields["warehouse"].default
        path = Path(self.current_state.get("warehouse") or default) / SETTINGS_FILE
        if not path.is_file():
            return {}
        values = SettingsFile(self.settings_cls, path)()
        if "warehouse" in values:
            raise SettingsError(f"{path}: warehouse: a warehouse's own file cannot move it")
        return values


class Settings(BaseSettings):
    """Everything a run depends on. Paths, model, batch size and thresholds live here only."""

    model_config = SettingsConfigDict(
        env_prefix="PAPERLAKE_", env_ignore_empty=True, extra="forbid", frozen=True
    )

    warehouse: Path = Field(
        Path("warehouse"),
        description="Warehouse folder (default: $PAPERLAKE_WAREHOUSE, else warehouse/).",
    )
    catalog: str | None = Field(
        None,
        description="DuckLake catalog shared by several machines: "
        "postgresql://USER@HOST:PORT/DB (default: $PAPERLAKE_CATALOG, else "
        "WAREHOUSE/catalog.ducklake).",
    )
    data_path: str | None = Field(
        None,
        description="Folder of the data files, one every machine can reach: a path or "
        "s3://BUCKET/PREFIX (default: $PAPERLAKE_DATA_PATH, else WAREHOUSE/data).",
    )
    cluster: str | None = Field(
        None,
        description="Run the tasks on Dask: local:N for N workers here, or tcp://HOST:PORT "
        "of a running scheduler (default: $PAPERLAKE_CLUSTER, else in this process).",
    )
    raw: tuple[Path, ...] = Field(
        (Path("data/raw"),), description="Raw file or folder, read recursively; repeatable."
    )
    model: str = Field(
        PACKAGED_MODEL,
        description="The packaged all-MiniLM-L6-v2 or a local sentence-transformers folder "
        "(a search embeds its query with the model its version recorded, unless given).",
    )
    batch_size: int = Field(BATCH_SIZE, description="Embedding batch size.")
    precision: Precision = Field(
        "auto",
        description="Embedding precision and backend: fp32 and bf16 run torch; "
        "openvino-fp32, openvino-bf16 and onnx-fp32 an export of the model; auto: "
        "openvino-bf16 where the CPU computes bf16 natively, else openvino-fp32 (the "
        "fastest measured that agree with torch fp32).",
    )
    device: Device = Field("auto", description="Where to embed.")
    neighbors_k: int = Field(10, description="Nearest neighbours kept per paper.")
    neighbors_method: NeighborMethod = Field(
        "auto",
        description="Neighbour search; auto: exact up to exact_neighbors_max papers, above it an "
        "HNSW graph kept in the cache per model and updated by each run (hnsw); ivf: an IVF "
        "index kept and updated so.",
    )
    exact_neighbors_max: int = Field(
        20_000, description="Most papers for which auto searches neighbours exactly."
    )
    duplicate_threshold: float = Field(
        0.95, description="Cosine score from which two papers are near-duplicates, in (0, 1]."
    )
    duplicate_group_max: int = Field(
        50,
        description="Largest near-duplicate group whose pairs duplicates lists (every group "
        "is in duplicate_groups).",
    )
    n_topics: int | None = Field(
        None, description="Number of topics (default: chosen from the data by silhouette)."
    )
    seed: int = Field(42, description="Random seed of the topic clustering.")
    refit_topics: bool = Field(
        False,
        description="Fit topics afresh instead of carrying the last version's over (a run "
        "even when nothing changed).",
    )
    compact_every: int = Field(
        100,
        description="Versions between the compactions a run does after it publishes "
        "(paperlake compact); 0: never.",
    )
    min_words: int = Field(20, description="Fewest words of an untitled abstract.")
    max_words: int = Field(1500, description="Most words of an abstract.")
    max_reject_share: float = Field(
        0.5,
        description="Share of a file's records rejected above which the file gets a warning.",
    )

    def __init__(self, **values: Any) -> None:
        """Settings from `values`, the environment, paperlake.toml and the defaults.

        Raises:
            SettingsError: a value is refused; the message names its setting.
        """
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError("; ".join(map(self.refusal, exc.errors()))) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment, then paperlake.toml in the working folder, then
        the warehouse's own (no .env or secrets files)."""
        return (
            init_settings,
            env_settings,
            SettingsFile(settings_cls),
            WarehouseSettingsFile(settings_cls),
        )

    @classmethod
    def refusal(cls, error: ErrorDetails) -> str:
        """One validation error in words, naming its setting."""
        name = str(error["loc"][0]) if error["loc"] else "settings"
        if error["type"] == "value_error":  # our own validators' messages name the setting
            return str(error["ctx"]["error"])
        if error["type"] == "extra_forbidden":
            return f"{name}: not a setting"
        if error["type"] == "literal_error":
            choices = get_args(cls.model_fields[name].annotation)
            return (
                f"{name} must be {', '.join(choices[:-1])} or {choices[-1]}, not {error['input']!r}"
            )
        return f"{name}: {error['msg']}, not {error['input']!r}"

    @field_validator("cluster")
    @classmethod
    def _names_a_cluster(cls, spec: str | None) -> str | None:
        return spec and check_spec(spec)

    @field_validator("model")
    @classmethod
    def _names_a_model_once(cls, model: str) -> str:
        # One spelling per model, as the version records it and a search looks it up: the
        # packaged one by its short name, a local folder by its absolute path.
        if model == f"sentence-transformers/{PACKAGED_MODEL}":
            return PACKAGED_MODEL
        folder = Path(model).expanduser()
        return str(folder.resolve()) if model != PACKAGED_MODEL and folder.is_dir() else model

    @property
    def model_given(self) -> bool:
        """Whether the model was chosen (an argument, the environment or a settings file),
        not left to the default."""
        return "model" in self.model_fields_set

    @field_validator("duplicate_threshold")
    @classmethod
    def _is_a_cosine(cls, threshold: float) -> float:
        if not 0 < threshold <= 1:
            raise ValueError("duplicate_threshold must be in (0, 1]")
        return threshold

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

    def with_(self, **changes: Any) -> Settings:
        """These settings with `changes` made, checked as any settings are."""
        return type(self)(**(dict(self) | changes))

    def to_dict(self) -> dict:
        """JSON-ready view, as recorded in the run manifest."""
        return self.model_dump(mode="json")

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
    type: Any  # int, int | None, tuple[Path, ...], ...; str for a setting with choices
    default: Any  # the setting's default, taken where no other source gives it
    help: str
    choices: tuple[str, ...] = ()  # the allowed values, where only some are


def run_parameters() -> list[Parameter]:
    """Every setting a run takes, in declaration order: name, type, default and help."""
    parameters = []
    for name, spec in Settings.model_fields.items():
        choices = get_args(spec.annotation) if get_origin(spec.annotation) is Literal else ()
        kind = str if choices else spec.annotation
        parameters.append(Parameter(name, kind, spec.default, spec.description or "", choices))
    return parameters
