"""Options shared by the commands, and the run settings as options derived from Settings."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from enum import Enum, StrEnum
from types import NoneType, UnionType
from typing import Annotated, Any, get_args, get_origin

import typer

from flows.cli.output import Format, fail
from flows.core.settings import Parameter, Settings, run_parameters

# Short and former names of setting options; every other option is --<setting-name>.
ALIASES = {"raw": ("-r",), "warehouse": ("-w",), "n_topics": ("--topics",)}

VersionOpt = Annotated[
    int | None, typer.Option("--version", help="Read this version (default: latest).")
]
FormatOpt = Annotated[
    Format,
    typer.Option(
        "--format",
        help="table (shortened to the terminal), or every row as csv, json, jsonl or markdown.",
    ),
]
MaxRowsOpt = Annotated[
    int,
    typer.Option(
        "--max-rows",
        min=0,
        help="Most rows a table shows, half from the start and half from the end; 0: all.",
    ),
]


def option(parameter: Parameter) -> tuple[Any, Any]:
    """The annotation and default of a setting's option.

    An option not given is None (a flag: False) and leaves the setting to the environment,
    paperlake.toml and its default: the help shows that default in brackets.
    """
    kind, default = parameter.type, parameter.default
    if get_origin(kind) is tuple:  # a repeatable option
        kind, default = list[get_args(kind)[0]], ", ".join(map(str, default))
    elif isinstance(kind, UnionType):  # int | None: None is the default
        kind = next(k for k in get_args(kind) if k is not NoneType)
    if parameter.choices:
        kind = StrEnum(parameter.name, {c: c for c in parameter.choices})
    flags = ("--" + parameter.name.replace("_", "-"), *ALIASES.get(parameter.name, ()))
    if kind is bool:  # a flag: given or not
        return Annotated[bool, typer.Option(*flags, help=parameter.help)], False
    # Not where the help words the default itself ("default: $PAPERLAKE_WAREHOUSE, ...").
    shown = default is not None and "(default:" not in parameter.help
    given = typer.Option(*flags, help=parameter.help, show_default=str(default) if shown else False)
    return Annotated[kind | None, given], None


def setting_options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command one option per run setting (or per named one); the command takes
    `settings`: the options given, over the environment, paperlake.toml and the defaults.

    Settings it refuses (a threshold out of range) end the command with their message.
    """
    chosen = [p for p in run_parameters() if not names or p.name in names]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "settings"]
        added = [
            inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=d)
            for p in chosen
            for a, d in [option(p)]
        ]

        @functools.wraps(command)
        def with_settings(**kwargs: Any) -> Any:
            given = {}
            for p in chosen:
                value = kwargs.pop(p.name)
                if isinstance(value, Enum):
                    value = value.value
                if isinstance(value, list):
                    value = tuple(value) or None
                if value is not None and value is not False:  # given on the command line
                    given[p.name] = value
            try:
                settings = Settings(**given)
            except ValueError as exc:
                fail(str(exc))
            return command(settings=settings, **kwargs)

        parameters = [*own, *added]
        with_settings.__signature__ = signature.replace(parameters=parameters)
        with_settings.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_settings

    return decorate
