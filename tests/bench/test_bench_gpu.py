"""`bench gpu --tiny`: every part runs in its own process on the CPU and reports its figures or why it cannot run;
a part that crashes or hangs is reported failed (the others still report) and fails the command."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from deepresearcher.bench._gpu_common import PART_NAMES, peak_flops
from deepresearcher.cli.main import app

pytestmark = pytest.mark.timeout(600)
REQUESTS = ("1", "4")


@pytest.fixture(scope="module")
def tiny_run(load_bench, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The whole check on the tiny model, with the generate and SFT parts made small."""
    out = tmp_path_factory.mktemp("bench-gpu")
    result = load_bench("gpu").main(["--tiny", "--out", str(out), "--device", "cpu", "--requests", ",".join(REQUESTS),
                                     "--new-tokens", "8", "--prompt-tokens", "64", "--sft-steps", "2"])
    return result, out


def test_no_part_fails_on_the_cpu_and_each_gives_figures_or_a_reason(tiny_run) -> None:
    result, _ = tiny_run
    assert list(result["parts"]) == list(PART_NAMES)
    assert result["failed"] == [] and result["exit_code"] == 0, {k: v.get("error") for k, v in result["parts"].items()}
    for name, part in result["parts"].items():
        assert part["status"] in ("ok", "skipped"), name
        if part["status"] == "skipped":
            assert len(part["skipped"]) > 10, name
        else:
            assert part["wall_s"] > 0 and part["peak_rss_gb"] > 0 and part["peak_gpu_mem_gb"] is None, name
    vllm = importlib.util.find_spec("vllm") is not None
    assert result["parts"]["grpo_paper_vllm"]["skipped"] == ("vLLM generation needs a CUDA GPU" if vllm
                                                              else "vLLM is not installed")
    assert "CUDA GPUs" in result["parts"]["verl"]["skipped"] or "not installed" in result["parts"]["verl"]["skipped"]
    assert result["machine"]["device_type"] == "cpu" and result["machine"]["versions"]["torch"]
    assert result["model"]["name"] == "tiny" and result["model"]["params"] > 1_000_000


def test_the_paper_recipe_ran_two_grpo_steps_with_its_timings(tiny_run) -> None:
    grpo = tiny_run[0]["parts"]["grpo_paper"]
    assert grpo["steps"] == 2 and [s["step"] for s in grpo["per_step"]] == [1, 2]
    assert grpo["s_per_step"] == pytest.approx(grpo["rollout_s"] + grpo["update_s"], abs=2e-3)
    assert grpo["policy_tokens_per_s"] > 0 and grpo["trained_tokens"] > 0 and grpo["update_tflops"] > 0
    assert grpo["mfu"] is None, "no peak FLOP/s for a CPU"
    assert grpo["settings"]["rollouts_per_step"] == 4


def test_sft_and_async_grpo_report_their_speed_and_tree_attention(tiny_run) -> None:
    parts = tiny_run[0]["parts"]
    assert parts["sft"]["steps"] == 2 and parts["sft"]["tokens_per_s"] > 0 and parts["sft"]["update_tflops"] > 0
    async_grpo = parts["async_grpo"]
    assert async_grpo["steps"] == 1 and async_grpo["update_s"] > 0 and async_grpo["trained_tokens"] > 0
    assert async_grpo["tree_attention"]["name"] == "sdpa"


def test_generate_compares_the_engine_with_transformers_at_each_request_count(tiny_run) -> None:
    generate = tiny_run[0]["parts"]["generate"]
    for engine in ("local engine", "transformers generate"):
        for n in REQUESTS:
            rate = generate["generation"][engine][n]
            assert rate["tokens_per_s"] > 0 and 0 < rate["tokens"] <= 8 * int(n), (engine, n)
    assert "skipped" in generate["generation"]["vllm"]


def test_the_report_page_and_result_file_name_every_part(tiny_run) -> None:
    result, out = tiny_run
    page = (out / "report.html").read_text(encoding="utf-8")
    assert all(f"<td>{name}</td>" in page for name in PART_NAMES)
    assert "transformers generate" in page and "4 at once" in page
    assert json.loads((out / "result.json").read_text(encoding="utf-8"))["parts"] == result["parts"]
    assert (out / "parts" / "grpo_paper.log").is_file()


def test_a_part_that_hangs_or_crashes_fails_and_the_others_still_report(load_bench, tmp_path: Path) -> None:
    start = time.perf_counter()
    result = load_bench("gpu").main(["--tiny", "--out", str(tmp_path), "--parts", "sft,generate,verl",
                                     "--inject", "sft=hang", "--part-timeout", "sft=3", "--inject", "generate=crash"])
    assert time.perf_counter() - start < 120, "the hung part was stopped at its time limit"
    parts = result["parts"]
    assert parts["sft"]["status"] == "failed" and parts["sft"]["error"].startswith("timed out after 3 s")
    assert parts["generate"]["status"] == "failed"
    assert parts["generate"]["error"].startswith("exit code 1: RuntimeError: fault injected into generate")
    assert parts["verl"]["status"] == "skipped"
    assert result["failed"] == ["sft", "generate"] and result["exit_code"] == 1
    assert "<code>sft</code> failed: timed out" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_parts_not_started_within_the_budget_are_skipped(load_bench, tmp_path: Path) -> None:
    result = load_bench("gpu").main(["--tiny", "--out", str(tmp_path), "--parts", "verl,generate", "--budget", "0"])
    assert {p["status"] for p in result["parts"].values()} == {"skipped"}
    assert "--budget 0 s" in result["parts"]["generate"]["skipped"] and result["exit_code"] == 0


def test_the_command_exits_1_when_a_part_failed(tmp_path: Path) -> None:
    outcome = CliRunner().invoke(app, ["bench", "gpu", "--tiny", "--json", "--out", str(tmp_path), "--parts", "verl",
                                       "--inject", "verl=crash"])
    assert outcome.exit_code == 1
    assert json.loads(outcome.stdout[outcome.stdout.index("{"):])["failed"] == ["verl"]


def test_part_timeouts_and_peak_flops() -> None:
    from deepresearcher.bench.gpu import _timeouts
    from deepresearcher.errors import ConfigError

    assert _timeouts(["60", "sft=5"], ["sft", "generate"]) == {"setup": 60.0, "sft": 5.0, "generate": 60.0}
    with pytest.raises(ConfigError, match="no part 'sfft'"):
        _timeouts(["sfft=5"], ["sft"])
    assert peak_flops("NVIDIA H100 PCIe") == 756e12 and peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert peak_flops("NVIDIA A100-SXM4-80GB") == 312e12 and peak_flops("Some Future GPU") is None
