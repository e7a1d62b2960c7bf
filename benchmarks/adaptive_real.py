"""The real part of adaptive_bench.py: the demo's tasks against the real vLLM CPU server, `collect --adaptive
learnable` against fixed N, side by side (rollouts, wall time, decisions).

Both runs group requests (one per task with n = the repeats still pending: a round's repeats, for the
adaptive run), so they are independent samples: a task near 0 or 1 can be mixed in one run and not the
other, and the decisions are compared task by task with that in mind. `--seed-per-repeat` makes a key's
seed the same in both runs (its draws then match as far as the server reproduces seeded sampling), at the
price of one request per rollout (vLLM's CPU engine cannot take a seed with n > 1). The runs are
interleaved (fixed, adaptive, fixed, adaptive...) to spread the machine's load over both. The model is
SmolLM2-135M-Instruct, prepared by scripts/prepare_smollm2.py as the demo does (or `--model-dir`).

`--barrier-checkout DIR` adds a third arm: the same adaptive run by another ngrp checkout, e.g. one
from before rounds were pipelined per task (`git archive <commit> scripts schemas | tar -x -C DIR`),
where each round waited for the slowest task of the round before. `--generated N` asks N seeded
arithmetic questions instead of the demo's 16 (a design where the first round alone fills the server).
Each run records the 1-minute load average before and after it: the machine may be shared.

`--equal` (default both) says what the arms hold equal, `--concurrency` S being the unit: `sequences`
runs both at S sequences in flight (collect's --concurrency counts sequences); `requests` runs each at
S requests in flight: fixed N at S x N sequences (n = N a request), adaptive at S x R (its first rounds'
n = R). Each run also gives the server's own generated and prompt tokens and its prefix-cache hit rate
(its /metrics before and after). `--schedules 2 2,1,1,2,2,4` adds one adaptive arm a round schedule
(collect's `--rounds`), at S sequences in flight.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "examples" / "tasks.jsonl"
NGRP = [sys.executable, str(REPO / "scripts" / "ngrp.py")]


def start_server(workdir: Path, model_dir: str | None) -> Any:
    from vllm_fixture import VLLMServer, vllm_python

    python = vllm_python()
    if python is None:
        sys.exit("no server: pass --base-url, or set NGRP_VLLM_VENV (from .ci/install_vllm.sh) to start one")
    if model_dir is None:
        script = REPO / "scripts" / "prepare_smollm2.py"
        found = subprocess.run([str(python), str(script), "--install-deps"], capture_output=True, text=True)
        if found.returncode != 0:
            sys.exit(f"could not prepare SmolLM2: {found.stderr[-2000:]}")
        model_dir = found.stdout.strip().splitlines()[-1]
    return VLLMServer(python, Path(model_dir), workdir / "server.log").start()


def one_run(
    folder: Path,
    base_url: str,
    model: str,
    adaptive: list[str],
    args: Any,
    ngrp: list[str] = NGRP,
    concurrency: int | None = None,
) -> dict:
    """One `collect` (by `ngrp`: this checkout's, or another's for the barrier arm), timed, at
    `concurrency` sequences in flight (default `args.concurrency`)."""
    out = folder / "rollouts.jsonl"
    repeats = args.repeats
    limit = args.concurrency if concurrency is None else concurrency
    # a request of 16 choices on a loaded CPU can take longer than collect's default --timeout of 120 s
    extra = ["--timeout", "1800", "--concurrency", str(limit), *adaptive]
    extra += ["--seed-per-repeat"] if args.seed_per_repeat else []
    args = ["collect", "--input", str(args.task_file), "--output", str(out), "--base-url", base_url,
            "--model", model, "--verifier", "math", "--num-repeats", str(repeats), *extra]  # fmt: skip
    load_before = os.getloadavg()[0]
    before = _server_counters(base_url)
    start = time.monotonic()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # never write into another checkout
    proc = subprocess.run([*ngrp, *args], capture_output=True, text=True, env=env)
    wall = time.monotonic() - start
    server = _delta(before, _server_counters(base_url))
    if proc.returncode != 0:
        sys.exit(f"collect failed ({proc.returncode}): {proc.stderr[-2000:]}")
    per_task: dict[int, list[bool]] = {}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        per_task.setdefault(row["_ng_task_index"], []).append(row["reward"] >= 1.0)
    decisions = {t: _decision(v) for t, v in sorted(per_task.items())}
    manifest = json.loads(out.with_name("rollouts_run_manifest.json").read_text())
    loads = [run.get("load") or {} for run in manifest.get("runs", [])]  # the collector's own, per call
    return {
        "wall_s": round(wall, 2),
        "rollouts": sum(len(v) for v in per_task.values()),
        "decisions": decisions,
        "sequences_limit": limit,
        **server,
        "sequences_mean": [load.get("sequences_mean") for load in loads],
        "sequences_mean_waiting": [load.get("sequences_mean_waiting") for load in loads],
        "waiting_s": [load.get("waiting_s") for load in loads],
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # before, after
    }


COUNTERS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:prefix_cache_queries_total",
            "vllm:prefix_cache_hits_total")  # fmt: skip


def _server_counters(base_url: str) -> dict[str, float]:
    import urllib.request

    sys.path.insert(0, str(REPO / "scripts"))
    from ngrp_lib.collect.metrics import parse_counters

    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=10) as reply:
        return parse_counters(reply.read().decode(), COUNTERS)


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The server's own counts over one run: prompt and generated tokens, prefix-cache hit rate."""
    d = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in COUNTERS}
    queries = d["vllm:prefix_cache_queries_total"]
    return {
        "server_prompt_tokens": int(d["vllm:prompt_tokens_total"]),
        "server_generated_tokens": int(d["vllm:generation_tokens_total"]),
        "prefix_hit": round(d["vllm:prefix_cache_hits_total"] / queries, 3) if queries else None,
    }


def arithmetic_tasks(path: Path, count: int, seed: int) -> Path:
    """`count` different demo-style questions with the demo's settings, for a design with more tasks than
    its 16: in turn a sum of two numbers up to 12, a product of two digits, and a product of a teen and a
    digit (the hard kind, like the demo's 13*11), seeded, so every run of the bench asks the same ones.
    No two alike: byte-identical task lines would share a task index, which `--adaptive` refuses."""
    rng = random.Random(seed)
    prompts: dict[str, int] = {}
    while len(prompts) < count:
        kind = len(prompts) % 3
        a, b = (
            (rng.randint(1, 12), rng.randint(1, 12)) if kind == 0 else (rng.randint(2, 9), rng.randint(2, 9))
        )
        if kind == 2:
            a = rng.randint(11, 19)
        op, answer = ("+", a + b) if kind == 0 else ("*", a * b)
        prompts.setdefault(f"What is {a}{op}{b}? Answer with just the number.", answer)
    rows = [
        {
            "responses_create_params": {
                "input": [{"role": "user", "content": prompt}],
                "max_output_tokens": 48,
                "temperature": 0.7,
            },
            "expected_answer": str(answer),
        }
        for prompt, answer in prompts.items()
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _decision(outcomes: list[bool]) -> str:
    return "mixed" if 0 < sum(outcomes) < len(outcomes) else ("all_pass" if all(outcomes) else "all_fail")


def real_run(args: Any) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        server = None if args.base_url else start_server(workdir, getattr(args, "model_dir", None))
        base_url = args.base_url or server.base_url
        model = args.model if args.base_url else server.model
        if args.generated:
            args.task_file = arithmetic_tasks(workdir / "tasks.jsonl", args.generated, args.seed)
        try:
            runs = _interleaved(workdir, base_url, model, args)
        finally:
            if server is not None:
                server.stop()
    results = {
        "tasks": f"{args.generated} generated arithmetic tasks" if args.generated else _shown(args.task_file),
        "concurrency": args.concurrency,
        "repeats": args.repeats,
        "first_round": args.first_round,
        "seed_per_repeat": args.seed_per_repeat,
        "warmup": args.warmup,
        **runs,
    }
    return results


def _interleaved(workdir: Path, base_url: str, model: str, args: Any) -> dict[str, list[dict]]:
    """fixed, adaptive (pipelined: this checkout), adaptive (barrier: `--barrier-checkout`, when given),
    then again, `--rounds` times."""
    adaptive = ["--adaptive", "learnable", "--first-round", str(args.first_round)]
    s, n, r = args.concurrency, args.repeats, args.first_round
    arms: dict[str, tuple[list[str], list[str], int]] = {}
    equal = getattr(args, "equal", "sequences")
    if equal in ("sequences", "both"):  # both at S sequences in flight
        arms |= {"fixed": ([], NGRP, s), "adaptive": (adaptive, NGRP, s)}
        for spec in getattr(args, "schedules", None) or []:  # one more arm a round schedule (--rounds)
            arms[f"adaptive {spec}"] = (["--adaptive", "learnable", "--rounds", spec], NGRP, s)
    if equal in ("requests", "both"):  # both at S requests in flight: n = N against n = R a request
        arms |= {"fixed_eq_requests": ([], NGRP, s * n), "adaptive_eq_requests": (adaptive, NGRP, s * r)}
    if args.barrier_checkout:
        other = [sys.executable, str(Path(args.barrier_checkout) / "scripts" / "ngrp.py")]
        arms["adaptive_barrier"] = (adaptive, other, s)
        for spec in getattr(args, "schedules", None) or []:  # the schedules by that checkout too
            arms[f"adaptive {spec} barrier"] = (["--adaptive", "learnable", "--rounds", spec], other, s)
    runs: dict[str, list[dict]] = {name: [] for name in arms}
    if args.warmup:  # the server's first large batches are slow (its CPU kernels warm up): not timed
        one_run(workdir / "warmup", base_url, model, [], args)
    for i in range(args.rounds):
        for name, (extra, ngrp, limit) in arms.items():
            folder = workdir / f"{name}{i}".replace(" ", "_").replace(",", "-")
            runs[name].append(one_run(folder, base_url, model, extra, args, ngrp, limit))
            shown = {k: v for k, v in runs[name][-1].items() if k != "decisions"}
            print(f"{name} {i + 1}: {json.dumps(shown)}", file=sys.stderr)  # a run cut short keeps these
    return runs


def _shown(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def print_real(results: dict) -> None:
    print(
        f"real run: {results['tasks']}, N={results['repeats']}, R={results['first_round']}, learnable,"
        f" --concurrency {results['concurrency']}"
    )
    print(
        "| run | sequences limit | rollouts | wall s | generated tok | prompt tok | prefix hit | mixed |"
        " all pass | all fail | decisions equal to fixed N's | sequences in flight mean (while work waited) |"
        " load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    names = ("fixed", "adaptive", "adaptive_barrier", "fixed_eq_requests", "adaptive_eq_requests")
    arms = [name for name in names if name in results]
    arms += [name for name in results if name.startswith("adaptive ")]  # --schedules arms
    reference = results.get("fixed") or results["fixed_eq_requests"]
    for i, fixed in enumerate(reference):
        for name in arms:
            run = results[name][i]
            kinds = list(run["decisions"].values())
            same = sum(fixed["decisions"][t] == d for t, d in run["decisions"].items())
            agree = f"{same}/{len(kinds)}" if not name.startswith("fixed") else "-"
            print(
                f"| {name} {i + 1} | {run.get('sequences_limit', '-')} | {run['rollouts']} |"
                f" {run['wall_s']:.1f} | {run.get('server_generated_tokens', '-')} |"
                f" {run.get('server_prompt_tokens', '-')} | {run.get('prefix_hit', '-')} |"
                f" {kinds.count('mixed')} | {kinds.count('all_pass')} | {kinds.count('all_fail')} | {agree} |"
                f" {_in_flight(run)} |"
                f" {run['load_1min'][0]} to {run['load_1min'][1]} |"
            )


def _in_flight(run: dict) -> str:
    """The collector's mean sequences in flight (its first call's) and, in brackets, over the time a
    request waited for room (a checkout from before that measure shows `-`)."""
    means, waiting = run.get("sequences_mean") or [None], run.get("sequences_mean_waiting") or [None]
    if means[0] is None:
        return "-"
    return f"{means[0]} ({'-' if waiting[0] is None else waiting[0]})"
