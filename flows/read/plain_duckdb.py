"""The SQL that opens a version in a plain DuckDB (the duckdb CLI, Python's duckdb, any
client of DuckDB 1.5.5): load the packaged extensions from their files, attach the catalog
read-only as `lake`, and use it.

Nothing is downloaded and nothing is written to ~/.duckdb: each extension is loaded from
the file its duckdb-extension-<name> package installed.
"""

from __future__ import annotations

from flows.core.lake import (
    LAKE,
    attach_statement,
    catalog_name,
    data_path_option,
    extension_file,
    needed_extensions,
    open_lake,
    postgres_conninfo,
    without_password,
)
from flows.core.settings import Settings
from flows.read.query import sql_text

READER_EXTENSIONS = ("fts", "vss")  # full-text search and vector search, as `query` has them


def duckdb_setup(settings: Settings, version: int | None = None) -> str:
    """The statements that open `version` (default: the latest) of the warehouse read-only
    in a plain DuckDB, one a line, after a comment naming the warehouse.

    A PostgreSQL catalog's password is left out: libpq takes it from PGPASSWORD or
    ~/.pgpass.

    Raises:
        WarehouseError: there is no warehouse, or no such version.
    """
    open_lake(settings, version, extensions=()).close()  # the warehouse and version exist
    conninfo = postgres_conninfo(settings)
    catalog = str(settings.catalog_path.resolve())
    target = f"postgres:{without_password(conninfo)}" if conninfo else catalog
    names = dict.fromkeys([*needed_extensions(settings), *READER_EXTENSIONS])
    at = "the latest version" if version is None else f"version {version}"
    lines = [f"-- paperlake: {at} of {catalog_name(settings)}, read-only"]
    lines += [f"LOAD {sql_text(str(extension_file(name)))};" for name in names]
    data_path = data_path_option(settings, exists=True)
    lines.append(attach_statement(target, data_path, version, read_only=True) + ";")
    lines.append(f"USE {LAKE};")
    return "\n".join(lines) + "\n"
