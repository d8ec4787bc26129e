"""Damage told apart from other failures: a DuckDB error that names a missing or damaged
data file of the warehouse, or a damaged catalog, becomes one line that says what is
damaged and points to `paperlake doctor`, instead of a traceback. Light to import."""

from __future__ import annotations

import re

from flows.core.errors import CatalogDamaged, DataFileDamaged, WarehouseError

# How DuckDB names a file it could not read: "Cannot open file "/x.parquet": No such
# file", "Invalid footer length provided for file '/x.parquet'", ...
DATA_FILE = re.compile(r"""["']([^"']+\.parquet)["']""")
# What DuckDB says of a database file that is not whole: never a lock.
CATALOG_DAMAGE = (
    "corrupt database file",
    "not a valid duckdb database",
    "could not read enough bytes",
    "checksum",
    "serialization error",
    "failed to read database header",
)
# DuckDB's words for a database file another process holds.
LOCKED = ("could not set lock on file", "conflicting lock is held")
DOCTOR = (
    "run `paperlake doctor` to see what is damaged (`paperlake doctor --repair` rebuilds "
    "the latest version from the raw files)"
)


def reason_of(exc: BaseException) -> str:
    """The error's text on one line, without DuckDB's kind prefix."""
    text = " ".join(str(exc).split())
    return re.sub(r"^[A-Za-z ]+ Error: ", "", text)


def is_lock(exc: BaseException) -> bool:
    """Whether DuckDB refused a database file because another process holds its lock."""
    text = str(exc).lower()
    return any(words in text for words in LOCKED)


def told(exc: BaseException, catalog: str = "") -> WarehouseError | None:
    """The warehouse error `exc` stands for, where it is damage; else None.

    Args:
        catalog: the catalog as messages name it (`lake.catalog_name`).
    """
    if isinstance(exc, WarehouseError):
        return exc
    reason = reason_of(exc)
    if found := DATA_FILE.search(reason):
        what = "missing" if "no such file" in reason.lower() else "damaged"
        return DataFileDamaged(f"data file {found.group(1)} is {what}: {DOCTOR}")
    lowered = reason.lower()
    if not is_lock(exc) and any(words in lowered for words in CATALOG_DAMAGE):
        return CatalogDamaged(
            f"the catalog {catalog} is damaged ({reason}): restore it from a backup; "
            "`paperlake doctor` checks the warehouse"
        )
    return None
