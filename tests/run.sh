#!/usr/bin/env bash
# The project's test command. Prepares what the tests need, then runs the whole suite:
#   - .venv: this project with its dev and report extras, on Python 3.11;
#   - the CPU build of vLLM (cached by version under ~/.cache/ngrp) for the real-server tier;
#   - NeMo Gym 0.7.0 on Python 3.13 (cached) for the interop tier (skipped with a reason if it cannot install);
#   - then the tier without servers again on Python 3.10, the oldest supported version.
# Arguments replace the two Python 3.11 runs with one pytest run (for example: bash tests/run.sh -m "not slow").
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
# A working interpreter for version $1: pyenv's own build first (its shims fail for a non-global version).
find_python() {
  local cand
  for cand in $(ls -d "$PYENV_ROOT"/versions/"$1".*/bin/"python$1" 2>/dev/null | sort -V -r) "$(command -v "python$1")"; do
    if [ -n "$cand" ] && "$cand" --version >/dev/null 2>&1; then echo "$cand"; return 0; fi
  done
  return 1
}

PY311=$(find_python 3.11)
echo "== project venv (.venv, $("$PY311" --version))"
[ -x .venv/bin/python ] || "$PY311" -m venv .venv
.venv/bin/pip install -q -e ".[dev,report]"

echo "== lint: ruff check and ruff format --check"
.venv/bin/ruff check scripts tests benchmarks
.venv/bin/ruff format --check scripts tests benchmarks

echo "== types: mypy on scripts/ngrp_lib (settings in pyproject.toml)"
.venv/bin/mypy

echo "== vLLM CPU venv (real-server tier)"
NGRP_VLLM_VENV=$(bash .ci/install_vllm.sh)
export NGRP_VLLM_VENV
echo "$NGRP_VLLM_VENV"

echo "== NeMo Gym 0.7.0 venv (interop tier)"
if NGRP_GYM_VENV=$(bash .ci/install_gym.sh); then
  export NGRP_GYM_VENV
  echo "$NGRP_GYM_VENV"
else
  echo "NeMo Gym could not be installed (needs Python 3.13): the tests marked gym will be skipped"
fi

run_pytest() {
  set +e
  "$@"
  local rc=$?
  set -e
  # pytest exits 5 when it collected no tests: that is a failure too.
  if [ "$rc" -ne 0 ]; then echo "FAILED: $* (pytest exit $rc)"; exit 1; fi
}

SERVERS="vllm or gym or slurm"
if [ "$#" -gt 0 ]; then
  echo "== pytest $* on Python 3.11"
  run_pytest .venv/bin/python -m pytest "$@"
else
  # Tests without servers run on two workers; the server tiers share one session vLLM (and Gym stack), so
  # they run in one process.
  echo "== suite without servers on Python 3.11 (2 workers)"
  run_pytest .venv/bin/python -m pytest -q -n 2 -m "not ($SERVERS)"
  echo "== server tiers on Python 3.11: real vLLM on CPU, NeMo Gym, Slurm"
  run_pytest .venv/bin/python -m pytest -m "$SERVERS"
fi

PY310=$(find_python 3.10 || true)
if [ -n "$PY310" ]; then
  echo "== suite without servers on $("$PY310" --version)"
  [ -x .venv-py310/bin/python ] || "$PY310" -m venv .venv-py310
  .venv-py310/bin/pip install -q -e ".[dev,report]"
  run_pytest env -u NGRP_VLLM_VENV -u NGRP_GYM_VENV .venv-py310/bin/python -m pytest -q -n 2 -m "not ($SERVERS) and not slow"
else
  echo "no Python 3.10 here: skipping the second interpreter run"
fi
echo "all test runs passed"
