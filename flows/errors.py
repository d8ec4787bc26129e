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
