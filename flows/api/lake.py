"""A warehouse opened from Python (`paperlake.open`): its versions, tables, SQL and search.

A Lake reads a DuckDB-file catalog through its own copy of it (flows/read/catalog_copy.py):
a DuckDB file that any process holds open cannot be written, so a notebook that kept the
catalog itself open would make every run wait at publish. The copy is taken when the Lake
opens, and anew by `refresh()` once a run changed the catalog. A PostgreSQL catalog is
read as it is. Either way it is attached read-only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from flows.core.errors import WarehouseError
from flows.core.lake import open_lake, published_versions, read_sql
from flows.core.settings import Settings
from flows.read import export_table, lake_tables, reader_of, search_papers, similar_papers

if TYPE_CHECKING:
    import duckdb
    import polars as pl


class Lake:
    """A paperlake warehouse, read-only: `versions()`, `table()`, `sql()`, `search()`,
    `similar()` and `export()` read `version` (the latest when it opened, or the one
    given), or another published version where a call names one.

    Close it with `close()`, or use it in a `with` block; `sql()`'s relations read through
    it, so they are used before it closes.
    """

    def __init__(self, settings: Settings, version: int | None = None) -> None:
        self.settings = settings
        self.pinned = version
        self.lakes: dict[int | None, duckdb.DuckDBPyConnection] = {}
        self.copy = reader_of(settings)
        try:
            self.published = published_versions(self.lake_at(None))
            self.version: int = self.published[-1] if version is None else version
            self.lake(version)  # a version that is not published ends here, in words
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"<paperlake.Lake {self.settings.warehouse} at version {self.version}>"

    def __enter__(self) -> Lake:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lake_at(self, version: int | None) -> duckdb.DuckDBPyConnection:
        """The connection reading `version` (None: the latest, for the list of versions),
        with DuckDB's full-text and vector search loaded; opened on first use."""
        if version not in self.lakes:
            reading = self.settings if self.copy is None else self.copy.reading
            extensions = () if version is None else ("vss", "fts")
            self.lakes[version] = open_lake(reading, version, extensions)
        return self.lakes[version]

    def lake(self, version: int | None = None) -> duckdb.DuckDBPyConnection:
        """The connection reading `version`, default: the Lake's own."""
        return self.lake_at(self.version if version is None else version)

    def versions(self) -> pl.DataFrame:
        """One row per published version: version, time and summary (`paperlake versions`)."""
        return self.lake_at(None).execute(read_sql("catalog/versions")).pl()

    def tables(self, version: int | None = None) -> list[str]:
        """The names of the tables (and views) a version holds."""
        return lake_tables(self.lake(version))

    def table(self, name: str, version: int | None = None) -> pl.DataFrame:
        """Every row of table `name` of a version, as a polars frame.

        Raises:
            WarehouseError: the version holds no such table.
        """
        con = self.lake(version)
        names = lake_tables(con)
        if name not in names:
            at = self.version if version is None else version
            raise WarehouseError(f"no table {name!r} in version {at} (tables: {', '.join(names)})")
        return con.sql(f'select * from "{name}"').pl()

    def sql(
        self, query: str, params: list | dict | None = None, version: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """`query` over a version's tables, as a DuckDB relation (`.pl()`, `.df()`,
        `.fetchall()`, or more SQL on it); `params` fill its `?` or `$name` placeholders."""
        return self.lake(version).sql(query, params=params)

    def search(
        self, text: str, k: int = 10, version: int | None = None, **options: Any
    ) -> pl.DataFrame:
        """The k papers that best match `text`, as `paperlake search` finds them; each hit
        with its `score` (the cosine of query and paper) and `good_match`. Queries are
        embedded with the model the version was embedded with.

        Args:
            options: as `paperlake search` takes them: mode ("hybrid", "dense" or
                "keyword"), venue, year, topic (an id or words of its label), fusion
                ("score" or "rrf"), min_cosine.
        """
        return search_papers(self.lake(version), text, self.settings, k=k, **options)

    def similar(self, paper_id: str, k: int = 10, version: int | None = None) -> pl.DataFrame:
        """The k papers closest in meaning to paper `paper_id` (`paperlake similar`)."""
        return similar_papers(self.lake(version), paper_id, k)

    def export(
        self,
        table: str,
        path: str | Path,
        format: str | None = None,
        version: int | None = None,
        force: bool = False,
    ) -> Path:
        """Write a version's table to `path` as `paperlake export` does (parquet, csv or
        jsonl; by default from the path's suffix, else parquet); the path written."""
        export_table(self.lake(version), table, Path(path), format, force)
        return Path(path)

    def refresh(self) -> bool:
        """Read the catalog anew where a run changed it since: the latest version becomes
        the Lake's own, unless it was opened at a given one. Whether it changed; relations
        made before do not outlive it."""
        if self.copy is not None and not self.copy.take(wait=60):
            return False
        self.release()
        if self.copy is not None:
            self.copy.prune()
        before, self.published = self.published, published_versions(self.lake_at(None))
        if self.pinned is None:
            self.version = self.published[-1]
        return self.copy is not None or before != self.published

    def release(self) -> None:
        for con in self.lakes.values():
            con.close()
        self.lakes.clear()

    def close(self) -> None:
        """Close every connection, and remove the catalog's copy."""
        self.release()
        if self.copy is not None:
            self.copy.close()


def open(
    warehouse: str | Path | None = None,
    *,
    version: int | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    model: str | None = None,
) -> Lake:
    """Open a warehouse for reading (default: the one the settings name, as the commands
    find it: $PAPERLAKE_WAREHOUSE, paperlake.toml, else warehouse/).

    Args:
        version: read this published version by default (default: the latest).
        catalog, data_path: a PostgreSQL catalog and its data path, as the commands take
            them.
        model: the local model folder that embeds search queries, where the folder the
            version was embedded with has moved.

    Raises:
        WarehouseError: no warehouse there, or no such version.
    """
    given = {"warehouse": warehouse, "catalog": catalog, "data_path": data_path, "model": model}
    return Lake(Settings(**{k: v for k, v in given.items() if v is not None}), version)
