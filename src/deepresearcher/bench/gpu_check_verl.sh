#!/usr/bin/env bash
# GPU check of the verl engine: a short verl GRPO run (Ray started and stopped by the command) of the
# embedded SmolLM2-135M-Instruct on the synthetic web, on one GPU, in well under 15 minutes.
# Prints steps/s, tokens/s and reward per step as JSON; record the figures whenever a GPU is at hand.
#
#   bash bench/gpu_check_verl.sh                 # 3 steps of 64 rollouts (8 prompts x 8)
#   STEPS=5 PROMPTS=16 bash bench/gpu_check_verl.sh
#   MODEL=/models/Qwen2.5-0.5B-Instruct bash bench/gpu_check_verl.sh
#
# Needs: verl's GPU stack (pip install "verl[vllm]==0.9.1": vLLM and CUDA torch 2.11) and this package
# with the verl extra (pip install -e ".[verl,embedded]"); see docs/verl.md.
set -euo pipefail
STEPS="${STEPS:-3}"
PROMPTS="${PROMPTS:-8}"
GROUP="${GROUP:-8}"
MODEL="${MODEL:-smollm2-135m}"
RUN="gpu-check-verl-$(date +%s)"
RUNS_DIR="${RUNS_DIR:-runs}"
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU visible to torch')"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
start=$(date +%s.%N)
deepresearcher train --engine verl --config configs/smollm2-135m-world.yaml --model "$MODEL" \
  --set world.size=small --set train.run_name="$RUN" --set train.runs_dir="$RUNS_DIR" \
  --set train.max_steps="$STEPS" --set train.prompts_per_step="$PROMPTS" --set train.group_size="$GROUP" \
  --set train.micro_batch_size=8 --set train.verl.gpus_per_node=1 --set train.verl.tensor_parallel_size=1 \
  --set train.verl.gpu_memory_utilization=0.4 --set train.verl.agent_workers=2 --set train.verl.max_prompt_length=1024 \
  --set agent.max_turns=4 --set agent.max_tokens_per_turn=256 --set agent.context_budget=3072 \
  --set "train.verl.overrides=[trainer.save_freq=-1]"
end=$(date +%s.%N)
python - "$RUNS_DIR/$RUN/verl/metrics.jsonl" "$start" "$end" <<'PY'
import json, sys
rows = [json.loads(l)["data"] for l in open(sys.argv[1]) if l.strip()]
wall = float(sys.argv[3]) - float(sys.argv[2])
step_s = [r["timing_s/step"] for r in rows]
gen_s = [r.get("timing_s/gen", float("nan")) for r in rows]
print(json.dumps({
    "steps": len(rows),
    "steps_per_s": len(rows) / sum(step_s),
    "tokens_per_s": [round(r["perf/total_num_tokens"] / r["timing_s/step"], 1) for r in rows],
    "throughput_per_gpu": [round(r["perf/throughput"], 1) for r in rows],
    "s_per_step": [round(s, 2) for s in step_s],
    "rollout_s_per_step": [round(s, 2) for s in gen_s],
    "reward": [round(r["critic/score/mean"], 4) for r in rows],
    "response_length_mean": [round(r["response_length/mean"], 1) for r in rows],
    "wall_s_including_start": round(wall, 1),
}, indent=2))
PY
