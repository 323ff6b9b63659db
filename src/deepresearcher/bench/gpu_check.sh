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
