"""``deepresearcher research "question"``: one research episode, shown live as it happens.

Thoughts, searches, pages opened and the notes read from them appear turn by turn; the answer comes
last with the pages it relied on. ``--json`` prints the whole trajectory (token ids included) instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from deepresearcher.cli.common import ConfigOption, SetOption, resolve_config

QUICKSTART_RUN = Path("runs/quickstart")
"""Where ``deepresearcher quickstart`` leaves its trained agent (``train.runs_dir``/``train.run_name``)."""
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


async def run_research(question: str, cfg: Any, on_event: Any = None, policy: tuple[Any, Any] | None = None) -> Any:
    """Run one episode as evaluation would run it (same session: policy, prompt, template, decoding).

    ``policy``: a ``(generator, tokenizer)`` to use instead of building ``agent.policy``; it is closed at the end.
    """
    from deepresearcher.agent.loop import RolloutTask
    from deepresearcher.agent.session import open_session

    async with open_session(cfg, policy=policy, decoding="eval") as session:
        [trajectory] = await session.run([RolloutTask(question=question)], on_event=on_event)
    return trajectory


@dataclass(frozen=True)
class TrainedAgent:
    """The quickstart's trained agent: its run's config, the model, and the held-out world it never saw."""

    config: Path
    model: Path
    world: Path
    example: str = ""
    """A one-hop question of that world: the README's example names an entity of the default world, which the
    held-out world may not have (the agent then searches and answers "cannot find", rightly)."""

    @property
    def overrides(self) -> list[str]:
        return [f"agent.policy={self.model}", f"world.dir={self.world}", f"search.index={self.world / 'index'}"]


def trained_agent(runs: Path = QUICKSTART_RUN) -> TrainedAgent | None:
    """The agent ``deepresearcher quickstart`` trained in ``runs`` (after GRPO, else after SFT), if any.

    Its run config carries the prompt, tools and limits it was trained with; the world is the run's
    held-out one, so a question from it is answered by reading, not recall.
    """
    config = runs / "config.yaml"
    model = next((m for m in (runs / "model", runs / "sft_model") if (m / "config.json").is_file()), None)
    if not config.is_file() or model is None:
        return None
    from deepresearcher.config import load_config
    from deepresearcher.train.tasks import ensure_training_worlds

    _, held_out = ensure_training_worlds(load_config(config, []))
    if held_out is None:
        return None
    from deepresearcher.world import load_tasks

    example = next((t.question for t in load_tasks(held_out, "test") if t.type == "hop1"), "")
    return TrainedAgent(config, model, held_out, example)


def research(
    question: str = typer.Argument(..., help="The question to research."),
    policy: str = typer.Option(None, "--policy", help="smollm2 | model dir | vllm:URL | openai:URL (agent.policy)."),
    search: str = typer.Option(None, "--search", help="Search backend, e.g. local, serper (search.backend)."),
    reader: str = typer.Option(None, "--reader", help="Page reader: extractive, embedding, llm, deepresearcher, raw (browse.reader)."),
    max_turns: int = typer.Option(None, "--max-turns", help="Turns before the episode stops (agent.max_turns)."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Tokens per turn (agent.max_tokens_per_turn)."),
    temperature: float = typer.Option(None, "--temperature", help="Sampling temperature; default greedy, as eval "
                                      "decodes (eval.temperature)."),
    as_json: bool = typer.Option(False, "--json", help="Print the trajectory as JSON instead of the live trace."),
    save: Path = typer.Option(None, "--save", help="Append the trajectory to this JSONL file."),
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
) -> None:
    """Research one question: think, search, read, answer — shown live.

    With neither --policy nor --config, the agent the quickstart trained (runs/quickstart) answers, on its
    held-out world; without one, the embedded SmolLM2.
    """
    flags = {
        "agent.policy": policy, "search.backend": search, "browse.reader": reader, "agent.max_turns": max_turns,
        "agent.max_tokens_per_turn": max_tokens, "eval.temperature": temperature,
    }
    settings = [*(overrides or []), *(f"{k}={v}" for k, v in flags.items() if v is not None)]
    console = Console()
    notices = Console(stderr=True)  # stdout carries only the trace, or only the JSON with --json
    trained = trained_agent() if config is None and policy is None else None
    if trained is not None:
        config, settings = trained.config, [*trained.overrides, *settings]
        notices.print(f"[dim]policy: the agent trained by the quickstart ({trained.model}); world: its held-out "
                      f"world ({trained.world}), whose entities it has never seen"
                      + (f", e.g. \"{escape(trained.example)}\"" if trained.example else "")
                      + ". Pass --policy or --config for another.[/]", highlight=False)
    cfg = resolve_config(config, settings)
    if trained is None and config is None and policy is None:
        from deepresearcher.agent.guide import guide_requested

        how = ("guided through the protocol's turns (agent.guide): it searches, reads a result and answers from "
               "the page" if guide_requested(cfg, decoding="eval", policy_from_config=True)
               else "unguided (agent.guide=off); it does not know this protocol")
        notices.print(f"[dim]policy: the embedded SmolLM2-135M-Instruct, {how}. Run `deepresearcher quickstart` "
                      "to train an agent; research then uses it.[/]", highlight=False)
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
