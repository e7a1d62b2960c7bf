#!/usr/bin/env bash
# Install nemo-gym 0.7.0 (for the interop tier: tests marked `gym`) into a Python 3.13 venv cached by
# version, and print the venv's path. nemo-gym 0.7.0 declares Python >= 3.13.14; 3.13.0 runs its
# profiler fine, hence --ignore-requires-python. About 80 s and 1.4 GB on a fresh machine.
# Use: export NGRP_GYM_VENV=$(.ci/install_gym.sh)
set -euo pipefail
GYM_VERSION=0.7.0
CACHE_ROOT=${NGRP_CACHE_DIR:-$HOME/.cache/ngrp}
VENV="$CACHE_ROOT/nemo-gym-$GYM_VERSION-py3.13"
PY=${NGRP_GYM_PYTHON:-${PYENV_ROOT:-$HOME/.pyenv}/versions/3.13.0/bin/python3.13}
if [ ! -x "$PY" ]; then
  PY=$(command -v python3.13 || true)
fi
if [ -z "$PY" ] || [ ! -x "$PY" ]; then
  echo "install_gym.sh: Python 3.13 not found (set NGRP_GYM_PYTHON); the gym tier will be skipped" >&2
  exit 1
fi
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.gym-install.lock"
flock 9
if [ ! -f "$VENV/.complete" ]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --ignore-requires-python "nemo-gym==$GYM_VERSION" >&2
  "$VENV/bin/python" -c "import nemo_gym.reward_profile" >&2
  test -x "$VENV/bin/gym"
  touch "$VENV/.complete"
fi
echo "$VENV"
