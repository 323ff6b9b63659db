"""verl's asynchronous recipes on a CPU, with stand-ins only for what needs a GPU.

fully_async_policy: ``launch.run`` → ``fully_async_main.main`` → ``FullyAsyncTaskRunner`` →
``FullyAsyncRollouter`` + ``MessageQueue`` + ``FullyAsyncTrainer``. Real, and run as on a GPU node: verl's
entry point and task runner, its rollouter (dataset, dataloader, streaming feed, staleness accounting and
pausing, ``FullyAsyncAgentLoopManager`` and its ``AgentLoopWorker`` Ray actors running our agent loop),
its ``MessageQueue`` actor, its trainer (sample collection, batch assembly, reward extraction, bypass-mode
old log-probs, GRPO advantages, the local trigger step, weight-version bookkeeping, metrics, checkpoint of
the dataloader), its reward-loop workers, verl's ``FullyAsyncLLMServerClient`` (the partial-rollout resume
rule) and its ``GlobalRequestLoadBalancer`` actor.

one_step_off_policy: ``launch.run`` → ``one_step_off_policy.main_ppo.main`` → ``OneStepTaskRunner`` →
``OneStepOffRayTrainer.fit`` (generation of the next batch overlapping the training step, the weight sync
between them), verl's ``AgentLoopManager``/``AgentLoopWorker`` with our loop, verl's base
``LLMServerClient`` and load balancer, its reward-loop workers, advantage estimator and logger.

Standing in, in the classes verl's entry points build (:class:`CPUFullyAsyncRollouter`,
:class:`CPUFullyAsyncTrainer`, :class:`CPUOneStepOffTrainer`: verl's classes with these methods replaced):

- **the rollout servers** (vLLM on the rollout GPUs): one Ray actor, :class:`RolloutServerActor`, around
  ``WeightSyncTokenServer`` (scripted episodes, streamed token by token, aborted and resumed around a weight
  sync as vLLM is), behind verl's real load balancer and client, built where verl would build
  ``LLMServerManager``'s GPU replicas;
- **the NCCL weight sync** (``CheckpointEngineManager``): :class:`WeightSyncStandIn` does what its
  ``update_weights`` does to the servers, abort every request in flight, load the new weights version
  (here: tag the server with it), resume generation; the weights themselves stay with the stand-in workers;
- **the FSDP actor and reference workers** (trainer GPUs): :class:`PolicyWorkersStandIn` answers verl's
  TensorDict calls (reference log-probs: zeros; ``update_actor``: records the batch it was handed to
  ``record`` and reports the policy loss at ratio 1; ``save_checkpoint``: nothing to save).

:func:`standin_overrides` gives the verl overrides that select them: a Ray worker setup hook
(:mod:`deepresearcher.testing.verl_hook`) that, in the process that imports verl's entry-point module,
replaces the class names it instantiates with these subclasses, and the logical CPU slots its actors ask for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import ray
import torch
from verl.experimental.fully_async_policy import fully_async_main
from verl.experimental.fully_async_policy.fully_async_rollouter import FullyAsyncAgentLoopManager, FullyAsyncRollouter
from verl.experimental.fully_async_policy.fully_async_trainer import FullyAsyncTrainer
from verl.experimental.one_step_off_policy import main_ppo as one_step_off_main
from verl.experimental.one_step_off_policy.ray_trainer import OneStepOffRayTrainer
from verl.utils.ray_utils import auto_await
from verl.utils import tensordict_utils as tu

from deepresearcher.testing.verl_server import WeightSyncTokenServer

SPEC_ENV = "DEEPRESEARCHER_VERL_ASYNC_STANDIN"


def standin_overrides(spec: Path) -> list[str]:
    """verl overrides (for ``train.verl.overrides``) that run ``launch.run`` in an asynchronous mode with
    these stand-ins; ``spec``: a JSON file written by :func:`write_spec`."""
    env = "+ray_kwargs.ray_init.runtime_env"
    return [
        f"{env}.worker_process_setup_hook=deepresearcher.testing.verl_hook.install",
        f"{env}.env_vars.{SPEC_ENV}={spec}",
        "+ray_kwargs.ray_init.num_cpus=32",  # verl's task runners, rollouter and trainer ask for 10 logical CPUs each
        "+ray_kwargs.ray_init.include_dashboard=false",
    ]


def write_spec(path: Path, *, scripts: dict[str, list[list[str]]], record: Path,
               hold: tuple[str, int, int] | None = None) -> Path:
    """The stand-ins' instructions: per question the replies of each episode variant; where to record; and
    optionally the turn to hold until the next weight sync (question, turn, tokens before it)."""
    path.write_text(json.dumps({"scripts": scripts, "record": str(record), "hold": hold}), encoding="utf-8")
    return path


def _spec() -> dict[str, Any]:
    return json.loads(Path(os.environ[SPEC_ENV]).read_text(encoding="utf-8"))


@ray.remote(num_cpus=0)
class RolloutServerActor:
    """The rollout servers' stand-in: one Ray actor, as each of verl's vLLM servers is, called by verl's client."""

    def __init__(self, model_path: str) -> None:
        from transformers import AutoTokenizer

        spec = _spec()
        self.server = WeightSyncTokenServer(AutoTokenizer.from_pretrained(model_path), spec["scripts"])
        if spec["hold"]:
            question, turn, after = spec["hold"]
            self.server.hold(question, turn, after)

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        output = await self.server.generate(request_id, prompt_ids, sampling_params, **kwargs)
        self._write_log()
        return output

    async def abort_all_requests(self, **kwargs: Any) -> dict[str, Any]:
        return await self.server.abort_all_requests(**kwargs)

    async def resume_generation(self) -> None:
        await self.server.resume_generation()

    def set_global_steps(self, global_steps: int) -> None:
        self.server.set_global_steps(global_steps)

    def _write_log(self) -> None:
        """What it served so far, to ``<record>.server.json`` (the actor ends with the run): each request's
        question, prompt length, weights version and token limit, in order; the questions of aborted turns."""
        requests = [{k: v for k, v in r.items() if k != "prompt_ids"} | {"prompt_len": len(r["prompt_ids"])}
                    for r in self.server.requests]
        log = Path(_spec()["record"]).with_suffix(".server.json")
        log.write_text(json.dumps({"requests": requests, "aborted": self.server.aborted}), encoding="utf-8")


class ReplicaStandIn:
    """What verl's trainer and rollouter use of a ``RolloutReplica``: abort and resume its requests."""

    def __init__(self, server: Any) -> None:
        self.server = server

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        return await self.server.abort_all_requests.remote(reject_request=reject_request)

    async def resume_generation(self) -> None:
        await self.server.resume_generation.remote()


class ServerManagerStandIn:
    """verl's ``LLMServerManager`` (``FullyAsyncLLMServerManager`` in fully_async) as its trainers use it: one
    replica behind verl's own load balancer; ``get_client`` gives verl's own client class, the default one
    of the manager it stands for."""

    def __init__(self, config: Any, server: Any, default_client: type) -> None:
        from verl.workers.rollout.router import GlobalRequestLoadBalancer

        self.config, self.default_client = config, default_client
        self.replicas = [ReplicaStandIn(server)]
        self.balancer = ray.remote(num_cpus=0)(GlobalRequestLoadBalancer).remote(servers={"replica-0": server})

    def get_client(self, client_cls: Any = None, **kwargs: Any) -> Any:
        return (client_cls or self.default_client)(config=self.config, load_balancer_handle=self.balancer)

    def get_replicas(self) -> list[ReplicaStandIn]:
        return self.replicas

    def get_active_server_count(self) -> int:
        return len(self.replicas)


class CPUFullyAsyncRollouter(FullyAsyncRollouter.__ray_actor_class__):
    """verl's rollouter with the rollout servers stood in (see the module docstring)."""

    async def _init_async_rollout_manager(self) -> None:
        from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient

        enable_agent_reward_loop = not self.use_rm or self.config.reward.reward_model.enable_resource_pool
        server = RolloutServerActor.remote(self.config.actor_rollout_ref.model.path)
        self.async_rollout_mode = True
        self.llm_server_manager = ServerManagerStandIn(self.config, server, FullyAsyncLLMServerClient)
        self.async_rollout_manager = await FullyAsyncAgentLoopManager.create(
            config=self.config,
            llm_client=self.llm_server_manager.get_client(),
            reward_loop_worker_handles=self.reward_loop_manager.reward_loop_workers if enable_agent_reward_loop else None,
            teacher_client=None,
        )


class WeightSyncStandIn:
    """``CheckpointEngineManager.update_weights`` as it acts on the servers: abort all requests in flight,
    load the new weights version, resume generation."""

    def __init__(self, replicas: list[ReplicaStandIn]) -> None:
        self.replicas = replicas
        self.versions: list[int] = []

    @auto_await  # as verl's: one_step_off calls it from synchronous code, fully_async awaits it
    async def update_weights(self, global_steps: int | None = None) -> dict[str, Any]:
        for replica in self.replicas:
            await replica.abort_all_requests()
        for replica in self.replicas:
            await replica.server.set_global_steps.remote(global_steps)
        for replica in self.replicas:
            await replica.resume_generation()
        self.versions.append(global_steps)
        return {}


def _rows(value: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):
        return [row.tolist() for row in (value.unbind() if value.is_nested else value)]
    return list(value.tolist() if hasattr(value, "tolist") else value)


class PolicyWorkersStandIn:
    """verl's actor/reference worker group (FSDP on the trainer GPUs) as the fully-async trainer calls it."""

    world_size = 1
    RECORDED = ["responses", "response_mask", "token_level_rewards", "advantages", "old_log_probs",
                "rollout_log_probs", "uid", "min_global_steps", "max_global_steps", "termination", "dropped"]

    def __init__(self, record: Path) -> None:
        self.record = record
        self._dispatch_info: dict[str, list[int]] = {}

    def _query_dispatch_info(self, role: str) -> list[int]:
        return [0]  # one data-parallel rank

    def compute_ref_log_prob(self, batch: Any) -> Any:
        """Zeros at every position of every sequence (the stand-in has no model)."""
        ids = batch["input_ids"]
        zeros = torch.nested.nested_tensor_from_jagged(torch.zeros(ids.values().shape), offsets=ids.offsets())
        return tu.get_tensordict({"log_probs": zeros})

    def update_actor(self, batch: Any) -> Any:
        """Record the update's batch; the loss at ratio 1 is the mean of -advantage over trained tokens."""
        samples = [dict(zip([k for k in self.RECORDED if k in batch.keys()], values, strict=True))
                   for values in zip(*(_rows(tu.get(batch, k)) for k in self.RECORDED if k in batch.keys()), strict=True)]
        trained = [a for s in samples for a, m in zip(s["advantages"], s["response_mask"], strict=True) if m]
        with self.record.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"samples": samples}) + "\n")
        from tensordict import TensorDict

        output = TensorDict({}, batch_size=[])
        tu.assign_non_tensor(output, metrics={"mfu": 0.0, "pg_loss": -sum(trained) / max(1, len(trained))})
        return output

    def save_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        """FSDP shards of the actor: nothing to save here (verl's rollouter still saves its dataloader)."""


class CPUFullyAsyncTrainer(FullyAsyncTrainer.__ray_actor_class__):
    """verl's fully-async trainer with the GPU workers and the weight sync stood in (see the module docstring)."""

    async def init_workers(self) -> None:
        self.actor_wg = self.actor_rollout_wg = self.ref_policy_wg = PolicyWorkersStandIn(Path(_spec()["record"]))

    async def _setup_checkpoint_manager(self) -> None:
        self.checkpoint_manager = WeightSyncStandIn(await self.rollouter.get_replicas.remote())


class CPUOneStepOffTrainer(OneStepOffRayTrainer):
    """verl's one-step-off trainer with the GPU workers, rollout servers and weight sync stood in; its
    reward loop, agent-loop manager and workers are verl's, built as its ``init_workers`` builds them."""

    def init_workers(self) -> None:
        from verl.experimental.agent_loop import AgentLoopManager
        from verl.workers.rollout.llm_server import LLMServerClient

        self.actor_wg = self.actor_rollout_wg = self.ref_policy_wg = PolicyWorkersStandIn(Path(_spec()["record"]))
        self._init_reward_loop()
        server = RolloutServerActor.remote(self.config.actor_rollout_ref.model.path)
        self.llm_server_manager = ServerManagerStandIn(self.config, server, LLMServerClient)
        self.async_rollout_mode = True
        self.async_rollout_manager = AgentLoopManager.create(
            config=self.config, llm_client=self.llm_server_manager.get_client(),
            reward_loop_worker_handles=self.reward_loop_manager.reward_loop_workers)
        self.checkpoint_manager = WeightSyncStandIn(self.llm_server_manager.get_replicas())


def install() -> None:
    """Make verl's entry points build these classes (the fully-async ones as Ray actors with verl's
    resource requests)."""
    fully_async_main.FullyAsyncRollouter = ray.remote(num_cpus=10, max_concurrency=100)(CPUFullyAsyncRollouter)
    fully_async_main.FullyAsyncTrainer = ray.remote(num_cpus=10)(CPUFullyAsyncTrainer)
    one_step_off_main.OneStepOffRayTrainer = CPUOneStepOffTrainer


install()
