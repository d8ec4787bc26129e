"""The fingerprint of a run: what a version is built from, so that a run whose inputs,
config, model and code equal those of the latest version has nothing to do."""

from __future__ import annotations

import hashlib
import json

from flows.core.settings import Settings, package_version
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
    """The latest version if it was built from exactly the current inputs and config."""
    latest = latest_published(settings)
    if latest is None:
        return None
    return latest[0] if latest[1] == current_fingerprint(settings) else None
