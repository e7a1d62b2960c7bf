#!/usr/bin/env python3
"""Throughput of `ngrp collect` against a floor, same server, same requests, in one run.

The floor is a bare aiohttp loop at the same concurrency: the same chat bodies, POST, parse the JSON,
nothing else (no verification, no conversion, no writing). `ngrp` runs its library entry point
(`ngrp_lib.collect.collect`) in the same interpreter, so both pay the same client costs; rounds
alternate floor / ngrp to spread the machine's noise over both. Goal: ngrp >= 90% of the floor.

    NGRP_VLLM_VENV=$(bash .ci/install_vllm.sh) python3 benchmarks/collect_bench.py   # starts a tiny server
    python3 benchmarks/collect_bench.py --base-url http://127.0.0.1:8000/v1 --model NAME

`--grouping` runs only the comparison of one request per task group (the default) against one request per
rollout (`--one-request-per-rollout`): all through `collect()` in this process, rounds rotating, on
16 tasks x 8 repeats with long prompts (~450 tokens) and then on the demo's short prompts
(examples/tasks.jsonl), 48 output tokens (`ignore_eos`). Each comparison twice, so the two causes
separate: at equal sequences in flight (both sides at `--concurrency` S sequences: S requests against
S / 8 grouped ones) and at equal requests in flight (grouped at S x 8 sequences: S requests of n = 8).
Each row: wall, the server's own prompt and generated tokens and prefix-cache hit rate (its /metrics
before and after), mean sequences in flight, client CPU per rollout. Goal: grouped >= 1.3x at equal
sequences on the long prompts (shared prefill), client CPU per rollout no higher.

`--long` adds the long run: 20,000 rollouts of 1 output token in one `collect()`, with the collector's
RSS sampled as rollouts land (at 2,000 and at the end; goal: the end within 1.2x of 2,000) and its client
CPU per request, next to the short rounds' figure. `--long-only` skips the short rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

from ngrp_lib.collect.convert import chat_request  # noqa: E402
from ngrp_lib.collect.http import open_session  # noqa: E402
from ngrp_lib.collect.materialize import MaterializeOptions, materialize  # noqa: E402
from ngrp_lib.collect.options import CollectOptions  # noqa: E402
from ngrp_lib.collect.routing import Endpoint, normalize_base_url  # noqa: E402
from ngrp_lib.collect.runner import collect  # noqa: E402


def write_tasks(path: Path, tasks: int, max_tokens: int) -> None:
    with open(path, "w") as handle:
        for i in range(tasks):
            params = {
                "input": [{"role": "user", "content": f"Question {i}: what is {i} + {i}? Box the answer."}],
                "max_output_tokens": max_tokens,
                "temperature": 1.0,
                "ignore_eos": True,
            }
            handle.write(
                json.dumps({"responses_create_params": params, "expected_answer": str(2 * i)}) + "\n"
            )


async def floor(bodies: list[bytes], url: str, concurrency: int) -> None:
    """A bare aiohttp loop getting all answers (same bounded admission as ngrp)."""
    import aiohttp
    import orjson

    it = iter(bodies)
    headers = {"content-type": "application/json"}

    async def worker(session):
        for body in it:
            async with session.post(url, data=body, headers=headers) as reply:
                orjson.loads(await reply.read())
                assert reply.status == 200

    connector = aiohttp.TCPConnector(limit=concurrency + 8, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))


def run_ngrp(
    materialized: Path,
    workdir: Path,
    endpoint: Endpoint,
    concurrency: int,
    round_: Any,
    grouped: bool = True,
    fill: bool = False,
) -> Any:
    options = CollectOptions(
        output=workdir / f"rollouts_{round_}.jsonl",
        endpoints=(endpoint,),
        materialized=materialized,
        verifier="math",
        concurrency=concurrency,
        group_requests=grouped,
        fill_batch=fill,
    )

    async def run() -> Any:
        async with open_session(None if fill else concurrency) as session:
            return await collect(options, session, log=lambda text: None)

    result = asyncio.run(run())
    assert result.complete, result
    return result


def timed(function, *args) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): CPU is the client's own cost, steadier under load."""
    wall, cpu = time.perf_counter(), time.process_time()
    function(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--tasks", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--long", action="store_true", help="also the long run (RSS over many rollouts)")
    parser.add_argument("--long-only", action="store_true", help="the long run only")
    parser.add_argument("--long-rollouts", type=int, default=20_000)
    parser.add_argument("--long-checkpoint", type=int, default=2_000)
    parser.add_argument("--grouping", action="store_true", help="grouped vs one request per rollout only")
    parser.add_argument("--group-tasks", type=int, default=16)
    parser.add_argument("--group-repeats", type=int, default=8)
    parser.add_argument("--group-max-tokens", type=int, default=48)
    parser.add_argument("--group-rounds", type=int, default=4)
    parser.add_argument("--group-sets", default="long,demo", help="which prompt sets: long, demo or both")
    parser.add_argument(
        "--fill-sides", action="store_true", help="grouping: also both shapes from S with --fill-batch"
    )
    parser.add_argument("--sides", help="grouping: only these sides (comma-separated names)")
    parser.add_argument("--prompt-words", type=int, default=LONG_PROMPT_WORDS, help="words in a long prompt")
    parser.add_argument(
        "--model-dir", type=Path, help="serve this model (e.g. SmolLM2) instead of the tiny one"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="collect-bench-") as tmp:
        workdir, server = Path(tmp), None
        base_url = args.base_url
        if base_url is None:
            server = start_server(workdir, args.model_dir, args.model)
            base_url = server.base_url
        try:
            endpoint = Endpoint(normalize_base_url(base_url), args.model)
            figures = {} if args.long_only or args.grouping else measure(args, workdir, endpoint)
            if args.grouping:
                long_tasks = workdir / "long_tasks.jsonl"
                write_long_tasks(long_tasks, args.group_tasks, args.group_max_tokens, args.prompt_words)
                sets = {"long": long_tasks, "demo": REPO / "examples" / "tasks.jsonl"}
                figures["grouping"] = []
                for name in args.group_sets.split(","):
                    entry = measure_grouping(args, workdir, endpoint, sets[name], f"{name} prompts")
                    figures["grouping"].append(entry)
                    if not args.json:  # as each set ends: a run cut short keeps what it measured
                        print_grouping([entry], args)
                        sys.stdout.flush()
            if args.long or args.long_only:
                figures["long"] = long_run(args, workdir, endpoint)
        finally:
            if server is not None:
                server.stop()
    if args.json:
        print(json.dumps(figures))
        return 0
    if "requests" in figures:
        print_short(figures, args)
    if "long" in figures:
        print_long(figures["long"])
    return 0


def print_short(figures: dict, args) -> None:
    n = figures["requests"]
    print(
        f"{n} requests ({args.tasks} tasks x {args.repeats}), {args.max_tokens} tokens each, "
        f"concurrency {args.concurrency}, median of {args.rounds} alternating rounds"
    )
    print(f"floor (bare aiohttp): {figures['floor_rps']:.1f} req/s   rounds {figures['floor_s']}")
    print(f"ngrp collect:         {figures['ngrp_rps']:.1f} req/s   rounds {figures['ngrp_s']}")
    print(
        f"ratio ngrp/floor:     {figures['ratio']:.3f} median, {figures['ratio_best']:.3f} best round, "
        f"{figures['ratio_paired_median']:.3f} median of paired rounds"
    )
    print(
        f"client CPU per request: floor {figures['floor_client_cpu_ms_per_request']:.2f} ms, "
        f"ngrp {figures['ngrp_client_cpu_ms_per_request']:.2f} ms"
    )


def measure(args, workdir: Path, endpoint: Endpoint) -> dict:
    tasks = workdir / "tasks.jsonl"
    write_tasks(tasks, args.tasks, args.max_tokens)
    materialized = workdir / "materialized.jsonl"
    materialize(tasks, materialized, MaterializeOptions(num_repeats=args.repeats, agent="bench"))
    import orjson

    rows = [orjson.loads(line) for line in materialized.read_bytes().splitlines()]
    bodies = [orjson.dumps(chat_request(r["responses_create_params"], endpoint.model)) for r in rows]
    url = endpoint.base_url + "/chat/completions"
    asyncio.run(floor(bodies[: args.concurrency], url, args.concurrency))  # warm-up
    floor_runs, ngrp_runs = [], []
    for round_ in range(args.rounds):
        floor_runs.append(timed(lambda: asyncio.run(floor(bodies, url, args.concurrency))))
        ngrp_runs.append(timed(run_ngrp, materialized, workdir, endpoint, args.concurrency, round_))
    n = len(bodies)
    floor_rps = n / statistics.median(w for w, _ in floor_runs)
    ngrp_rps = n / statistics.median(w for w, _ in ngrp_runs)
    return {
        "requests": n,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "floor_s": [round(w, 3) for w, _ in floor_runs],
        "ngrp_s": [round(w, 3) for w, _ in ngrp_runs],
        "floor_rps": round(floor_rps, 2),
        "ngrp_rps": round(ngrp_rps, 2),
        "ratio": round(ngrp_rps / floor_rps, 4),
        # Each floor round is paired with the ngrp round right after it: the median of the pair ratios
        # cancels slow drifts in the machine's load.
        "ratio_paired_median": round(
            statistics.median(f / g for (f, _), (g, _) in zip(floor_runs, ngrp_runs, strict=True)), 4
        ),
        # Best of the rounds: the round least disturbed by other jobs on a shared machine.
        "ratio_best": round(min(w for w, _ in floor_runs) / min(w for w, _ in ngrp_runs), 4),
        "floor_client_cpu_ms_per_request": round(statistics.median(c for _, c in floor_runs) / n * 1000, 3),
        "ngrp_client_cpu_ms_per_request": round(statistics.median(c for _, c in ngrp_runs) / n * 1000, 3),
    }


LONG_PROMPT_WORDS = 80  # about 450 tokens with the tiny test model's tokenizer (checked with /tokenize)


def write_long_tasks(path: Path, tasks: int, max_tokens: int, words: int = LONG_PROMPT_WORDS) -> None:
    """Tasks whose prompts are long (a numbered passage, then the question), so prefill is real work."""
    with open(path, "w") as handle:
        for i in range(tasks):
            passage = " ".join(f"item{(i * 7 + k) % 97}" for k in range(words))
            text = f"Task {i}. Read the list and answer. {passage}. What is {i} + {i}? Box the answer."
            params = {"input": [{"role": "user", "content": text}], "max_output_tokens": max_tokens,
                      "temperature": 1.0, "ignore_eos": True}  # fmt: skip
            handle.write(
                json.dumps({"responses_create_params": params, "expected_answer": str(2 * i)}) + "\n"
            )


SERVER_COUNTERS = (
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
)


def server_counters(endpoint: Endpoint) -> dict[str, float]:
    """The server's own token and prefix-cache counters now (its /metrics), summed over label sets."""
    import urllib.request

    from ngrp_lib.collect.metrics import metrics_url, parse_counters

    with urllib.request.urlopen(metrics_url(endpoint), timeout=10) as reply:
        return parse_counters(reply.read().decode(), SERVER_COUNTERS)


def grouping_side(
    materialized: Path,
    workdir: Path,
    endpoint: Endpoint,
    limit: int,
    tag: str,
    grouped: bool,
    fill: bool = False,
) -> dict:
    """One round of one side at `limit` sequences in flight: wall, client CPU, what the collector says it
    cost and what the server counted (its /metrics before and after)."""
    before = server_counters(endpoint)
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_ngrp(materialized, workdir, endpoint, limit, tag, grouped, fill)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = server_counters(endpoint)
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in SERVER_COUNTERS}
    queries = delta["vllm:prefix_cache_queries_total"]
    load = result.load
    return {"wall": wall, "cpu": cpu, "requests": result.cost["requests"], "rollouts": result.completed,
            "server_prompt_tokens": int(delta["vllm:prompt_tokens_total"]),
            "server_generated_tokens": int(delta["vllm:generation_tokens_total"]),
            "prefix_hit": round(delta["vllm:prefix_cache_hits_total"] / queries, 3) if queries else None,
            "sequences_mean": load["sequences_mean"], "requests_mean": load["requests_mean"],
            "fill": load.get("fill_batch")}  # fmt: skip


# The three sides of a grouping comparison, each (grouped?, limit of sequences in flight as a multiple of
# --concurrency S): one request per rollout at S sequences (S requests); grouped at S sequences (S / R
# requests of n = R): equal sequences in flight; grouped at S x R sequences (S requests): equal requests.
SIDES = {"single": (False, 1), "grouped_eq_seq": (True, 1), "grouped_eq_req": (True, None)}
# `--fill-sides`: both shapes again from S sequences with --fill-batch (the limit then grows by itself)
FILL_SIDES = {"single_fill": (False, 1), "grouped_fill": (True, 1)}


def measure_grouping(args, workdir: Path, endpoint: Endpoint, tasks: Path, label: str) -> dict:
    """Grouped (one request per task group) against one request per rollout on the same rows, in this
    process, at equal sequences in flight and at equal requests in flight; rounds rotate which side goes
    first, so none always runs warm."""
    materialized = workdir / f"grouping_{label}.jsonl"
    overrides = {"max_output_tokens": args.group_max_tokens, "temperature": 1.0, "ignore_eos": True}
    options = MaterializeOptions(
        num_repeats=args.group_repeats, agent="bench", overrides=overrides, limit=args.group_tasks
    )
    materialize(tasks, materialized, options)
    shapes = SIDES | (FILL_SIDES if args.fill_sides else {})
    if args.sides:  # a subset, e.g. the --fill-batch sides alone
        shapes = {side: shapes[side] for side in args.sides.split(",")}
    limits = {side: args.concurrency * (factor or args.group_repeats) for side, (_, factor) in shapes.items()}
    grouping_side(materialized, workdir, endpoint, args.concurrency, f"warm_{label}", True)
    sides: dict[str, list[dict]] = {side: [] for side in shapes}
    names = list(shapes)
    for round_ in range(args.group_rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for side in order:
            tag = f"{side}_{label}_{round_}"
            grouped, fill = shapes[side][0], side in FILL_SIDES
            run = grouping_side(materialized, workdir, endpoint, limits[side], tag, grouped, fill)
            sides[side].append(run)
    first = next(iter(sides.values()))[0]
    rollouts = first["rollouts"]
    wall = {side: statistics.median(r["wall"] for r in runs) for side, runs in sides.items()}

    def ratio(a: str, b: str) -> float | None:
        return round(wall[a] / wall[b], 3) if a in wall and b in wall else None

    return {
        "label": label,
        "rollouts": rollouts,
        "limits": limits,
        "wall_s": {side: [round(r["wall"], 2) for r in runs] for side, runs in sides.items()},
        "rollouts_per_s": {side: round(rollouts / w, 2) for side, w in wall.items()},
        "ratio_equal_sequences": ratio("single", "grouped_eq_seq"),
        "ratio_equal_requests": ratio("single", "grouped_eq_req"),
        "ratio_fuller_batch": ratio("grouped_eq_seq", "grouped_eq_req"),
        **{
            key: {side: runs[0][key] for side, runs in sides.items()}
            for key in ("requests", "server_prompt_tokens", "server_generated_tokens", "prefix_hit")
        },
        "sequences_mean": {side: runs[0]["sequences_mean"] for side, runs in sides.items()},
        "fill": {side: runs[0]["fill"] for side, runs in sides.items() if runs[0]["fill"]},
        "prompt_tokens_per_rollout": round(first["server_prompt_tokens"] / rollouts, 1),
        "client_cpu_ms_per_rollout": {
            side: round(statistics.median(r["cpu"] for r in runs) / rollouts * 1000, 3)
            for side, runs in sides.items()
        },
    }


def print_grouping(figures: dict, args) -> None:
    for entry in figures:
        print(
            f"{entry['label']}: {entry['rollouts']} rollouts ({args.group_tasks} tasks x"
            f" {args.group_repeats}), {entry['prompt_tokens_per_rollout']} prompt tokens a rollout,"
            f" {args.group_max_tokens} output tokens, {args.group_rounds} rotating rounds; limits of"
            f" sequences in flight {entry['limits']}"
        )
        header = "  side             wall (s) per round   rollouts/s  requests  prompt tok  generated"
        print(header + "  prefix hit  seq in flight (mean)  client CPU ms/rollout")
        for side in entry["wall_s"]:
            print(
                f"  {side:<16} {str(entry['wall_s'][side]):<20} {entry['rollouts_per_s'][side]:>10}"
                f"  {entry['requests'][side]:>8}  {entry['server_prompt_tokens'][side]:>10}"
                f"  {entry['server_generated_tokens'][side]:>9}  {str(entry['prefix_hit'][side]):>10}"
                f"  {entry['sequences_mean'][side]:>20}  {entry['client_cpu_ms_per_rollout'][side]:>21}"
            )
        if entry["ratio_equal_sequences"] and entry["ratio_equal_requests"] and entry["ratio_fuller_batch"]:
            print(
                f"  grouped / one per rollout: {entry['ratio_equal_sequences']:.2f}x at equal sequences,"
                f" {entry['ratio_equal_requests']:.2f}x at equal requests; the fuller batch alone (grouped,"
                f" equal requests / equal sequences): {entry['ratio_fuller_batch']:.2f}x"
            )
        for side, fill in entry.get("fill", {}).items():
            print(f"  {side}: --fill-batch from {entry['limits'][side]}: {fill}")


def rss_bytes() -> int:
    """This process's resident set size now (Linux /proc)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class RssSampler(threading.Thread):
    """Counts the rollouts file's lines as they land and records this process's RSS at each checkpoint."""

    def __init__(self, path: Path, checkpoints: list[int], interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.path, self.checkpoints, self.interval = path, sorted(checkpoints), interval
        self.at: dict[int, int] = {}  # rollouts -> RSS bytes
        self.peak = 0
        self.lines = 0
        self._offset = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(self.interval)

    def sample(self) -> None:
        if self.path.exists():
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
            self._offset += len(data)
            self.lines += data.count(b"\n")
        rss = rss_bytes()
        self.peak = max(self.peak, rss)
        for mark in self.checkpoints:
            if self.lines >= mark and mark not in self.at:
                self.at[mark] = rss

    def stop(self) -> None:
        self._done.set()
        self.join()
        self.sample()


def long_run(args, workdir: Path, endpoint: Endpoint) -> dict:
    """One collect() of many 1-token rollouts: RSS at the checkpoint and at the end, CPU per request."""
    tasks, repeats = args.long_rollouts // 4, 4
    task_file = workdir / "long_tasks.jsonl"
    write_tasks(task_file, tasks, 1)
    materialized = workdir / "long_materialized.jsonl"
    materialize(task_file, materialized, MaterializeOptions(num_repeats=repeats, agent="bench"))
    output = workdir / "long" / "rollouts.jsonl"
    options = CollectOptions(
        output=output,
        endpoints=(endpoint,),
        materialized=materialized,
        verifier="math",
        concurrency=args.concurrency,
    )
    sampler = RssSampler(output, [args.long_checkpoint, tasks * repeats])
    before = rss_bytes()
    sampler.start()
    wall, cpu = time.perf_counter(), time.process_time()
    result = collect(options)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    sampler.stop()
    assert result.complete, result
    n = tasks * repeats
    at_mark, at_end = sampler.at[args.long_checkpoint], sampler.at[n]
    return {
        "rollouts": n,
        "concurrency": args.concurrency,
        "max_tokens": 1,
        "wall_s": round(wall, 2),
        "rollouts_per_s": round(n / wall, 1),
        "client_cpu_ms_per_request": round(cpu / n * 1000, 3),
        "rss_before_mb": round(before / 2**20, 1),
        f"rss_at_{args.long_checkpoint}_mb": round(at_mark / 2**20, 1),
        "rss_at_end_mb": round(at_end / 2**20, 1),
        "rss_peak_mb": round(sampler.peak / 2**20, 1),
        "rss_end_over_checkpoint": round(at_end / at_mark, 3),
    }


def print_long(figures: dict) -> None:
    n = figures["rollouts"]
    mark = next(k for k in figures if k.startswith("rss_at_") and k != "rss_at_end_mb")
    print(
        f"long run: {n} rollouts, {figures['max_tokens']} token each, concurrency {figures['concurrency']}: "
        f"{figures['wall_s']} s ({figures['rollouts_per_s']} rollouts/s)"
    )
    print(
        f"collector RSS: {figures['rss_before_mb']} MB before, {figures[mark]} MB at {mark[7:-3]} rollouts, "
        f"{figures['rss_at_end_mb']} MB at the end (x{figures['rss_end_over_checkpoint']}; goal <= 1.2), "
        f"peak {figures['rss_peak_mb']} MB"
    )
    print(f"client CPU per request: {figures['client_cpu_ms_per_request']} ms")


def start_server(workdir: Path, model_dir: Path | None = None, name: str = "tiny"):
    from vllm_fixture import VLLMServer, build_model, vllm_python

    python = vllm_python()
    if python is None:
        sys.exit("no server: pass --base-url, or set NGRP_VLLM_VENV (from .ci/install_vllm.sh) to start one")
    model = model_dir or build_model(python, workdir / "tiny-llama")
    return VLLMServer(python, model, workdir / "server.log", model=name).start()


if __name__ == "__main__":
    sys.exit(main())
