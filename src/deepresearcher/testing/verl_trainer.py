"""verl's v1 trainer on a CPU: the path ``launch.run`` takes, with stand-ins only for what needs a GPU.

``launch.run`` → verl's ``run_ppo`` → ``TaskRunnerV1`` (a Ray actor) → TransferQueue, the trainer,
``AgentLoopManagerTQ`` → ``AgentLoopWorkerTQ`` (Ray actors) → our agent loop → TransferQueue → verl's replay
buffer → batch balancing → GRPO advantages → actor update → verl's metrics and its file logger. All of that
is verl's own code and runs as it does on a GPU node, and so do verl's dataset and dataloader (on the
parquet our planner wrote), its reward-loop workers and its tokenizer loading. Three things stand in:

- **the rollout servers** (vLLM/SGLang need a GPU): :class:`ScriptServer`, one Ray actor that answers each
  episode (one request id) with the next scripted variant of its question (``EpisodeScriptServer``), and
  returns what verl's client returns (``TokenOutput``, ``extra_fields`` with the weights version); the
  agent-loop workers reach it through :class:`ScriptClient`, as they reach verl's servers through its client;
- **the weight sync** (``CheckpointEngineManager``: NCCL into the servers): :class:`WeightVersionSync` tells
  the server actor the new weights version, as verl's sync does after loading the weights;
- **the FSDP actor and reference workers**: :class:`PolicyWorkersStandIn` reads the batch from TransferQueue
  as verl's workers do and writes back log-probs (the sampling log-probs: the policy that sampled, as on
  an on-policy step) and zero entropy; ``update_actor`` records the batch it was handed (ids, masks,
  rewards, advantages, log-probs) to ``record`` and reports the clipped policy loss at ratio 1.

:func:`standin_overrides` gives the verl overrides that select it: the trainer mode ``deepresearcher-cpu``
(:class:`CPUTrainer`, verl's sync trainer with the three stand-ins) and a Ray worker setup hook
(:mod:`deepresearcher.testing.verl_hook`) that imports this module where verl's v1 trainers are imported,
so the mode is registered inside verl's ``TaskRunnerV1``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import ray
import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.trainer.ppo.v1 import PPOTrainerSync, register_trainer

from deepresearcher.generate.scripted import ScriptedGenerator
from deepresearcher.testing.verl_server import ScriptedTokenServer

MODE = "deepresearcher-cpu"
SPEC_ENV = "DEEPRESEARCHER_VERL_STANDIN"


def standin_overrides(spec: Path) -> list[str]:
    """verl overrides (for ``train.verl.overrides``) that run ``launch.run`` with this module's stand-ins;
    ``spec``: a JSON file written by :func:`write_spec`."""
    env = "+ray_kwargs.ray_init.runtime_env"
    return [
        f"trainer.v1.trainer_mode={MODE}",
        f"{env}.worker_process_setup_hook=deepresearcher.testing.verl_hook.install",
        f"{env}.env_vars.{SPEC_ENV}={spec}",
        "+ray_kwargs.ray_init.num_cpus=8",  # logical slots for the actors; the machine may have fewer cores
        "+ray_kwargs.ray_init.include_dashboard=false",
    ]


def write_spec(path: Path, *, scripts: dict[str, list[list[str]]], record: Path) -> Path:
    """The stand-ins' instructions: per question, the replies of each episode variant; where to record."""
    path.write_text(json.dumps({"scripts": scripts, "record": str(record)}), encoding="utf-8")
    return path


def _spec() -> dict[str, Any]:
    return json.loads(Path(os.environ[SPEC_ENV]).read_text(encoding="utf-8"))


class EpisodeScriptServer:
    """Scripted replies per episode: the first request of a new request id starts the next variant of the
    question found in its prompt; each later request of that id is the episode's next turn."""

    def __init__(self, tokenizer: Any, scripts: dict[str, list[list[str]]], *, prompt_length: int,
                 response_length: int) -> None:
        self.tokenizer = tokenizer
        self.scripts = scripts
        self.prompt_length, self.response_length = prompt_length, response_length
        self.global_steps = 0
        self.episodes: dict[str, ScriptedTokenServer] = {}
        self.started: dict[str, int] = {}

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        if request_id not in self.episodes:
            text = self.tokenizer.decode(prompt_ids)
            question = next((q for q in self.scripts if q in text), None)
            if question is None:
                raise AssertionError(f"No script for the prompt of request {request_id}: {text[-200:]!r}")
            variant = self.started.get(question, 0)
            self.started[question] = variant + 1
            replies = self.scripts[question][variant % len(self.scripts[question])]
            self.episodes[request_id] = ScriptedTokenServer(
                ScriptedGenerator(self.tokenizer, replies), prompt_length=self.prompt_length,
                response_length=self.response_length)
        server = self.episodes[request_id]
        server.set_global_steps(self.global_steps)
        return await server.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kwargs)


@ray.remote(num_cpus=0)
class ScriptServer:
    """The rollout servers' stand-in: one Ray actor, as verl's servers are actors the client calls."""

    def __init__(self, model_path: str, prompt_length: int, response_length: int) -> None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.server = EpisodeScriptServer(tokenizer, _spec()["scripts"], prompt_length=prompt_length,
                                          response_length=response_length)

    def set_global_steps(self, global_steps: int) -> None:
        self.server.set_global_steps(global_steps)

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        return await self.server.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)

    def requests(self) -> list[dict[str, Any]]:
        return [r for s in self.server.episodes.values() for r in s.requests]


class ScriptClient:
    """What the agent-loop workers hold in place of verl's ``LLMServerClient`` (picklable; calls the actor)."""

    def __init__(self, server: Any) -> None:
        self.server = server

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        return await self.server.generate.remote(request_id, list(prompt_ids), dict(sampling_params))


class ServerManagerStandIn:
    """verl's ``LLMServerManager`` as the trainer uses it: ``get_client``."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def get_client(self, *args: Any, **kwargs: Any) -> ScriptClient:
        return ScriptClient(self.server)

    def get_replicas(self) -> list[Any]:
        return []


class WeightVersionSync:
    """verl's ``CheckpointEngineManager`` as the sync trainer uses it: after each update the servers serve
    the new weights, tagged with the step (the weights themselves stay on the stand-in actor workers)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.versions: list[int] = []

    def update_weights(self, global_steps: int | None = None) -> None:
        if global_steps is not None:
            self.versions.append(global_steps)
            ray.get(self.server.set_global_steps.remote(global_steps))

    def sleep_replicas(self) -> None:
        """Colocated servers free their memory for training; nothing to free here."""


def _get(batch: Any, fields: list[str]) -> tuple[TensorDict, list[str]]:
    """``fields`` of a TransferQueue batch and the names among them it holds: episodes whose trained tokens were
    re-rendered, not sampled (``agent.protocol: deepresearcher``), carry no ``rollout_log_probs``."""
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
    return data, [f for f in fields if f in data.keys()]


def _rows(data: TensorDict, key: str) -> list[Any]:
    """One field of a TransferQueue batch as a list of per-sample Python values."""
    value = data[key]
    if isinstance(value, torch.Tensor):
        return [row.tolist() for row in (value.unbind() if value.is_nested else value)]
    return list(value.tolist() if hasattr(value, "tolist") else value)


class PolicyWorkersStandIn:
    """verl's actor/reference worker group (FSDP on GPUs) as the trainer calls it, on TransferQueue data."""

    def __init__(self, record: Path) -> None:
        self.record = record
        self._dispatch_info: dict[str, list[int]] = {}
        self.saved: list[int] = []

    def _query_dispatch_info(self, role: str) -> list[int]:
        return [0]  # one data-parallel rank

    def compute_log_prob(self, batch: Any) -> Any:
        """Per sample, log-probs over prompt + response positions (verl's layout: position t scores token t+1),
        the response's being the sampling log-probs (zeros where the episodes carry none: the stand-in has no
        model to recompute them); entropy zero."""
        data, read = _get(batch, ["input_ids", "responses", "rollout_log_probs"])
        responses = _rows(data, "responses")
        sampled_rows = _rows(data, "rollout_log_probs") if "rollout_log_probs" in read else [[0.0] * len(r) for r in responses]
        log_probs, entropy = [], []
        for ids, response, sampled in zip(_rows(data, "input_ids"), responses, sampled_rows, strict=True):
            values = torch.zeros(len(ids), dtype=torch.float32)
            values[len(ids) - len(response) - 1: len(ids) - 1] = torch.tensor(sampled, dtype=torch.float32)
            log_probs.append(values)
            entropy.append(torch.zeros(len(ids), dtype=torch.float32))
        fields = TensorDict({"log_probs": torch.nested.as_nested_tensor(log_probs, layout=torch.jagged),
                             "entropy": torch.nested.as_nested_tensor(entropy, layout=torch.jagged)},
                            batch_size=len(log_probs))
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=fields)
        return batch

    compute_ref_log_prob = compute_log_prob

    def update_actor(self, batch: Any) -> dict[str, Any]:
        """Record the update's batch; the loss at ratio 1 is the mean of -advantage over trained tokens."""
        fields = ["prompts", "responses", "response_mask", "rm_scores", "advantages", "old_log_probs",
                  "ref_log_prob", "rollout_log_probs", "uid"]
        data, fields = _get(batch, fields)
        samples = [dict(zip(fields, values, strict=True)) for values in zip(*(_rows(data, f) for f in fields), strict=True)]
        trained = [(a, m) for s in samples for a, m in zip(s["advantages"], s["response_mask"], strict=True) if m]
        pg_loss = -sum(a for a, _ in trained) / max(1, len(trained))
        with self.record.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"extra_info": {k: v for k, v in batch.extra_info.items() if k != "dataloader_kwargs"},
                                  "samples": samples}) + "\n")
        return {"metrics": {"mfu": 0.0, "pg_loss": pg_loss, "grad_norm": 0.0}}

    def save_checkpoint(self, local_path: str, hdfs_path: str | None = None, global_step: int = 0,
                        max_ckpt_to_keep: int | None = None) -> None:
        self.saved.append(global_step)


@register_trainer(MODE)
class CPUTrainer(PPOTrainerSync):
    """verl's sync trainer with the GPU parts stood in (see the module docstring); the rest is verl's."""

    def _setup(self) -> None:
        self._init_tokenizer()
        self._init_dataloader()
        self._init_dump_executor()
        self._init_resource_pool_mgr()  # the role mapping and GPU count; the GPU pools themselves are never made
        from verl.experimental.reward_loop import RewardLoopManager

        self.ref_in_actor = False
        self.actor_rollout_wg = self.ref_policy_wg = PolicyWorkersStandIn(Path(_spec()["record"]))
        self.reward_loop_manager = RewardLoopManager(config=self.config, rm_resource_pool=None)
        self.teacher_model_manager = self.distillation_config = None
        rollout = self.config.actor_rollout_ref.rollout
        server = ScriptServer.remote(self.config.actor_rollout_ref.model.path, rollout.prompt_length,
                                     rollout.response_length)
        self.llm_server_manager = ServerManagerStandIn(server)
        self.checkpoint_manager = WeightVersionSync(server)
        self.checkpoint_manager.sleep_replicas()
        self._load_checkpoint()
