#!/usr/bin/env bash
# The published DeepResearcher checkpoint, evaluated as it was trained, on one GPU: the original's protocol
# (agent.protocol=deepresearcher: its prompt, parser, re-rendered context), its reward and evaluation metrics
# (the report's deepresearcher_em / deepresearcher_f1 columns, and mbe when a judge is given), on all 125
# Bamboogle questions and the first 100 HotpotQA (distractor dev) questions against the offline eval corpus.
# One vLLM server serves both benchmarks; each eval prints its table.
# Reader: the original's reading agent (browse.reader=deepresearcher) when READER_URL and READER_MODEL name an
# OpenAI-compatible server (the paper used qwen-plus; a GPU box without internet can serve e.g. Qwen2.5-7B-Instruct
# beside the policy), else the extractive reader, and the report says which.
# Judge: JUDGE_URL and JUDGE_MODEL add the paper's MBE column (same server kinds).
# Budget: 15 minutes on one H100/H200-class GPU (model load included); rerun to resume an interrupted eval.
#
#   MODEL=/models/DeepResearcher-7b bash bench/gpu_eval_paper.sh
#   MODEL=... READER_URL=http://127.0.0.1:8012/v1 READER_MODEL=reader JUDGE_URL=... JUDGE_MODEL=... bash bench/gpu_eval_paper.sh
#   MODEL=... CONCURRENCY=128 OUT=runs/paper-eval bash bench/gpu_eval_paper.sh
#
# Needs: a CUDA machine with vLLM (pip install vllm) and this package installed; the checkpoint on disk
# (GAIR/DeepResearcher-7b; nothing is downloaded) and the shared datasets ($DEEPRESEARCHER_DATA_DIR).
set -euo pipefail
MODEL="${MODEL:?set MODEL to the GAIR/DeepResearcher-7b checkpoint directory}"
DATA="${DEEPRESEARCHER_DATA_DIR:-../shared/datasets}"
OUT="${OUT:-runs/gpu-eval-paper}"
CORPUS="${CORPUS:-corpora/eval}"
PORT="${PORT:-8011}"
CONCURRENCY="${CONCURRENCY:-64}"
reader=(--set browse.reader=extractive)
if [ -n "${READER_URL:-}" ]; then
  reader=(--set browse.reader=deepresearcher --set reader_llm.kind=openai --set "reader_llm.base_url=$READER_URL"
          --set "reader_llm.model=${READER_MODEL:?set READER_MODEL with READER_URL}" --set reader_llm.concurrency=64)
fi
judge=()
if [ -n "${JUDGE_URL:-}" ]; then
  judge=(--set "eval.judge={kind: openai, base_url: '$JUDGE_URL', model: '${JUDGE_MODEL:?set JUDGE_MODEL with JUDGE_URL}'}")
fi
BUDGET_S="${BUDGET_S:-840}"
export DEEPRESEARCHER_DATA_DIR="$DATA"
[ -d "$MODEL" ] || { echo "Error: MODEL=$MODEL is not a directory" >&2; exit 2; }
[ -d "$DATA/bamboogle" ] && [ -d "$DATA/hotpotqa" ] || { echo "Error: no datasets in $DATA" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
start=$(date +%s)
deadline=$((start + BUDGET_S))

mkdir -p "$OUT"
[ -f "$CORPUS/index/meta.json" ] || deepresearcher eval-corpus --out "$CORPUS" --data-dir "$DATA"

vllm serve "$MODEL" --port "$PORT" --served-model-name DeepResearcher-7b --max-model-len 32768 \
  --gpu-memory-utilization 0.9 > "$OUT/vllm.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null; do
  kill -0 "$server" 2>/dev/null || { echo "Error: vLLM exited; see $OUT/vllm.log" >&2; exit 1; }
  [ "$(date +%s)" -lt "$deadline" ] || { echo "Error: vLLM did not start within the budget" >&2; exit 1; }
  sleep 2
done
echo "vLLM ready after $(( $(date +%s) - start )) s"

evaluate() {  # benchmark spec, limit, output folder
  local left=$((deadline - $(date +%s)))
  [ "$left" -gt 0 ] || { echo "Error: the time budget ran out before $1; rerun to resume" >&2; exit 1; }
  timeout "$left" deepresearcher eval --policy "vllm:http://127.0.0.1:$PORT/v1" \
    --set agent.protocol=deepresearcher --set agent.tokenizer="$MODEL" --set agent.policy_model=DeepResearcher-7b \
    --set search.backend=local --set search.index="$CORPUS/index" "${reader[@]}" ${judge[@]+"${judge[@]}"} \
    --set eval.concurrency="$CONCURRENCY" --set "cache.mode='off'" -b "$1" ${2:+--limit "$2"} --out "$3"
}
evaluate bamboogle "" "$OUT/bamboogle"
evaluate hotpotqa:distractor_dev 100 "$OUT/hotpotqa"
echo "wall: $(( $(date +%s) - start )) s (model load, corpus and both evals); reports in $OUT/*/report.md"
