"""Every ``deepresearcher …`` command the project tells a user to run exists and parses.

The commands are collected from the README, docs/ (inline code and code blocks) and every string in
``src/`` (error messages, docstrings, help), then resolved against the real command tree: each
subcommand must exist and each option must be one the command takes. Placeholders (``FILE``, ``N``),
optional groups (``[--json]``), alternatives (``show|docs``) and ``...`` are read as a person reads them.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import typer.core
import typer.main

from deepresearcher.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
_INLINE = re.compile(r"`{1,2}(deepresearcher (?:[^`\n])+?)`{1,2}")
_FENCED = re.compile(r"```[a-z]*\n(.*?)```", re.S)


def _strings(source: Path) -> Iterator[str]:
    """The string literals of a module; implicit concatenations are one string, f-string fields read ``VALUE``."""
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "VALUE" for v in node.values)


def quoted_commands() -> dict[str, str]:
    """command text -> where it was first seen (a repository-relative path)."""
    found: dict[str, str] = {}
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for doc in docs:
        text = doc.read_text()
        where = str(doc.relative_to(ROOT))
        for command in _INLINE.findall(text):
            found.setdefault(command, where)
        for block in _FENCED.findall(text):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = re.sub(r"^(\$ |\.venv/bin/)", "", line.strip())
                if line.startswith("deepresearcher "):
                    found.setdefault(line, where)
    for module in sorted((ROOT / "src").rglob("*.py")):
        for text in _strings(module):
            for command in _INLINE.findall(text):
                found.setdefault(command, str(module.relative_to(ROOT)))
    return found


def _variants(command: str) -> list[list[str]]:
    """The argument lists a quoted command stands for (one per ``a|b`` alternative), without ``deepresearcher``."""
    command = re.split(r"\s+#\s", command)[0]  # a trailing shell comment
    command = re.split(r"\s[>|]\s", command)[0]  # a redirection or a pipe
    command = re.sub(r"(?<=\S)\[", "", command).replace("[", " ").replace("]", " ")  # SPEC[=RATIO], [--json]
    tokens = [t for t in shlex.split(command)[1:] if t != "..."]  # `--data ...` reads as `--data`, given a value below
    choices = [t.split("|") if "|" in t and not t.startswith("-") and "://" not in t else [t] for t in tokens]
    variants: list[list[str]] = [[]]
    for options in choices:
        variants = [v + [o] for v in variants for o in options]
    return variants


class CommandError(Exception):
    """A quoted command that the command line would refuse, or read as something else."""


def check(args: list[str]) -> None:
    """Raise ``CommandError`` unless ``args`` names an existing command with options it takes."""
    root = command = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="deepresearcher")
    while isinstance(command, typer.core.TyperGroup) and args and not args[0].startswith("-"):
        sub = command.get_command(ctx, args[0])
        if sub is None:
            raise CommandError(f"no command {args[0]!r} under {ctx.command_path!r}")
        command, args = sub, args[1:]
        ctx = typer.Context(command, info_name=sub.name, parent=ctx, **command.context_settings)
    option = next((p for p in command.params if args and args[-1] in p.opts), None)
    if option is not None and not getattr(option, "is_flag", True):
        args = [*args, "VALUE"]  # an option named in prose (`research --save`) without its value
    # The command line's own parser: it refuses an unknown option; what no argument takes is left over.
    try:
        opts, left, _order = command.make_parser(ctx).parse_args(args=list(args))
    except Exception as exc:  # the parser raises only usage errors
        raise CommandError(str(exc)) from exc
    if isinstance(command, typer.core.TyperGroup):
        left = left[1:]  # a group's subcommand comes after its options
    if left and not ctx.allow_extra_args:
        raise CommandError(f"{ctx.command_path} takes no argument {left[0]!r}")
    # A command group's name given as free text (`search index`) is a subcommand path gone wrong.
    groups = {name for name, cmd in root.commands.items() if isinstance(cmd, typer.core.TyperGroup)}
    for param in command.params:
        values = opts.get(param.name) if param.param_type_name == "argument" else None
        for value in values if isinstance(values, (list, tuple)) else [values]:
            if value in groups:
                raise CommandError(f"{ctx.command_path} {value!r}: {value!r} is a command group, not an argument")


QUOTED = quoted_commands()


def test_the_collection_finds_the_commands_of_docs_and_errors() -> None:
    sources = set(QUOTED.values())
    assert {"README.md", "src/deepresearcher/web/backends/__init__.py", "src/deepresearcher/web/backends/local.py"} <= sources
    assert any(c.startswith("deepresearcher index build") for c in QUOTED) and len(QUOTED) > 50


@pytest.mark.parametrize("command", sorted(QUOTED))
def test_quoted_command_parses(command: str) -> None:
    for args in _variants(command):
        try:
            check(args)
        except CommandError as exc:
            pytest.fail(f"{QUOTED[command]} quotes `{command}`, which does not parse: {exc}")


@pytest.mark.parametrize("args", [["search", "index"], ["index", "search"], ["eval", "--no-such-flag"],
                                  ["config", "show", "extra"]])
def test_a_command_that_does_not_exist_is_caught(args: list[str]) -> None:
    """The check fails for the mistakes it is there for, e.g. the old `deepresearcher search index`."""
    with pytest.raises(CommandError):
        check(args)
