"""Settings: where each setting comes from, what is refused, and `import paperlake`."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import typer
from setuptools import find_packages
from typer.testing import CliRunner

from flows.cli.options import setting_options
from flows.core.settings import PROJECT_ROOT, Settings, SettingsError, run_parameters
from tests.conftest import write


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """An empty working folder, and an environment without paperlake's settings."""
    monkeypatch.chdir(tmp_path)
    for name in ("WAREHOUSE", "CATALOG", "DATA_PATH", "CLUSTER", "BATCH_SIZE", "RAW"):
        monkeypatch.delenv(f"PAPERLAKE_{name}", raising=False)
    return tmp_path


def test_an_argument_wins_over_the_environment_over_the_file_over_the_default(here, monkeypatch):
    assert (Settings().batch_size, Settings().warehouse) == (16, Path("warehouse"))
    write(here / "paperlake.toml", 'batch_size = 8\nwarehouse = "from-file"\n')
    assert (Settings().batch_size, Settings().warehouse) == (8, Path("from-file"))
    monkeypatch.setenv("PAPERLAKE_BATCH_SIZE", "32")
    monkeypatch.setenv("PAPERLAKE_WAREHOUSE", "from-env")
    assert (Settings().batch_size, Settings().warehouse) == (32, Path("from-env"))
    given = Settings(batch_size=4, warehouse="given")
    assert (given.batch_size, given.warehouse) == (4, Path("given"))


def test_an_empty_variable_or_an_explicit_none_leaves_no_value(here, monkeypatch):
    monkeypatch.setenv("PAPERLAKE_CATALOG", "postgresql://u@h:5432/db")
    assert Settings().catalog == "postgresql://u@h:5432/db"
    assert Settings(catalog=None).catalog is None
    monkeypatch.setenv("PAPERLAKE_CATALOG", "")
    assert Settings().catalog is None


def test_the_file_takes_every_setting_and_leaves_its_file_rules_to_ingest(here):
    write(
        here / "paperlake.toml",
        'raw = ["a", "b"]\nrefit_topics = true\nprecision = "fp32"\n\n'
        '[files."*.csv"]\nformat = "csv"\n',
    )
    settings = Settings()
    assert settings.raw == (Path("a"), Path("b"))
    assert (settings.refit_topics, settings.precision) == (True, "fp32")


@pytest.mark.parametrize(
    ("file", "env", "given", "message"),
    [
        ("", {}, {"neighbors_method": "annoy"}, "neighbors_method must be auto, exact, hnsw or"),
        ("", {}, {"duplicate_threshold": 1.5}, "duplicate_threshold must be in (0, 1]"),
        ("", {}, {"cluster": "dask"}, "cluster 'dask' must be local:N"),
        ("", {}, {"batch_szie": 8}, "batch_szie: not a setting"),
        ("", {"PAPERLAKE_BATCH_SIZE": "many"}, {}, "batch_size: Input should be a valid integer"),
        ("seed = 'x'\n", {}, {}, "seed: Input should be a valid integer"),
        ("modle = 'm'\n", {}, {}, "paperlake.toml: modle: not a setting"),
        ("seed = \n", {}, {}, "paperlake.toml: not valid TOML"),
    ],
)
def test_a_bad_value_is_refused_in_one_line_naming_its_setting(
    here, monkeypatch, file, env, given, message
):
    if file:
        write(here / "paperlake.toml", file)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        Settings(**given)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_changed_settings_are_checked_too():
    settings = Settings(warehouse="w").with_(raw=["a"], batch_size=8)
    assert (settings.raw, settings.batch_size, settings.warehouse) == ((Path("a"),), 8, Path("w"))
    with pytest.raises(SettingsError, match="duplicate_threshold must be in"):
        settings.with_(duplicate_threshold=0)


def command_app() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    @setting_options("batch_size", "raw", "refit_topics", "compact_every")
    def show(*, settings: Settings) -> None:
        print(settings.batch_size, [str(p) for p in settings.raw], settings.refit_topics)
        print(settings.compact_every)

    @app.command()
    def other() -> None: ...

    return app


def test_an_option_not_given_leaves_the_setting_to_the_environment_and_the_file(here, monkeypatch):
    app, runner = command_app(), CliRunner()
    write(here / "paperlake.toml", 'raw = ["from-file"]\nrefit_topics = true\nbatch_size = 8\n')
    monkeypatch.setenv("PAPERLAKE_BATCH_SIZE", "32")
    assert runner.invoke(app, ["show"]).output == "32 ['from-file'] True\n100\n"
    given = ["show", "--batch-size", "16", "-r", "a", "-r", "b", "--compact-every", "0"]
    assert runner.invoke(app, given).output == "16 ['a', 'b'] True\n0\n"
    monkeypatch.setenv("PAPERLAKE_BATCH_SIZE", "many")
    refused = runner.invoke(app, ["show"])
    assert refused.exit_code == 1
    assert "error: batch_size: Input should be a valid integer" in refused.output


def test_every_setting_has_a_help_text_and_a_default():
    for parameter in run_parameters():
        assert parameter.help.endswith((".", ")")), parameter.name
        assert parameter.default == Settings.model_fields[parameter.name].default


def test_import_paperlake_works_outside_the_repository(tmp_path):
    shown = subprocess.run(
        [sys.executable, "-c", "import paperlake, flows; print(paperlake.Settings.__name__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == "Settings\n"
    import paperlake

    assert paperlake.__version__ and paperlake.Settings is Settings


def test_pyproject_lists_every_package():
    listed = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = find_packages(str(PROJECT_ROOT), include=["flows*"], exclude=["flows.api"])
    assert sorted(listed["packages"]) == sorted(["paperlake", *found])


# Imports OpenVINO as a run does, after paperlake set the environment, and counts the
# processes forked meanwhile (OpenVINO's telemetry forks one to send its event).
OPENVINO_PROBE = """
import os, time
forks = []
os.register_at_fork(before=lambda: forks.append(1))
from flows.core.settings import configure_environment
configure_environment()
import openvino
time.sleep(1.5)  # the event is sent from a thread pool
print("forks", len(forks))
"""


def test_openvino_forks_nothing_to_send_telemetry_once_the_environment_is_set(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(PROJECT_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", OPENVINO_PROBE], capture_output=True, text=True, timeout=120,
        cwd=PROJECT_ROOT, env=env,
    )  # fmt: skip
    assert result.stdout.strip() == "forks 0", result.stderr[-2000:]
    # Its documented opt-out, written where the user had made no choice.
    assert (tmp_path / "intel" / "openvino_telemetry").read_text() == "0"


def test_a_choice_made_about_openvino_telemetry_is_left_as_it_is(tmp_path):
    from flows.core.settings import decline_openvino_telemetry

    consent = tmp_path / "intel" / "openvino_telemetry"
    consent.parent.mkdir()
    consent.write_text("1")
    decline_openvino_telemetry(tmp_path)
    assert consent.read_text() == "1"
