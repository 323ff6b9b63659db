"""``bench gpu``'s report page: the parts with their status and figures, the generation comparison, the machine
(through the project's one page writer, ``reports.page``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepresearcher.reports.page import ReportPage, Table

_MFU_NOTE = ("Training figures are those of the last step (the first includes warm-up). TFLOP/s = 6 x parameters x "
             "trained tokens / update seconds (forward and backward of the policy only: the reference model's forward "
             "and activation recomputation are not counted); MFU = that / the card's peak dense bf16 FLOP/s.")


def _status(part: dict[str, Any]) -> str:
    if part["status"] == "skipped":
        return f"skipped: {part['skipped']}"
    if part["status"] == "failed":
        return f"FAILED: {part['error'].splitlines()[0]}"
    return "ok"


def _number(value: float | None, spec: str) -> str | None:
    return None if value is None else format(value, spec)


def parts_table(parts: dict[str, dict[str, Any]]) -> Table:
    """One row per part: seconds, step times, throughput, memory, MFU (a dash where it has none) and status."""
    records = [{
        "part": name, "wall s": _number(part.get("wall_s"), ".1f"),
        "s/step": _number(part.get("s_per_step"), ".2f"), "rollout s": _number(part.get("rollout_s"), ".2f"),
        "update s": _number(part.get("update_s"), ".2f"),
        "tokens/s": _number(part.get("policy_tokens_per_s", part.get("tokens_per_s")), ",.0f"),
        "peak GPU GB": _number(part.get("peak_gpu_mem_gb"), ".1f"), "peak RSS GB": _number(part.get("peak_rss_gb"), ".1f"),
        "TFLOP/s": _number(part.get("update_tflops"), ".2f"), "MFU": _number(part.get("mfu"), ".1%"),
        "status": _status(part),
    } for name, part in parts.items()]
    return Table.from_records(records)


def generation_table(generate: dict[str, Any]) -> Table:
    """Tokens/s of each generator (rows) at each request count (columns); a generator that did not run says why."""
    counts = [str(n) for n in generate["requests"]]
    rows = []
    for engine, rates in generate["generation"].items():
        if "skipped" in rates:
            rows.append([engine, *([f"skipped: {rates['skipped']}"] + ["—"] * (len(counts) - 1))])
        else:
            rows.append([engine, *(f"{rates[n]['tokens_per_s']:,.0f}" for n in counts)])
    return Table(["generator (tokens/s)", *(f"{n} at once" for n in counts)], rows)


def write_report(result: dict[str, Any], path: Path) -> Path:
    """``report.html`` of a ``bench gpu`` run."""
    machine = result.get("machine") or {}
    model = result.get("model") or {}
    versions = ", ".join(f"{k} {v}" for k, v in (machine.get("versions") or {}).items() if v)
    what = (f"checkpoint `{model.get('name')}`" if "/" in str(model.get("name"))
            else f"random model of shape `{model.get('name')}`")
    on = machine.get("device", "an unknown device")
    notes = [f"The {what} ({model.get('params', 0) / 1e6:,.1f}M parameters) on {on}. Tokens/s: sampled tokens per "
             "second of rollout (GRPO), trained tokens per second (SFT, verl).", _MFU_NOTE]
    warnings = [f"`{name}` failed: {part['error']}" for name, part in result["parts"].items() if part["status"] == "failed"]
    if result["setup"].get("status") == "failed":
        warnings.insert(0, f"The model could not be prepared: {result['setup']['error']}")
    tables = {"Parts": parts_table(result["parts"])}
    generate = result["parts"].get("generate", {})
    if generate.get("status") == "ok":
        tables[f"Generation: {generate['prompt_tokens']}-token prompts, {generate['new_tokens']} new tokens, "
               "greedy"] = generation_table(generate)
    settings = [f"{key}: {value}" for key, value in machine.items() if key != "versions" and value is not None]
    settings += [f"versions: {versions}", "options: " + ", ".join(
        f"{k} {','.join(v) if isinstance(v, list) else v}" for k, v in result["options"].items())]
    return ReportPage(f"GPU self-check: {machine.get('device', '?')}", notes=notes, warnings=warnings, tables=tables,
                      settings=settings).write(path)
