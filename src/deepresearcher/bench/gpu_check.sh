#!/usr/bin/env bash
# GPU check: a short GRPO run of the embedded SmolLM2-135M-Instruct on the synthetic web, on one GPU.
# Prints steps/s, rollout tokens/s and reward per step as JSON; record the figures whenever a GPU is at hand.
#
#   bash bench/gpu_check.sh            # 3 steps of 64 rollouts (4 prompts x 16)
#   STEPS=5 PROMPTS=8 bash bench/gpu_check.sh
#   VLLM=true bash bench/gpu_check.sh  # rollouts through TRL's colocated vLLM engine (pip install vllm)
#
# Needs: a CUDA build of torch and this package installed (pip install -e .[embedded]).
set -euo pipefail
STEPS="${STEPS:-3}"
PROMPTS="${PROMPTS:-4}"
RUN="gpu-check-$(date +%s)"
RUNS_DIR="${RUNS_DIR:-runs}"
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU visible to torch')"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
start=$(date +%s.%N)
deepresearcher train --config configs/smollm2-135m-world.yaml \
  --set train.run_name="$RUN" --set train.runs_dir="$RUNS_DIR" --set train.max_steps="$STEPS" \
  --set train.prompts_per_step="$PROMPTS" --set train.use_vllm="${VLLM:-false}" --set train.save_every=1000 --set train.sample_trajectories=2 \
  --set agent.max_turns=4 --set agent.max_tokens_per_turn=256
end=$(date +%s.%N)
python - "$RUNS_DIR/$RUN/metrics.jsonl" "$start" "$end" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
wall = float(sys.argv[3]) - float(sys.argv[2])
step_s = sum(r["step_seconds"] for r in rows)
print(json.dumps({
    "steps": len(rows),
    "steps_per_s": len(rows) / step_s,
    "rollout_tokens_per_s": [round((r["response_tokens"] + r["observation_tokens"]) * r["rollouts"] / r["rollout_seconds"], 1) for r in rows],
    "policy_tokens_per_s": [round(r["response_tokens"] * r["rollouts"] / r["rollout_seconds"], 1) for r in rows],
    "s_per_step": [round(r["step_seconds"], 2) for r in rows],
    "rollout_s_per_step": [round(r["rollout_seconds"], 2) for r in rows],
    "reward": [round(r["reward"], 4) for r in rows],
    "f1": [round(r["f1"], 4) for r in rows],
    "wall_s_including_load": round(wall, 1),
}, indent=2))
PY

# Asynchronous GRPO with slow tools (docs/train.md, "Asynchronous GRPO"): ASYNC=true bash bench/gpu_check.sh
# runs `bench train --slow-tools` on the GPU: the synchronous trainer (TRL's colocated vLLM) against the
# asynchronous one, whose rollout worker samples from a vLLM server that TRL's NCCL transfer loads after every
# step, each tool call waiting a lognormal delay (median 1 s, p99 15 s). Both share this one GPU (the server
# takes GPU_UTIL of its memory). Needs vllm (>= 0.28 for TRL's stateful transfer) and TRL's FA3 tree-attention
# kernel (`pip install kernels`; it is fetched from the Hub on first use, so fetch it before going offline).
if [ "${ASYNC:-false}" = "true" ]; then
  MODEL="${MODEL:-smollm2-135m}"
  MODEL_DIR=$(python -c "from deepresearcher.inference.loader import resolve_checkpoint; from deepresearcher.config import load_config; print(resolve_checkpoint('$MODEL', load_config('configs/smollm2-135m-world.yaml').resolved_cache_dir()))")
  VLLM_SERVER_DEV_MODE=1 vllm serve "$MODEL_DIR" --port 8000 --dtype float32 --gpu-memory-utilization "${GPU_UTIL:-0.35}" \
    --weight-transfer-config '{"backend":"nccl"}' > "$RUNS_DIR/vllm-server.log" 2>&1 &
  SERVER=$!
  trap 'kill $SERVER' EXIT
  deepresearcher bench train --slow-tools --model "$MODEL_DIR" --config configs/smollm2-135m-world.yaml \
    --steps "${ASYNC_STEPS:-6}" --prompts "$PROMPTS" --group 8 --micro-batch 8 --eval-every 2 --eval-tasks 100 \
    --set train.use_vllm=true --set train.async_grpo.vllm_server_url=http://localhost:8000 \
    --set agent.max_turns=4 --set agent.max_tokens_per_turn=256
fi
