"""``deepresearcher research "question"``: one research episode, shown live as it happens.

Thoughts, searches, pages opened and the notes read from them appear turn by turn; the answer comes
last with the pages it relied on. ``--json`` prints the whole trajectory (token ids included) instead.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.panel import Panel

from deepresearcher.cli.common import ConfigOption, SetOption, resolve_config

_THOUGHT_CHARS = 700
_NOTE_CHARS = 400


def _thought(text: str) -> str:
    head = text.split("</think>", 1)[0] if "</think>" in text else text.split("<tool_call>", 1)[0].split("<answer>", 1)[0]
    head = head.strip()
    return head if len(head) <= _THOUGHT_CHARS else head[:_THOUGHT_CHARS] + " …"


def pages_read(trajectory: Any) -> list[tuple[str, str]]:
    """(url, information) of every page the episode read successfully, in order, first read of each URL."""
    from deepresearcher.agent.tools import page_notes

    seen: dict[str, str] = {}
    for turn in trajectory.turns:
        call = turn.tool_call
        if call is None or call.name != "browse_webpage" or not isinstance(call.observation, list):
            continue
        for page in call.observation:
            if isinstance(page, dict) and "information" in page:
                seen.setdefault(page["url"], page_notes(page["information"]))
    return list(seen.items())


class TraceDisplay:
    """An ``on_event`` callback that prints one episode for a person, as it happens."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Any = None

    def __call__(self, kind: str, trajectory: Any, turn: Any) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        getattr(self, f"_on_{kind}")(trajectory, turn)

    def _on_generate(self, trajectory: Any, turn: Any) -> None:
        self._status = self.console.status(f"Turn {len(trajectory.turns) + 1}: the policy is thinking…")
        self._status.start()

    def _on_turn(self, trajectory: Any, turn: Any) -> None:
        out = self.console
        out.rule(f"[bold]Turn {len(trajectory.turns)}[/]", align="left")
        thought = _thought(turn.text)
        if thought:
            out.print(f"[italic dim]{thought}[/]", highlight=False)
        call = turn.tool_call
        if call is not None and call.name == "web_search":
            out.print("[bold cyan]search[/] " + " | ".join(map(str, call.arguments.get("query", []))), highlight=False)
        elif call is not None:
            for url in call.arguments.get("url_list", []):
                out.print(f"[bold magenta]open[/] {url}", highlight=False)
        if turn.format_error:
            out.print(f"[yellow]format error[/] {turn.format_error}", highlight=False)
        if turn.finish_reason == "length":
            out.print("[yellow]the turn hit its token limit[/]")

    def _on_tool(self, trajectory: Any, turn: Any) -> None:
        call = turn.tool_call
        if call is None:
            return
        from deepresearcher.agent.tools import page_notes

        out = self.console
        if call.error:
            out.print(f"  [red]{call.error}[/]", highlight=False)
            return
        for entry in call.observation or []:
            if call.name == "web_search":
                out.print(f"  [cyan]{entry.get('search_query', '')}[/]", highlight=False)
                for hit in entry.get("web_page_info_list", [])[:3]:
                    out.print(f"    • {hit['title']}  [dim]{hit['url']}[/]", highlight=False)
            elif "error" in entry:
                out.print(f"  [red]{entry['url']}: {entry['error']}[/]", highlight=False)
            else:
                info = page_notes(entry.get("information"))
                info = info if len(info) <= _NOTE_CHARS else info[:_NOTE_CHARS] + " …"
                out.print(f"  [magenta]notes from {entry['url']}[/]\n    {info}", highlight=False)

    def _on_end(self, trajectory: Any, turn: Any) -> None:
        answer = trajectory.answer if trajectory.answer is not None else "(no answer)"
        lines = [f"[bold]{answer}[/]", ""]
        pages = pages_read(trajectory)
        support = [u for u, info in pages if trajectory.answer and trajectory.answer.lower() in info.lower()]
        for url, _ in pages:
            lines.append(f"{'[green]✓[/]' if url in support else '·'} {url}")
        if pages:
            lines.append("")
        lines.append(
            f"[dim]ended: {trajectory.termination} · turns: {len(trajectory.turns)} · format errors: "
            f"{trajectory.format_errors} · {trajectory.metadata.get('seconds', 0):.1f}s[/]"
        )
        self.console.print(Panel("\n".join(lines), title="Answer", expand=False), highlight=False)


async def run_research(question: str, cfg: Any, on_event: Any = None) -> Any:
    """Run one episode with the configured policy, tools and environment; return its trajectory."""
    from deepresearcher.agent.loop import RolloutTask, run_rollouts
    from deepresearcher.agent.protocols import get_protocol
    from deepresearcher.agent.template import ChatTemplate
    from deepresearcher.generate.factory import make_policy
    from deepresearcher.web import make_environment

    protocol = get_protocol(cfg.agent.protocol)
    generator, tokenizer = make_policy(cfg)
    try:
        async with make_environment(cfg) as env:
            [trajectory] = await run_rollouts(
                [RolloutTask(question=question)], generator, protocol.make_toolbox(env, cfg), tokenizer, cfg.agent,
                on_event=on_event, template=ChatTemplate(tokenizer, protocol),
            )
    finally:
        await generator.aclose()
    return trajectory


def research(
    question: str = typer.Argument(..., help="The question to research."),
    policy: str = typer.Option(None, "--policy", help="smollm2 | model dir | vllm:URL | openai:URL (agent.policy)."),
    search: str = typer.Option(None, "--search", help="Search backend, e.g. local, serper (search.backend)."),
    reader: str = typer.Option(None, "--reader", help="Page reader: extractive, embedding, llm, raw (browse.reader)."),
    max_turns: int = typer.Option(None, "--max-turns", help="Turns before the episode stops (agent.max_turns)."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Tokens per turn (agent.max_tokens_per_turn)."),
    temperature: float = typer.Option(None, "--temperature", help="Sampling temperature (agent.temperature)."),
    as_json: bool = typer.Option(False, "--json", help="Print the trajectory as JSON instead of the live trace."),
    save: Path = typer.Option(None, "--save", help="Append the trajectory to this JSONL file."),
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
) -> None:
    """Research one question: think, search, read, answer — shown live."""
    flags = {
        "agent.policy": policy, "search.backend": search, "browse.reader": reader, "agent.max_turns": max_turns,
        "agent.max_tokens_per_turn": max_tokens, "agent.temperature": temperature,
    }
    cfg = resolve_config(config, [*(overrides or []), *(f"{k}={v}" for k, v in flags.items() if v is not None)])
    console = Console()
    display = None if as_json else TraceDisplay(console)
    if display is not None:
        console.print(Panel(question, title="Question", expand=False), highlight=False)
    trajectory = asyncio.run(run_research(question, cfg, display))
    if save is not None:
        from deepresearcher.agent.trajectory import save_trajectories

        save_trajectories(save, [trajectory], append=True)
    if as_json:
        typer.echo(trajectory.model_dump_json(indent=2))


def register(app: typer.Typer) -> None:
    app.command(
        "research",
        epilog='Example: deepresearcher research "Who founded Velmora Works?" --policy vllm:http://127.0.0.1:8000/v1 '
        "--set agent.tokenizer=qwen2.5",
    )(research)
