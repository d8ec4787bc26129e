"""Core: what every stage shares; each module is its own face.

settings    one settings object (pydantic-settings) for the CLI, the flow and tests
tables      every published table declared once; SQL tables by their file's header
lake        DuckDB connections, the DuckLake catalog attached, frames staged for SQL
data_path   the data files a catalog owns
cache       cache files sealed when written and checked before they are trusted
files       files written whole
locks       the run lock
run_record  what a run did: its summary, log, manifest, runs row and artifacts
cluster     the Dask task runner of --cluster, and fanning work out
stopping    SIGTERM and Ctrl-C: stop within seconds, with one line
errors      what goes wrong with a warehouse; damage: damage told in one line
templates   the Jinja environment of the offline pages; palette: topic colours
wording     a run's data-quality outcome in words
"""
