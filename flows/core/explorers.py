"""Where the running explorers of a warehouse listen, so that `paperlake search` can hand
its query to one: the search's fast path. An explorer holds a version's vectors, cards and
keyword index in memory and has the query model loaded, so a search it answers costs a
request, where a search on its own opens the catalog, reads the vectors and loads the
model first.

While it serves, `paperlake explore` says where in the warehouse's cache
(`explorers/<pid>.json`: its address, and the catalog, data path and model it reads with);
a search asks an explorer that reads the same, and searches on its own where there is none
or it does not answer. Standard library only: a search reads this before it loads DuckDB,
polars or the model.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

from flows.core.settings import Settings

FOLDER = "explorers"  # under the warehouse's cache folder
ASK_SECONDS = 120.0  # a first search of a large version reads it into the explorer's memory


@dataclass
class Answer:
    """What an explorer said: its HTTP status, its headers and its body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def error(self) -> str:
        """The message of an answer that refused the request (a JSON body's `error`)."""
        try:
            return str(json.loads(self.body)["error"])
        except (ValueError, KeyError, TypeError):
            return self.body.decode("utf-8", "replace")[:500]


def identity(settings: Settings) -> dict[str, str | None]:
    """What a search and an explorer must share for one to answer the other."""
    return {"catalog": settings.catalog, "data_path": settings.data_path, "model": settings.model}


@contextlib.contextmanager
def announced(settings: Settings, url: str) -> Iterator[None]:
    """Say, while the block runs, that this process's explorer of `settings` is at `url`."""
    folder = settings.cache_path / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{os.getpid()}.json"
    written = path.with_suffix(".tmp")
    written.write_text(json.dumps({"url": url, "pid": os.getpid(), **identity(settings)}))
    written.replace(path)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def running(settings: Settings) -> str | None:
    """The address of a live explorer that reads `settings`'s warehouse as they say; None
    where none does. Notes left by explorers that are gone are removed."""
    folder = settings.cache_path / FOLDER
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.json")):
        try:
            said = json.loads(path.read_text())
            pid, url = int(said["pid"]), str(said["url"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not alive(pid):
            path.unlink(missing_ok=True)
        elif {key: said.get(key) for key in identity(settings)} == identity(settings):
            return url
    return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def ask(url: str, path: str, params: dict[str, object]) -> Answer | None:
    """GET `path` of the explorer at `url` with `params` (None values left out); None where
    it cannot be reached. No proxy: the explorer is on this machine."""
    query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{url.rstrip('/')}/{path}?{query}", timeout=ASK_SECONDS) as reply:
            return Answer(reply.status, lowered(reply.headers), reply.read())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, lowered(exc.headers), exc.read())
    except (OSError, ValueError):  # refused, reset, timed out: not an explorer any more
        return None


def lowered(headers) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}
