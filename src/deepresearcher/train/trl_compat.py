"""The TRL versions our trainer supports, and a check that the installed one still has what it overrides.

``train.trl_trainer.LengthGroupedGRPOTrainer`` overrides private ``GRPOTrainer`` methods and reads private
attributes. A TRL release that renames one would silently skip our override (the run goes on, slower and
with other numbers) or break mid-run, so the names are checked when the trainer module is imported and a
missing one is an error that names the versions we support and how to install them.
"""

from __future__ import annotations

import inspect
import re
from importlib.metadata import PackageNotFoundError, version

from deepresearcher.errors import MissingDependencyError

SUPPORTED_TRL = ">=0.23,<1.17"
"""The range ``pyproject.toml`` allows (a test keeps them equal); its upper end is the newest release tested."""
TESTED_TRL = "1.16.0"
"""The version in ``constraints.txt``, the one ``scripts/setup.sh`` installs."""

OVERRIDDEN = {
    "_prepare_inputs": ("generation_batch",),
    "_compute_loss": ("model", "inputs"),
    "_get_per_token_logps_and_entropies": ("model", "input_ids", "attention_mask", "logits_to_keep", "batch_size",
                                           "compute_entropy", "compute_aux_loss"),
    "_generate_and_score_completions": (),
}
"""Methods our subclass overrides or calls, with the parameters it passes by name or position."""
READ_ATTRIBUTES = ("_step", "_buffered_inputs", "num_iterations", "temperature", "_metrics")
"""Attributes our subclass reads (``_metrics``: ``train.grpo.log_to_trainer`` adds the behaviour rates to the step's
TensorBoard logs); ``GRPOTrainer`` must set each (``self.NAME = ...``)."""


def missing_names(trainer: type) -> list[str]:
    """What ``trainer`` (TRL's ``GRPOTrainer``) lacks of ``OVERRIDDEN`` and ``READ_ATTRIBUTES``, as readable items."""
    missing = []
    for name, params in OVERRIDDEN.items():
        method = getattr(trainer, name, None)
        if not callable(method):
            missing.append(f"method {name}")
            continue
        have = inspect.signature(method).parameters
        missing += [f"parameter {p!r} of {name}" for p in params if p not in have]
    try:
        source = inspect.getsource(trainer)
    except (OSError, TypeError):  # no source to read (a frozen build): the methods above are all we can check
        return missing
    missing += [f"attribute {a}" for a in READ_ATTRIBUTES if not re.search(rf"self\.{a}\s*[:=]", source)]
    return missing


def check_grpo_trainer(trainer: type) -> None:
    """Raise ``MissingDependencyError`` unless ``trainer`` has every method and attribute our subclass relies on."""
    missing = missing_names(trainer)
    if not missing:
        return
    try:
        installed = version("trl")
    except PackageNotFoundError:
        installed = "unknown"
    raise MissingDependencyError(
        f"TRL {installed}'s GRPOTrainer no longer has what deepresearcher's trainer overrides or reads: "
        f"{', '.join(missing)}. Supported: trl{SUPPORTED_TRL} (tested: {TESTED_TRL}); install it with "
        f"`pip install 'trl=={TESTED_TRL}'`, or run scripts/setup.sh, which installs the tested versions "
        "(constraints.txt)."
    )
