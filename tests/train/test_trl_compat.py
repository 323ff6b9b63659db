"""The check that TRL still has what our GRPO trainer overrides: it passes on the installed TRL, and a TRL
that renamed one method, dropped a parameter or an attribute fails at import, naming the supported versions."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import trl

from deepresearcher.errors import MissingDependencyError
from deepresearcher.train import trl_compat
from deepresearcher.train.trl_compat import SUPPORTED_TRL, TESTED_TRL, check_grpo_trainer, missing_names

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_trl_has_everything_we_override() -> None:
    assert missing_names(trl.GRPOTrainer) == []


def _renamed_trainer() -> type:
    """GRPOTrainer as a release might ship it: `_prepare_inputs` renamed, `compute_aux_loss` dropped."""
    base = trl.GRPOTrainer

    def get_logps(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False):
        return base._get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep)

    class RenamedGRPOTrainer(base):
        _prepare_inputs = property(lambda self: None)  # shadowed: not a method any more
        _get_per_token_logps_and_entropies = get_logps

    return RenamedGRPOTrainer


def test_a_renamed_method_or_parameter_fails_with_the_supported_versions() -> None:
    with pytest.raises(MissingDependencyError) as caught:
        check_grpo_trainer(_renamed_trainer())
    message = str(caught.value)
    assert "method _prepare_inputs" in message and "parameter 'compute_aux_loss'" in message
    assert f"trl{SUPPORTED_TRL}" in message and f"trl=={TESTED_TRL}" in message


def test_a_missing_attribute_is_caught_from_the_source() -> None:
    class NoBuffer:  # every method, but its source never sets the attributes our subclass reads
        _prepare_inputs = _compute_loss = _generate_and_score_completions = trl.GRPOTrainer._prepare_inputs
        _get_per_token_logps_and_entropies = trl.GRPOTrainer._get_per_token_logps_and_entropies

    assert {f"attribute {a}" for a in trl_compat.READ_ATTRIBUTES} <= set(missing_names(NoBuffer))


def test_importing_the_trainer_against_a_renamed_trl_fails(monkeypatch) -> None:
    from deepresearcher.train import trl_trainer

    monkeypatch.setattr(trl, "GRPOTrainer", _renamed_trainer())
    with pytest.raises(MissingDependencyError, match="Supported: trl"):
        importlib.reload(trl_trainer)
    monkeypatch.undo()
    importlib.reload(trl_trainer)  # the real class again, for the other tests


def test_the_supported_range_is_the_one_pyproject_and_the_lock_name() -> None:
    assert f'"trl{SUPPORTED_TRL}"' in (ROOT / "pyproject.toml").read_text()
    assert f"trl=={TESTED_TRL}" in (ROOT / "constraints.txt").read_text().splitlines()
