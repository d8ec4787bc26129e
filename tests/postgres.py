"""A throwaway PostgreSQL cluster for tests: initdb into a temp folder, a free port, torn down
after. PostgreSQL refuses to run as root, so the cluster runs as the `postgres` user."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = "install Debian's postgresql (apt-get install postgresql); .ci/run does"


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def server_bin() -> Path:
    """The newest /usr/lib/postgresql/<version>/bin that has initdb and pg_ctl."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not found or not (found[-1] / "pg_ctl").exists():
        raise PostgresMissing(f"no PostgreSQL server in /usr/lib/postgresql/*/bin: {INSTALL_HINT}")
    return found[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runuser() -> str:
    """util-linux's runuser, also where /usr/sbin is not on PATH (as for a user's shell)."""
    for found in (shutil.which("runuser"), "/usr/sbin/runuser", "/sbin/runuser"):
        if found and os.access(found, os.X_OK):
            return found
    raise PostgresMissing("no runuser to start PostgreSQL as its own user: install util-linux")


def as_postgres(*command: str | Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run a server binary as the postgres user (as is when not root)."""
    prefix = [runuser(), "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run(
        [*prefix, *map(str, command)], capture_output=True, text=True, check=check, timeout=120
    )


@dataclass
class PostgresServer:
    """A running cluster: trust authentication for user postgres on 127.0.0.1:port."""

    bin: Path
    root: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "lake") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create database `name`; returns its URL."""
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as con:
            con.execute(f'create database "{name}"')
        return self.url(name)

    def pid(self) -> int | None:
        """The postmaster's pid, from its pid file (None once it is gone)."""
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """pg_ctl stop -m fast, then make sure the postmaster is gone, and remove the folder."""
        pid = self.pid()
        as_postgres(self.bin / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop", check=False)
        if pid is not None:
            deadline = time.monotonic() + 10
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, 9)  # the postmaster this helper started, by its own pid
        shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> PostgresServer:
    """initdb into a new temp folder and start it on a free port, its socket beside it.

    The folder is made directly under the system temp dir (pytest's are private to root,
    so the postgres user could not reach into them) and handed to postgres.
    """
    bin_dir = server_bin()
    root = Path(tempfile.mkdtemp(prefix="paperlake-pg-"))
    (root / "sock").mkdir()
    if os.geteuid() == 0:
        for path in (root, root / "sock"):
            shutil.chown(path, "postgres", "postgres")
    server = PostgresServer(bin_dir, root, free_port())
    made = as_postgres(bin_dir / "initdb", "-D", server.data, "-A", "trust", "-U", "postgres",
                       check=False)  # fmt: skip
    if made.returncode != 0:
        server.stop()
        raise RuntimeError(f"initdb failed: {made.stderr[-2000:]}")
    options = f"-p {server.port} -k {root / 'sock'} -c listen_addresses=127.0.0.1"
    started = as_postgres(
        bin_dir / "pg_ctl", "-D", server.data, "-o", options, "-l", root / "server.log",
        "-w", "start", check=False,
    )  # fmt: skip
    if started.returncode != 0:
        log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
        server.stop()
        raise RuntimeError(f"PostgreSQL did not start: {started.stderr}\n{log[-2000:]}")
    return server
