"""The commands of README.md and docs/*.md run as written. Each ```console block's `$ ` lines
run in a shell, in order, in a copy of the project holding the sample warehouse; each must exit
0 and print the lines shown after it. ```sh blocks hold the commands a test cannot run, each
for a reason named in NOT_RUN (make, serve, explore, servers and clusters elsewhere)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flows.core.settings import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
WIDTH = 90  # the terminal width the pages' tables are shown at

# Why a command in a ```sh block is not run here; every line there must match one of these.
NOT_RUN = {
    r"^make (run|test)\b": "make run and make test set up .venv and run the suite this test is in",
    r"^make bench|bench/|BENCH_": "benchmarks measure for minutes; they check nothing",
    r"paperlake serve\b": "serve runs until stopped (tests/test_serve.py runs it)",
    r"paperlake explore\b": "explore serves until Ctrl-C (tests/test_explorer.py drives it)",
    r"paperlake duckdb\s*(#|$)|bin/duckdb -init": "an interactive shell waits for its user",
    r"dask |--cluster": "a Dask cluster whose workers each load the model (tests/test_cluster.py)",
    r"postgres|createdb|PAPERLAKE_CATALOG": "a PostgreSQL server (tests/test_catalog_postgres.py)",
    r"s3://|AWS_|PAPERLAKE_DATA_PATH|CREATE PERSISTENT SECRET|^from |^con\.|KEY_ID": (
        "an S3 bucket or a shared data path and its credentials (tests/test_lake.py)"
    ),
    r"prefect (server|work-pool|deploy|worker)|PREFECT_API_URL": "a Prefect server and worker",
}


@dataclass
class Command:
    """One `$ ` line of a console block (with its continuation lines) and the lines it shows."""

    line: int
    text: str
    shown: list[str] = field(default_factory=list)


def fences(page: Path, kind: str) -> list[tuple[int, str]]:
    """(line, body) of every ```kind block of `page`."""
    text = page.read_text()
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(2))
        for m in FENCE.finditer(text)
        if m.group(1) == kind
    ]


def logical_lines(body: str) -> list[tuple[int, str]]:
    """(offset, line) of a block's lines, a line ending in a backslash joined to the next."""
    joined: list[tuple[int, str]] = []
    carry: tuple[int, str] | None = None
    for offset, line in enumerate(body.splitlines(), start=1):
        if carry:
            offset, line = carry[0], carry[1] + " " + line.strip()
        carry = (offset, line[:-1].rstrip()) if line.endswith("\\") else None
        if not carry:
            joined.append((offset, line))
    return joined


def commands(page: Path) -> list[Command]:
    """Every command of `page`'s console blocks, in order."""
    found: list[Command] = []
    for start, body in fences(page, "console"):
        block: list[Command] = []
        for offset, line in logical_lines(body):
            if line.startswith("$ "):
                block.append(Command(start + offset, line[2:]))
            elif block and line.strip() and line.strip() != "...":
                block[-1].shown.append(line.strip())
        found += block
    return found


def project_copy(root: Path, warehouse: Path) -> Path:
    """A copy of the project's inputs at `root`, with a copy of `warehouse` and this .venv."""
    for name in ("data", "sql", "expectations"):
        shutil.copytree(PROJECT_ROOT / name, root / name)
    shutil.copytree(warehouse, root / "warehouse", ignore=shutil.ignore_patterns(".lock"))
    (root / ".venv").symlink_to(Path(sys.prefix))
    return root


def shown_in_order(shown: list[str], output: str) -> list[str]:
    """The lines of `shown` not found in `output`, each searched for after the one before."""
    at, missing = 0, []
    for want in shown:
        hit = output.find(want, at)
        if hit < 0:
            missing.append(want)
        else:
            at = hit + len(want)
    return missing


def test_a_page_parses_into_commands_and_the_lines_they_show(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\n\n```console\n$ echo a \\\n  b\na b\n...\n$ true\n```\n\n```sh\nmake run\n```\n"
    )
    parsed = commands(page)
    assert [(c.line, c.text, c.shown) for c in parsed] == [
        (4, "echo a b", ["a b"]),
        (8, "true", []),
    ]
    assert fences(page, "sh") == [(11, "make run\n")]
    assert shown_in_order(["a", "c"], "a\nb\nc\n") == []
    assert shown_in_order(["c", "a"], "a\nb\nc\n") == ["a"]


def test_more_of_what_the_pages_show_runs_than_not():
    ran = sum(len(commands(page)) for page in PAGES)
    assert ran > len(not_run()), (ran, len(not_run()))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_that_a_page_shows_runs(page, sample_run, tmp_path):
    listed = commands(page)
    if not listed:
        pytest.skip(f"{page.name} shows no console block")
    root = project_copy(tmp_path / "project", sample_run.settings.warehouse)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERLAKE_", "PREFECT_API"))}
    env |= {"COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb"}
    for command in listed:
        where = f"{page.name}:{command.line}: {command.text}"
        done = subprocess.run(
            ["bash", "-c", command.text],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{where}\nexit {done.returncode}\n{output[-3000:]}"
        missing = shown_in_order(command.shown, output)
        assert not missing, f"{where}\nnot printed: {missing}\n{output[-3000:]}"


def not_run() -> list:
    """Each ```sh block's command lines, skipped with the reason that fits them. A line that no
    reason fits takes the reason of the line before it in its block, which it follows (a
    `run` handed to the `serve` started before it)."""
    params = []
    for page in PAGES:
        for line, body in fences(page, "sh"):
            last = None
            for offset, text in logical_lines(body):
                text = text.strip()
                if not text or text.startswith("#"):
                    continue
                fits = next((r for p, r in NOT_RUN.items() if re.search(p, text)), None)
                last = fits or last
                why = fits or (last and f"follows a line that needs {last}")
                marks = [pytest.mark.skip(reason=why)] if why else []
                params.append(pytest.param(text, id=f"{page.name}:{line + offset}", marks=marks))
    return params


@pytest.mark.parametrize("text", not_run())
def test_a_command_not_run_says_why(text):
    pytest.fail(f"nothing says why `{text}` is not run: show it in a console block")
