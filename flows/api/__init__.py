"""paperlake's Python API, imported as `paperlake` (pyproject.toml maps it onto flows/api).

It offers, for now:
    Settings     everything a run depends on: `paperlake.Settings(warehouse="warehouse")`
    __version__  the installed paperlake's version

To come: opening a warehouse at a version, search and similar papers, and a run, as the
commands do them.
"""

from flows.core.settings import Settings, package_version

__version__ = package_version("paperlake")

__all__ = ["Settings", "__version__"]
