"""Per-file settings from the paperlake.toml files beside the raw files."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from collections.abc import Sequence
from pathlib import Path

from flows.ingest.model import NO_OVERRIDE, SETTINGS_FILE, FileOverride, IngestError
from flows.ingest.readers import FORMATS

# The field names a settings file uses in `columns`.
SETTING_FIELDS = {
    "id": "external_id",
    "title": "title_raw",
    "abstract": "abstract_raw",
    "authors": "authors",
    "keywords": "keywords",
    "year": "year",
    "venue": "venue",
    "decision": "decision",
    "categories": "categories",
}


def load_settings(path: Path) -> list[tuple[str, FileOverride]]:
    """The (glob, override) rules of a paperlake.toml, in file order.

    Raises:
        IngestError: the file is not valid TOML or names an unknown key, format or field.
    """
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise IngestError(f"{path}: not valid TOML: {exc}") from None
    unknown = set(spec) - {"files"}
    if unknown:
        raise IngestError(f'{path}: unknown keys {sorted(unknown)}; use [files."<glob>"]')
    rules = []
    for glob, entry in (spec.get("files") or {}).items():
        where = f"{path} [files.{glob!r}]"
        if not isinstance(entry, dict):
            raise IngestError(f"{where}: expected a table of settings")
        bad = set(entry) - {"format", "venue", "year", "columns"}
        if bad:
            raise IngestError(f"{where}: unknown keys {sorted(bad)}")
        fmt = entry.get("format")
        if fmt is not None and fmt not in FORMATS:
            raise IngestError(f"{where}: format {fmt!r} is not one of {', '.join(FORMATS)}")
        columns = entry.get("columns") or {}
        bad = set(columns) - set(SETTING_FIELDS)
        if bad:
            raise IngestError(f"{where}: unknown fields {sorted(bad)} in columns")
        year = entry.get("year")
        if year is not None and not isinstance(year, int):
            raise IngestError(f"{where}: year must be an integer")
        rules.append(
            (
                glob,
                FileOverride(
                    format=fmt,
                    venue=entry.get("venue"),
                    year=year,
                    columns=tuple((SETTING_FIELDS[k], str(v)) for k, v in columns.items()),
                    origin=f"{where}: {json.dumps(entry, sort_keys=True)}",
                ),
            )
        )
    return rules


class Overrides:
    """Per-file settings from the paperlake.toml files beside the raw files.

    A file takes the first matching glob of the nearest settings file, looking in its own
    folder and then in the folders above it, up to the raw path it was found under.
    """

    def __init__(self, roots: Sequence[Path]):
        self.roots = [Path(r).resolve() for r in roots if Path(r).is_dir()]
        self.loaded: dict[Path, list[tuple[str, FileOverride]]] = {}
        self.errors: dict[Path, str] = {}
        self.present: dict[Path, bool] = {}  # folder -> holds a settings file

    def rules(self, settings: Path) -> list[tuple[str, FileOverride]]:
        """The rules of one settings file, loaded once; a broken file has none."""
        key = settings.resolve()
        if key not in self.loaded:
            try:
                self.loaded[key] = load_settings(settings)
            except (IngestError, OSError) as exc:
                self.loaded[key] = []
                self.errors[key] = str(exc)
        return self.loaded[key]

    def for_file(
        self, path: Path, resolved: Path | None = None
    ) -> tuple[FileOverride, Path | None]:
        """The override for a raw file (whose resolved path is `resolved`, where known), and
        the settings file it came from."""
        resolved = resolved or path.resolve()
        top = next((r for r in self.roots if r in resolved.parents), None)
        folder = resolved.parent
        while True:
            settings = folder / SETTINGS_FILE
            if folder not in self.present:  # a folder of many files is looked in once
                self.present[folder] = settings.is_file()
            if self.present[folder]:
                relative = resolved.relative_to(folder).as_posix()
                for glob, override in self.rules(settings):
                    if fnmatch.fnmatch(relative, glob) or fnmatch.fnmatch(resolved.name, glob):
                        return override, settings
            if top is None or folder == top or folder == folder.parent:
                return NO_OVERRIDE, None
            folder = folder.parent
