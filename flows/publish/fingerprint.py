"""The fingerprint of a run: what a version is built from, so that a run whose inputs,
config, model and code equal those of the latest version has nothing to do."""

from __future__ import annotations

import hashlib
import json

from flows.core.errors import WarehouseError
from flows.core.settings import SETTINGS_FILE, Settings, package_version
from flows.publish.previous import latest_published


def fingerprint(settings: Settings, inputs: dict[str, str], weights_sha256: str) -> str:
    """What a version is built from: input files and hashes, content config, model, code.

    Equal fingerprints mean equal published content, so a run with the fingerprint of the
    latest version has nothing to do.
    """
    from flows.ingest import INGEST_VERSION

    spec = {
        "inputs": sorted(inputs.items()),
        "config": settings.content_config(),
        "weights_sha256": weights_sha256,
        "paperlake": package_version("paperlake"),
        "ingest": INGEST_VERSION,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def current_fingerprint(settings: Settings) -> str:
    """The fingerprint a run would have now, from file hashes and the model's weights."""
    # Imported here: the commands that read versions import this stage's face too, and
    # never fingerprint a run.
    from flows.embed import model_path, weights_sha256
    from flows.ingest import input_digests

    inputs = input_digests(settings.raw, settings.cache_path / "parsed")
    return fingerprint(settings, inputs, weights_sha256(model_path(settings.model)))


def up_to_date(settings: Settings) -> int | None:
    """The latest version if it was built from exactly the current inputs and config.

    Raises:
        WarehouseError: the model was left to its default, and the latest version was
            embedded with another (`refuse_model_switch`).
    """
    latest = latest_published(settings)
    if latest is None:
        return None
    refuse_model_switch(settings, latest[2])
    return latest[0] if latest[1] == current_fingerprint(settings) else None


def refuse_model_switch(settings: Settings, last_model: str | None) -> None:
    """Stop a run whose model was left to its default when the latest version was embedded
    with another: switching embeds every paper again, so it is asked for by name.

    Raises:
        WarehouseError: in one line, naming the warehouse's model and how to keep or switch.
    """
    if settings.model_given or last_model is None or last_model == settings.model:
        return
    raise WarehouseError(
        f"{settings.warehouse} was embedded with the model {last_model}, and this run's "
        f"is the default {settings.model}: pass --model {last_model} to keep it (or set "
        f"model in {settings.warehouse / SETTINGS_FILE}), or --model {settings.model} to "
        "switch (every paper is embedded again)"
    )
