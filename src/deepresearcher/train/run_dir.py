"""Everything a run writes, in one directory ``runs/<name>/``::

    runs/<name>/
      config.yaml            the resolved config the run started with
      metrics.jsonl          one JSON object per optimizer step (documented in docs/train.md)
      samples/step_<n>.jsonl trajectories sampled at that step (full token-level records)
      checkpoints/           trainer checkpoints (model, optimizer, RNG, data position) for --resume
      model/                 the final policy, loadable with from_pretrained
      tensorboard/           TensorBoard event files (tensorboard --logdir runs)
      report.html, *.png     the report page: tables, settings, curves, episodes (``deepresearcher.train.report``)
      summary.json           quickstart: the held-out evaluation summary and step times
      eval_after_*.jsonl     quickstart: per-task scores of each evaluation (for paired comparisons)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config, dump_config


class RunDir:
    """Paths and writers of one run directory; creating it never deletes what a previous run left."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def metrics_path(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def samples_dir(self) -> Path:
        return self.root / "samples"

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def tensorboard_dir(self) -> Path:
        return self.root / "tensorboard"

    def write_config(self, config: Config) -> None:
        (self.root / "config.yaml").write_text(dump_config(config), encoding="utf-8")

    def append_metrics(self, record: dict[str, Any]) -> None:
        """Append one step's metrics; non-finite numbers become null so every line stays valid JSON."""
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        with self.metrics_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(clean, sort_keys=True) + "\n")

    def truncate_metrics_after(self, step: int) -> None:
        """Drop metric lines past ``step``: a resumed run rewrites the steps after its checkpoint."""
        if not self.metrics_path.exists():
            return
        kept = [r for r in read_metrics(self.metrics_path) if r.get("step", 0) <= step]
        self.metrics_path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept), encoding="utf-8")

    def write_json(self, name: str, value: Any) -> Path:
        path = self.root / name
        path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    def write_jsonl(self, name: str, rows: Iterable[dict[str, Any]]) -> Path:
        path = self.root / name
        path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
        return path

    def write_samples(self, step: int, trajectories: Iterable[Trajectory]) -> Path:
        self.samples_dir.mkdir(exist_ok=True)
        path = self.samples_dir / f"step_{step:05d}.jsonl"
        with path.open("wb") as fh:
            for trajectory in trajectories:
                fh.write(trajectory.to_json_line())
        return path

    def latest_checkpoint(self) -> Path | None:
        """The checkpoint with the highest step number, or None."""
        found = sorted(self.checkpoints_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
        return found[-1] if found else None


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every metrics line of a run, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
