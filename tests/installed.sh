#!/usr/bin/env bash
# The installed-copy tier: what users install is what is tested (issue 34).
#   1. builds the sdist and the wheel from it (`python -m build`), from a clean copy of the tracked files;
#   2. installs the wheel into fresh venvs, never editable, never with PYTHONPATH:
#        user/  the wheel with the install the docs give (README, SKILL.md: `[report]`);
#        test/  the wheel with `[dev,report]`, for pytest;
#   3. from a folder outside the tree runs, against the installed `ngrp` executables:
#        - tests/test_every_command.py with user/bin/ngrp: every command's and subcommand's --help, and a
#          run of every command on small real data;
#        - the real-vLLM slice (collect: plain, grouped, adaptive, kill -9 and resume; merge, reverify,
#          profile, view) with test/bin/ngrp, its ngrp_lib imported from test/'s site-packages.
# Every CLI call of those tests goes through NGRP_TEST_NGRP (tests/cli_helpers.py: ENTRY), and
# tests/conftest.py refuses to run when ngrp_lib would come from the tree.
#
#   bash tests/installed.sh                 # in a temporary folder, removed at the end
#   NGRP_INSTALLED_DIR=DIR bash tests/installed.sh   # keep the venvs in DIR (.ci/run: the demo uses user/)
#
# Needs: .venv with the dev extra (tests/run.sh makes it: `build` comes from there), git, and the vLLM
# CPU venv (.ci/install_vllm.sh, cached). Exits 1 when anything fails.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T0=$EPOCHREALTIME
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
step() { printf '== installed tier: %s (at %ss)\n' "$1" "$(since "$T0")"; }

if [ -n "${NGRP_INSTALLED_DIR:-}" ]; then
  WORK=$NGRP_INSTALLED_DIR
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
WORK=$(cd "$WORK" && pwd)
case "$WORK/" in "$REPO"/*) echo "NGRP_INSTALLED_DIR must be outside the tree" >&2; exit 2 ;; esac
unset PYTHONPATH
PY=${NGRP_INSTALLED_PYTHON:-$(command -v python3.11 || command -v python3)}

step "sdist and wheel from a clean copy of the tracked files"
rm -rf "$WORK/src" "$WORK/dist"
mkdir -p "$WORK/src"
git -C "$REPO" ls-files -z | (cd "$REPO" && tar --null -T - -cf -) | tar -xf - -C "$WORK/src"
"$REPO/.venv/bin/python" -m build --outdir "$WORK/dist" "$WORK/src" >"$WORK/build.log" 2>&1 \
  || { tail -n 30 "$WORK/build.log"; exit 1; }
WHEEL=$(ls "$WORK"/dist/*.whl)
ls "$WORK"/dist

install_venv() {  # install_venv NAME EXTRAS: a fresh venv with the wheel and those extras
  rm -rf "${WORK:?}/$1"
  "$PY" -m venv "$WORK/$1"
  "$WORK/$1/bin/pip" install -q "$WHEEL[$2]" >"$WORK/$1.log" 2>&1 || { tail -n 30 "$WORK/$1.log"; exit 1; }
}
step "fresh venvs: user/ (the wheel[report], as the docs install it) and test/ (the wheel[dev,report])"
install_venv user report
install_venv test dev,report

RUN=$WORK/run
mkdir -p "$RUN"
cd "$RUN"
for venv in user test; do  # the package each venv imports is its own site-packages' copy
  where=$("$WORK/$venv/bin/python" -c "import ngrp_lib; print(ngrp_lib.__file__)")
  case "$where" in "$WORK/$venv/"*) echo "$venv: ngrp_lib from $where" ;;
    *) echo "$venv: ngrp_lib comes from $where, not the venv" >&2; exit 1 ;; esac
done
"$WORK/user/bin/ngrp" --version

NGRP_VLLM_VENV=${NGRP_VLLM_VENV:-$(bash "$REPO/.ci/install_vllm.sh")}
export NGRP_VLLM_VENV
# NeMo Gym 0.7.0 (cached) for the slice's Gym comparisons; as in tests/run.sh, they skip with a reason
# only when it cannot be installed.
if [ -z "${NGRP_GYM_VENV:-}" ]; then
  NGRP_GYM_VENV=$(bash "$REPO/.ci/install_gym.sh") || NGRP_GYM_VENV=
fi
[ -n "$NGRP_GYM_VENV" ] && export NGRP_GYM_VENV || unset NGRP_GYM_VENV

# pytest reads the tree's tests and settings; the code under test is the install's.
PYTEST=("$WORK/test/bin/python" -m pytest --rootdir "$REPO" -c "$REPO/pyproject.toml")
run_pytest() {
  set +e
  "$@"
  local rc=$?
  set -e
  if [ "$rc" -ne 0 ]; then echo "FAILED: installed tier: $* (pytest exit $rc)"; exit 1; fi
}

step "every command's --help and a run of each, with user/bin/ngrp"
run_pytest env NGRP_TEST_NGRP="$WORK/user/bin/ngrp" "${PYTEST[@]}" -q -n 2 "$REPO/tests/test_every_command.py"

step "the real-vLLM slice (collect, grouped, adaptive, kill and resume; merge, reverify, profile, view)"
SLICE=(
  test_collect_vllm.py test_collect_grouped_vllm.py test_collect_adaptive_vllm.py test_reverify_vllm.py
  test_merge_shards.py test_reverify.py test_profile_cli.py test_view_api.py test_view_browser.py
)
run_pytest env NGRP_TEST_NGRP="$WORK/test/bin/ngrp" "${PYTEST[@]}" -q --durations=12 "${SLICE[@]/#/$REPO/tests/}"
step "passed"
