"""paperlake's Python API, imported as `paperlake` (pyproject.toml maps it onto flows/api).

    import paperlake
    with paperlake.open("warehouse") as lake:
        lake.versions()                     # polars: version, time, summary
        lake.table("papers", version=2)     # polars: a table of a version
        lake.sql("select count(*) from papers").fetchone()   # a DuckDB relation
        lake.search("diffusion language models", k=5)       # polars: hits, as `search`
        lake.similar("7ce79da9c601ae8d", k=5)                # polars: nearest papers
        lake.export("papers", "papers.parquet")              # as `paperlake export`

It offers:
    open         a warehouse for reading (read-only), at its latest version or another
    Lake         what `open` gives (docs/python-api.md walks through it)
    Settings     everything a run depends on: `paperlake.Settings(warehouse="warehouse")`
    WarehouseError  what a missing warehouse, version or table raises
    __version__  the installed paperlake's version

"""

from flows.api.lake import Lake, open
from flows.core.errors import WarehouseError
from flows.core.settings import Settings, package_version

__version__ = package_version("paperlake")

__all__ = ["Lake", "Settings", "WarehouseError", "__version__", "open"]
