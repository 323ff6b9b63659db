"""Run an agent given as a program for one question: a command, or ``module:function``, in a process of its own.

A program is what its author wrote, unchanged: it reads the policy's address from the variables the OpenAI SDK
reads itself and the tools' from ours, and it prints (or returns) its answer.

    OPENAI_BASE_URL           the policy endpoint, scoped to this episode (``.../episodes/<id>/v1``)
    OPENAI_API_KEY            the episode id (the endpoint also accepts it as the key)
    OPENAI_MODEL              the served model name
    DEEPRESEARCHER_MCP_URL    the tools over MCP (streamable HTTP), scoped to this episode
    DEEPRESEARCHER_TOOLS_URL  the tools over plain HTTP: POST {url}/web_search, {url}/browse_webpage
    DEEPRESEARCHER_QUESTION   the question (also the command's last argument)

A command's answer is the last non-empty line of its standard output; a function's is its return value (a
coroutine function is awaited). Every program runs in its own process group, so a hung one is killed whole at
the episode's timeout and a crashed one ends its episode alone: the outcome says which, never an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass

_TAIL = 2000


@dataclass(frozen=True)
class EpisodeAddress:
    """Where one episode's program reaches the policy and the tools."""

    policy_url: str
    mcp_url: str
    tools_url: str
    episode_id: str
    model: str


@dataclass(frozen=True)
class ProgramOutcome:
    """How one program run ended: its answer, or why it has none."""

    answer: str | None
    status: str  # "answered", "no_answer", "crashed", "timeout"
    seconds: float
    stderr_tail: str = ""


def program_argv(program: str, question: str) -> list[str]:
    """The process to start: ``module:function`` through ``deepresearcher.endpoint.call``, else the command."""
    head = program.strip()
    if ":" in head and " " not in head and not os.path.exists(head.split(":")[0]):
        return [sys.executable, "-m", "deepresearcher.endpoint.call", head, question]
    argv = shlex.split(head)
    if argv and argv[0].endswith(".py"):
        argv = [sys.executable, *argv]
    return [*argv, question]


async def run_program(program: str, question: str, address: EpisodeAddress, timeout_s: float) -> ProgramOutcome:
    """Run ``program`` on ``question`` against ``address`` and wait at most ``timeout_s``."""
    env = {**os.environ, "OPENAI_BASE_URL": address.policy_url, "OPENAI_API_KEY": address.episode_id,
           "OPENAI_MODEL": address.model, "DEEPRESEARCHER_MCP_URL": address.mcp_url,
           "DEEPRESEARCHER_TOOLS_URL": address.tools_url, "DEEPRESEARCHER_QUESTION": question}
    start = time.perf_counter()
    try:
        process = await asyncio.create_subprocess_exec(
            *program_argv(program, question), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL, env=env, start_new_session=True)
    except OSError as exc:
        return ProgramOutcome(None, "crashed", time.perf_counter() - start, f"cannot start {program!r}: {exc}")
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_s)
    except asyncio.TimeoutError:
        _kill_group(process)
        with contextlib.suppress(Exception):
            await process.wait()
        return ProgramOutcome(None, "timeout", time.perf_counter() - start, f"killed after {timeout_s:g} s")
    except asyncio.CancelledError:
        _kill_group(process)
        raise
    seconds = time.perf_counter() - start
    tail = stderr.decode(errors="replace")[-_TAIL:]
    if process.returncode != 0:
        return ProgramOutcome(None, "crashed", seconds, f"exit code {process.returncode}: {tail}")
    lines = [line.strip() for line in stdout.decode(errors="replace").splitlines() if line.strip()]
    return ProgramOutcome(lines[-1], "answered", seconds, tail) if lines else ProgramOutcome(None, "no_answer", seconds, tail)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
