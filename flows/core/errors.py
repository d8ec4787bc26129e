"""What goes wrong with a warehouse, as paperlake reports it. Light to import: the
commands catch these before they load DuckDB."""

from __future__ import annotations


class WarehouseError(RuntimeError):
    """The warehouse is missing or holds no published version."""


class WarehouseBusy(WarehouseError):
    """Another run holds the warehouse."""


class CatalogUnreachable(WarehouseError):
    """The PostgreSQL catalog cannot be opened: no server, no database, login refused."""


class QueryRefused(WarehouseError):
    """A query that would do more than read the warehouse."""


class CatalogLost(WarehouseError):
    """The catalog is gone while its data files are there: restore it, never start again."""


class DataPathTaken(WarehouseError):
    """The data path holds the files of another catalog."""


class CatalogDamaged(WarehouseError):
    """The catalog cannot be read: a damaged file or database, not a lock."""


class DataFileDamaged(WarehouseError):
    """A data file a version reads is missing or cannot be read."""
