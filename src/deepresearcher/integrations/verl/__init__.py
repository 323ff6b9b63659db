"""deepresearcher on verl: the same agent, environment and reward, trained by verl over Ray.

    deepresearcher train --engine verl         verl's trainer (driver, FSDP actor, vLLM/SGLang servers)
        │ writes runs/<name>/verl/                        │
        │   train.parquet, val.parquet                    │ each AgentLoopWorker process (Ray actor)
        │   deepresearcher.yaml  (our resolved config) ───┼─► DeepResearcherAgentLoop  ("deepresearcher")
        │   agent_loop.yaml      (registers the loop)     │     RolloutEngine (agent/loop.py)
        │   verl.yaml            (verl's whole config)    │       ├─ ServerManagerGenerator → verl's LLM servers
        └─ ray.init → verl.trainer.main_ppo.run_ppo       │       └─ ToolBox → make_environment(config)
                                                          │     reward = our scorer; mask = our loss mask

Modules: ``generator`` (verl's server manager as our ``Generator``), ``agent_loop`` (the loop verl runs),
``plan`` (our config → verl's config, validated by verl), ``launch`` (Ray up, verl's trainer, Ray down).
Only ``plan`` may be imported without verl installed (its ``dry_run`` checks need verl and say so).
"""

from __future__ import annotations

from deepresearcher.errors import MissingDependencyError

INSTALL_HINT = 'pip install "deepresearcher[verl]" (then the verl extra of your GPU stack, see docs/verl.md)'


def require_verl() -> None:
    """Raise a clear error naming the install command when verl is not importable."""
    try:
        import verl  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(f"Training with --engine verl needs verl: {INSTALL_HINT} ({exc}).") from None


__all__ = ["INSTALL_HINT", "require_verl"]
