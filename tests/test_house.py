"""The house rules, checked on the code itself: each stage imports only core and the stages
before it, another stage only through its package face, and no module or function grows past
what one reader holds (400 and 80 lines)."""

from __future__ import annotations

import ast
from pathlib import Path

from flows.core.settings import PROJECT_ROOT

FLOWS = PROJECT_ROOT / "flows"
# Each stage may import core and the stages before it, never one after it.
# flows/tasks.py and flows/runner.py are the pipeline's own parts; flows/api is the
# `paperlake` package, over all of them.
STAGES = ("core", "ingest", "embed", "derive", "validate", "publish", "tasks", "runner",
          "pipeline", "read", "serve", "cli", "api")  # fmt: skip


def modules() -> dict[str, Path]:
    """Every module of flows/, by dotted name."""
    found = {}
    for path in sorted(FLOWS.rglob("*.py")):
        parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def stage_of(module: str) -> str | None:
    """The stage a dotted module belongs to (flows.embed.cache -> embed), None for flows."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def imports_of(path: Path, module: str) -> list[tuple[int, str, list[str]]]:
    """(line, module imported, names taken from it) of every import in a file, nested ones too."""
    found = []
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base, [alias.name for alias in node.names]))
    return found


def crossings() -> list[tuple[str, int, str, str]]:
    """(module, line, what it imports, which rule that breaks) for every import of flows code
    that reaches a later stage or into another stage's internals."""
    every = modules()
    broken = []
    for module, path in every.items():
        own = stage_of(module)
        for line, target, names in imports_of(path, module):
            if not target.startswith("flows"):
                continue
            reached = {target} | {f"{target}.{n}" for n in names if f"{target}.{n}" in every}
            for name in reached:
                stage = stage_of(name)
                if stage is None or stage == own or stage not in STAGES or own not in STAGES:
                    continue
                if STAGES.index(stage) > STAGES.index(own):
                    broken.append((module, line, name, f"a later stage ({stage})"))
                elif stage != "core" and name != f"flows.{stage}":
                    broken.append((module, line, name, f"inside {stage}, not its face"))
    return broken


def test_no_stage_imports_a_later_stage_or_another_stage_s_internals():
    assert crossings() == []


def test_the_walk_sees_a_crossing_where_there_is_one(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from flows.embed.cache import EmbeddingCache\nfrom flows.serve import x\n")
    found = imports_of(bad, "flows.derive.bad")
    assert (1, "flows.embed.cache", ["EmbeddingCache"]) in found
    assert (2, "flows.serve", ["x"]) in found


def test_no_module_past_400_lines_and_no_function_past_80():
    long_modules, long_functions = [], []
    for module, path in modules().items():
        text = path.read_text()
        if text.count("\n") > 400:
            long_modules.append((module, text.count("\n")))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    long_functions.append((module, node.name, length))
    assert long_modules == [] and long_functions == []
