"""GPU self-check: does training and generation work on this machine, and how fast? No network, keys or weights.

A randomly initialised model of a real Qwen2.5 shape (``--shape 0.5b|1.5b|7b``: the Instruct models'
config.json, with the embedded Qwen2.5 tokenizer) is saved once as a checkpoint in a temporary folder, or
``--model PATH`` names one, or ``--tiny`` makes a tiny Qwen2 with the same tokenizer (the CPU and CI). Then
each part runs in a process of its own (``python -m deepresearcher.bench.gpu --part NAME``) under its own
time limit (``--part-timeout``) and the run's total (``--budget``), so a part that crashes, hangs or poisons
its CUDA context never hides the others:

=================  ==========================================================================================
grpo_paper         2 GRPO steps of ``configs/paper-qwen2.5-7b.yaml`` made offline (synthetic world, extractive
                   reader, small batch) through ``train.pipeline.run_grpo``, as ``deepresearcher train`` runs it;
                   generation in process (``train.use_vllm=false``)
grpo_paper_vllm    the same through TRL's colocated vLLM (``train.use_vllm=true``); skipped without vLLM
sft                SFT steps of ``train.sft.train_sft`` on the scripted oracle's episodes
async_grpo         one step of asynchronous GRPO (``train.async_grpo``), with the tree attention it used
verl               one verl step (``train --engine verl``); needs verl, vLLM and a GPU
generate           tokens/s of the local engine (CUDA graphs on and off where it has them), transformers'
                   ``model.generate`` and vLLM, at ``--requests`` concurrent requests
=================  ==========================================================================================

Each part reports its figures, or ``skipped`` with the reason it cannot run here, or ``failed`` with the last
lines of its error (its whole log is ``parts/NAME.log`` under ``--out``). Training parts report the achieved
FLOP/s counted as 6 x parameters x trained tokens / update seconds, and the MFU against the card's peak dense
bf16 FLOP/s. The result is printed as JSON and written as ``result.json`` and ``report.html`` to ``--out``;
``exit_code`` is 1 when a part failed (a skipped part is fine), which is also this command's exit status.

    deepresearcher bench gpu --json                      # the 0.5B shape on this machine's GPU, about 5 minutes
    deepresearcher bench gpu --shape 7b --parts sft,generate
    deepresearcher bench gpu --model /models/Qwen2.5-1.5B-Instruct
    deepresearcher bench gpu --tiny --json               # every part on the CPU in a few minutes (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from deepresearcher.bench._gpu_common import PART_NAMES, SHAPES, PartContext, Skip, defaults_for
from deepresearcher.errors import ConfigError

_LOG_TAIL_LINES = 15


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deepresearcher bench gpu", description=__doc__.split("\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--shape", choices=sorted(SHAPES), default="0.5b",
                       help="A random model of this Qwen2.5-Instruct shape (default 0.5b).")
    which.add_argument("--model", help="A checkpoint directory (model and tokenizer) instead of a random model.")
    which.add_argument("--tiny", action="store_true", help="A tiny Qwen2 with the Qwen2.5 tokenizer: the CPU and CI.")
    parser.add_argument("--parts", default=",".join(PART_NAMES), help=f"Comma-separated, of: {', '.join(PART_NAMES)}.")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="runtime.device of every part.")
    parser.add_argument("--out", default="runs/bench-gpu", help="Where report.html, result.json and parts/*.log go.")
    parser.add_argument("--part-timeout", action="append", default=[], metavar="[NAME=]SECONDS",
                        help="Time limit of each part (a bare number, default 300) or of one part (NAME=S); repeatable.")
    parser.add_argument("--budget", type=float, default=600.0,
                        help="Seconds for the whole run; parts not started by then are skipped (default 600).")
    parser.add_argument("--steps", type=int, help="GRPO steps of grpo_paper (default 2).")
    parser.add_argument("--prompts", type=int, help="GRPO prompts per step (default 4; --tiny 2).")
    parser.add_argument("--group", type=int, help="GRPO rollouts per prompt (default 8; --tiny 2).")
    parser.add_argument("--turns", type=int, help="agent.max_turns of the GRPO parts (default 4; --tiny 3).")
    parser.add_argument("--tokens-per-turn", type=int, help="agent.max_tokens_per_turn (default 256; --tiny 24).")
    parser.add_argument("--sft-steps", type=int, help="SFT steps (default 10; --tiny 3).")
    parser.add_argument("--sft-batch", type=int, help="SFT episodes per step (default 8; --tiny 2).")
    parser.add_argument("--requests", help="Concurrent requests of the generate part, comma-separated (default 1,32,128).")
    parser.add_argument("--new-tokens", type=int, help="Tokens each generate request samples (default 64).")
    parser.add_argument("--prompt-tokens", type=int, help="Prompt length of the generate requests (default 256).")
    parser.add_argument("--json", action="store_true", help="Accepted for symmetry; the output is always JSON.")
    # Internal: one part in this process (how the parent runs each part), and faults for the tests.
    parser.add_argument("--part", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--inject", action="append", default=[], help=argparse.SUPPRESS)  # NAME=crash|hang
    return parser


def _timeouts(specs: list[str], parts: list[str]) -> dict[str, float]:
    """Each part's time limit (and the setup's) from ``--part-timeout`` values: a bare number for all, ``NAME=S``
    for one."""
    default, own = 300.0, {}
    for spec in specs:
        name, sep, seconds = spec.rpartition("=")
        try:
            value = float(seconds)
        except ValueError:
            raise ConfigError(f"--part-timeout {spec!r}: give seconds, or NAME=SECONDS (e.g. sft=120).") from None
        if sep and name not in ("setup", *PART_NAMES):
            raise ConfigError(f"--part-timeout {spec!r}: no part {name!r}; parts: setup, {', '.join(PART_NAMES)}.")
        if sep:
            own[name] = value
        else:
            default = value
    return {part: own.get(part, default) for part in ("setup", *parts)}


def _progress(message: str) -> None:
    print(f"[bench gpu] {message}", file=sys.stderr, flush=True)


def _tail(log: Path) -> str:
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    return "\n".join(lines[-_LOG_TAIL_LINES:]) or "(the part wrote nothing)"


def _run_child(name: str, work: Path, logs: Path, timeout: float, limit: str) -> dict[str, Any]:
    """Run one part in its own process; its result file, or why there is none (a crash, a time-out: ``limit`` says
    which option set it)."""
    result_file = work / "results" / f"{name}.json"
    log = logs / f"{name}.log"
    command = [sys.executable, "-m", "deepresearcher.bench.gpu", "--part", name, "--work", str(work)]
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as sink:
        # A session of its own, so a time-out ends the part's whole process group (vLLM and Ray start helpers).
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return {"status": "failed", "wall_s": round(time.perf_counter() - start, 1),
                    "error": f"timed out after {timeout:.0f} s ({limit})\n{_tail(log)}"}
    wall = round(time.perf_counter() - start, 1)
    if code == 0 and result_file.is_file():
        return {**json.loads(result_file.read_text(encoding="utf-8")), "wall_s": wall}
    tail = _tail(log)
    return {"status": "failed", "wall_s": wall, "error": f"exit code {code}: {tail.splitlines()[-1]}\n{tail}"}


def _summary(name: str, result: dict[str, Any]) -> str:
    if result["status"] == "skipped":
        return f"{name}: skipped ({result['skipped']})"
    if result["status"] == "failed":
        return f"{name}: FAILED after {result['wall_s']} s: {result['error'].splitlines()[0]}"
    return f"{name}: ok in {result['wall_s']} s"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Prepare the checkpoint and run every part in its own process; the whole result, also written to ``--out``."""
    from deepresearcher.bench._gpu_report import write_report

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PART_NAMES))
    if unknown:
        raise ConfigError(f"--parts: no part {', '.join(unknown)}; parts: {', '.join(PART_NAMES)}.")
    timeouts = _timeouts(args.part_timeout, parts)
    for spec in args.inject:
        name, _, fault = spec.partition("=")
        if name not in ("setup", *PART_NAMES) or fault not in ("crash", "hang"):
            raise ConfigError(f"--inject {spec!r}: give PART=crash or PART=hang.")
    if args.model and not (Path(args.model).expanduser() / "config.json").is_file():
        raise ConfigError(f"--model {args.model}: not a checkpoint directory (it has no config.json).")
    out = Path(args.out)
    logs = out / "parts"
    logs.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        work = Path(tmp)
        (work / "results").mkdir()
        (work / "args.json").write_text(json.dumps({**vars(args), **defaults_for(args)}), encoding="utf-8")
        _progress(f"preparing the model ({args.model or ('tiny' if args.tiny else args.shape)}) in {work}")
        setup = _run_child("setup", work, logs, timeouts["setup"], "--part-timeout")
        _progress(_summary("setup", setup))
        results: dict[str, dict[str, Any]] = {}
        for name in parts:
            left = args.budget - (time.perf_counter() - start)
            if setup["status"] != "ok":
                results[name] = {"status": "skipped", "skipped": "the model could not be prepared (see setup)"}
            elif left < 1:
                results[name] = {"status": "skipped", "skipped": f"the run's budget (--budget {args.budget:.0f} s) ran out"}
            else:
                limit = "--part-timeout" if timeouts[name] <= left else "what was left of --budget"
                _progress(f"{name}: running (at most {min(timeouts[name], left):.0f} s)")
                results[name] = _run_child(name, work, logs, min(timeouts[name], left), limit)
            _progress(_summary(name, results[name]))
    failed = [name for name, r in {"setup": setup, **results}.items() if r["status"] == "failed"]
    result = {
        "benchmark": "gpu",
        "model": {k: v for k, v in setup.get("model", {}).items() if k != "path"},  # a built one's is deleted
        "machine": setup.get("machine"),
        "options": {"device": args.device, "parts": parts, **defaults_for(args)},
        "setup": {k: v for k, v in setup.items() if k not in ("model", "machine")},
        "parts": results,
        "failed": failed,
        "exit_code": 1 if failed else 0,
        "wall_s": round(time.perf_counter() - start, 1),
        "out": str(out),
    }
    (out / "result.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    result["report"] = str(write_report(result, out / "report.html"))
    return result


def _part_figures(name: str, options: dict[str, Any], work: Path) -> dict[str, Any]:
    """The figures of part ``name`` (``setup``: the checkpoint and the machine), run in this process."""
    if name == "setup":
        from deepresearcher.bench._gpu_setup import prepare

        return prepare(options, work)
    from deepresearcher.bench import _gpu_generate, _gpu_parts

    runners = {"grpo_paper": _gpu_parts.grpo_paper, "grpo_paper_vllm": _gpu_parts.grpo_paper_vllm,
               "sft": _gpu_parts.sft, "async_grpo": _gpu_parts.async_grpo, "verl": _gpu_parts.verl,
               "generate": _gpu_generate.generate}
    try:
        return {"status": "ok", **runners[name](PartContext.load(work))}
    except Skip as reason:
        return {"status": "skipped", "skipped": str(reason)}


def run_part(name: str, work: Path) -> None:
    """One part in this process (the parent's child): its figures, peak memory and seconds to ``results/NAME.json``.
    An exception is left to end the process: its traceback in the part's log is the parent's error."""
    import resource

    from deepresearcher.inference import device

    options = json.loads((work / "args.json").read_text(encoding="utf-8"))
    fault = dict(spec.split("=", 1) for spec in options["inject"]).get(name)
    if fault == "crash":
        raise RuntimeError(f"fault injected into {name} (--inject {name}=crash)")
    if fault == "hang":
        time.sleep(24 * 3600)
    device.configure(options["device"])
    import torch

    if device.on_gpu():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    result = _part_figures(name, options, work)
    result["seconds"] = round(time.perf_counter() - start, 2)
    if result["status"] == "ok":
        result["peak_gpu_mem_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2) if device.on_gpu() else None
        result["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    (work / "results" / f"{name}.json").write_text(json.dumps(result), encoding="utf-8")


def main(argv: list[str]) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    if args.part:
        run_part(args.part, Path(args.work))
        return {}
    return run(args)


if __name__ == "__main__":
    outcome = main(sys.argv[1:])
    if outcome:
        print(json.dumps(outcome, indent=2))
        sys.exit(outcome["exit_code"])
