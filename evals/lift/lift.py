#!/usr/bin/env python3
"""The lift test at scale (issue 36): the harness, the ground truth and the grader.

Standard library only, and it never imports ngrp_lib: the truth and the grades must not come from the code
they judge. See evals/lift/README.md for the protocol.

  lift.py servers --state DIR --tag A --count 2        start vLLM CPU servers (tiny model), write their URLs
  lift.py prepare --url URL --out DIR [--tasks 2000]   tasks.jsonl with answers, and the reference truth
  lift.py monitor --state DIR --tag A [--kill-after N] poll each server's /metrics; kill server 0 after N tokens
  lift.py grade    --state DIR --tag A --run RUN_DIR        score one agent's answer and files
  lift.py stop     --state DIR --tag A                      stop the servers of a tag
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import contextlib
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORDS = [
    "the",
    "answer",
    "is",
    "what",
    "of",
    "a",
    "to",
    "and",
    "in",
    "number",
    "sum",
    "product",
    "prime",
    "think",
    "so",
    "then",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "plus",
    "minus",
    "times",
    "equals",
    "question",
    "final",
    "result",
    "math",
    "solve",
    "step",
]
SAMPLING = {"temperature": 1.0, "max_tokens": 16}
COUNTERS = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total")
DIGIT = re.compile(r"\d")


def reward(reply: str, expected: str) -> int:
    """The task's rule: 1 when the last decimal digit of the reply equals the expected answer."""
    digits = DIGIT.findall(reply or "")
    return int(bool(digits) and digits[-1] == expected)


# -- servers --------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_servers(state: Path, tag: str, count: int) -> dict:
    venv = (
        os.environ.get("NGRP_VLLM_VENV")
        or subprocess.run(
            ["bash", str(REPO / ".ci/install_vllm.sh")], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    python = Path(venv) / "bin" / "python"
    model = state / "tiny"
    if not (model / "config.json").exists():
        subprocess.run([str(python), str(REPO / "tests/support/tiny_model.py"), str(model)], check=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}  # fmt: skip
    servers = []
    for i in range(count):
        port = _free_port()
        log = open(state / f"server_{tag}{i}.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
             "--served-model-name", "tiny", "--dtype", "float32", "--max-model-len", "2048",
             "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
             "--distributed-executor-backend", "uni", "--no-enable-chunked-prefill"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        servers.append({"url": f"http://127.0.0.1:{port}/v1", "pgid": proc.pid})
    for server in servers:
        base = server["url"].removesuffix("/v1")
        for _ in range(240):
            try:
                with urllib.request.urlopen(base + "/health", timeout=2):
                    break
            except OSError:
                time.sleep(1)
        else:
            raise SystemExit(f"server {base} did not become healthy")
    info = {"tag": tag, "servers": servers}
    (state / f"servers_{tag}.json").write_text(json.dumps(info, indent=2))
    return info


def stop_servers(state: Path, tag: str) -> None:
    for server in json.loads((state / f"servers_{tag}.json").read_text())["servers"]:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server["pgid"], signal.SIGKILL)


# -- metrics --------------------------------------------------------------------------------------------
def read_counters(url: str) -> dict[str, float] | None:
    try:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    found = dict.fromkeys(COUNTERS, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in found:
            found[name] += float(line.rsplit(" ", 1)[1])
    return found


def monitor(state: Path, tag: str, kill_after: float | None, interval: float = 1.0) -> None:
    """Poll every server's counters until all are down or STOP appears; the last reading of a server that
    died stands for its total (at most one interval is lost). Kills server 0 after `kill_after` tokens."""
    info = json.loads((state / f"servers_{tag}.json").read_text())
    out = state / f"metrics_{tag}.json"
    start = {s["url"]: read_counters(s["url"]) for s in info["servers"]}
    last = dict(start)
    killed_at = None
    while not (state / f"STOP_{tag}").exists():
        alive = 0
        for server in info["servers"]:
            now = read_counters(server["url"])
            if now is not None:
                last[server["url"]] = now
                alive += 1
        first = info["servers"][0]
        tokens = (last[first["url"]] or {}).get(COUNTERS[0], 0) - (start[first["url"]] or {}).get(
            COUNTERS[0], 0
        )
        if kill_after is not None and killed_at is None and tokens >= kill_after:
            os.killpg(first["pgid"], signal.SIGKILL)
            killed_at = time.time()
        delta = {
            url: {k: last[url][k] - (start[url] or {}).get(k, 0) for k in COUNTERS} if last[url] else None
            for url in last
        }
        total = {k: sum(d[k] for d in delta.values() if d) for k in COUNTERS}
        out.write_text(json.dumps({"per_server": delta, "total": total, "killed_at": killed_at}, indent=2))
        if not alive:
            break
        time.sleep(interval)


# -- tasks and reference --------------------------------------------------------------------------------
def _chat(url: str, prompt: str, n: int) -> list[str]:
    body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}], "n": n, **SAMPLING}
    request = urllib.request.Request(
        url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as reply:
        return [c["message"]["content"] or "" for c in json.load(reply)["choices"]]


def _draw_all(url: str, prompts: list[str], n: int) -> list[list[str]]:
    with futures.ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda p: _chat(url, p, n), prompts))


def prepare(url: str, out: Path, tasks: int, draws: int, seed: int, choose_draws: int = 4) -> None:
    """Prompts; answers chosen from a first pass of `choose_draws` draws (so tasks span easy to impossible); the truth
    from a second, independent pass. 4 task lines are repeated byte for byte (Gym gives them one index)."""
    rng = random.Random(seed)
    prompts = [
        f"Task {i}: "
        + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
        + f" {rng.randint(0, 999)}?"
        for i in range(tasks)
    ]
    t0 = time.time()
    first = _draw_all(url, prompts, choose_draws)
    answers = []
    for replies in first:
        last = [d[-1] for d in (DIGIT.findall(r) for r in replies) if d]
        freq = {str(d): last.count(str(d)) for d in range(10)}
        kind = rng.random()
        if kind < 0.4:
            answers.append(max(freq, key=lambda d: (freq[d], d)))  # the task's likeliest final digit
        elif kind < 0.7:
            answers.append(str(rng.randint(0, 9)))
        else:
            answers.append(min(freq, key=lambda d: (freq[d], d)))  # its rarest: hard or impossible
    second = _draw_all(url, prompts, draws)
    rates = [sum(reward(r, a) for r in replies) / draws for replies, a in zip(second, answers, strict=True)]
    rows = [
        {"responses_create_params": {"input": [{"role": "user", "content": p}]}, "expected_answer": a}
        for p, a in zip(prompts, answers, strict=True)
    ]
    lines = [json.dumps(row) for row in rows]
    dup = rng.sample(range(tasks), 4)
    order = list(range(tasks)) + dup
    rng.shuffle(order)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tasks.jsonl").write_text("".join(lines[i] + "\n" for i in order))
    per_line = {line_no: rates[i] for line_no, i in enumerate(order, 1)}
    mean = sum(rates) / tasks
    informative = [1 - (1 - p) ** 8 - p**8 for p in rates]
    reference = {
        "tasks": tasks,
        "lines": len(order),
        "draws": draws,
        "pass_at_1": mean,
        # the reference mean's own error: binomial within each task, the tasks fixed
        "pass_at_1_se_reference": math.sqrt(sum(p * (1 - p) / (draws - 1) for p in rates)) / tasks,
        "expected_informative_share_g8": sum(informative) / tasks,
        "duplicate_lines": sorted(i + 1 for i, t in enumerate(order) if order.count(t) > 1),
        "rate_by_line": per_line,
        "seconds": round(time.time() - t0, 1),
    }
    (out / "reference.json").write_text(json.dumps(reference, indent=1))
    print(json.dumps({k: v for k, v in reference.items() if k != "rate_by_line"}))


# -- grading --------------------------------------------------------------------------------------------
def _reply_text(row: dict) -> str:
    """The assistant text of a Gym rollout row (Responses API output items), else a chat choice's."""
    response = row.get("response") or {}
    parts = []
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            for content in item.get("content") or []:
                if isinstance(content, dict) and isinstance(content.get("text"), str):
                    parts.append(content["text"])
    if not parts:
        for choice in response.get("choices") or []:
            parts.append(((choice or {}).get("message") or {}).get("content") or "")
    return "".join(parts)


def _prompt(row: dict) -> str | None:
    messages = (row.get("responses_create_params") or {}).get("input")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        return messages[-1].get("content")
    return messages if isinstance(messages, str) else None


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def grade(state: Path, tag: str, run: Path) -> dict:
    reference = json.loads((state / "reference.json").read_text())
    task_lines: dict[str, list[int]] = {}
    expected: dict[str, str] = {}
    for line_no, row in enumerate(_jsonl(state / "tasks.jsonl"), 1):
        task_lines.setdefault(_prompt(row), []).append(line_no)
        expected[_prompt(row)] = row["expected_answer"]
    found: dict = {"tag": tag, "run": str(run), "problems": []}
    problems = found["problems"]
    answer = json.loads((run / "answer.json").read_text())
    inputs = _jsonl(run / "rollouts_materialized_inputs.jsonl")
    rollouts = _jsonl(run / "rollouts.jsonl")
    prompt_of_task = {row["_ng_task_index"]: _prompt(row) for row in inputs}
    outcomes: dict[str, list[int]] = {p: [] for p in task_lines}
    stored_disagree = 0
    for row in rollouts:
        prompt = prompt_of_task.get(row.get("_ng_task_index"))
        if prompt not in outcomes:
            problems.append(f"rollout of unknown task {row.get('_ng_task_index')}")
            continue
        got = reward(_reply_text(row), expected[prompt])
        stored_disagree += got != row.get("reward")
        outcomes[prompt].append(got)
    found["rollouts"] = len(rollouts)
    found["stored_reward_disagreements"] = stored_disagree
    listed = set(answer.get("worth_training_lines") or [])
    wrong = 0
    for prompt, lines in task_lines.items():
        draws = outcomes[prompt]
        mixed = 0 < sum(draws) < len(draws)
        claimed = [line in listed for line in lines]
        if len(set(claimed)) > 1:
            wrong += 1
            problems.append(f"identical lines {lines} given different answers")
        elif claimed[0] and not mixed or not claimed[0] and (mixed or len(draws) < 8):
            wrong += 1
    found["triage_wrong_tasks"] = wrong
    found["worth_training_listed"] = len(listed)
    est = answer.get("pass_at_1") or {}
    lo, hi = (est.get("ci95") or [None, None])[:2]
    truth, se = reference["pass_at_1"], reference["pass_at_1_se_reference"]
    covers = lo is not None and hi is not None and lo - 2 * se <= truth <= hi + 2 * se
    found["pass_at_1"] = {"estimate": est.get("estimate"), "ci95": [lo, hi], "reference": truth,
                          "reference_se": se, "covers": covers}  # fmt: skip
    found["gym_reads"] = _gym_reads(run)
    metrics = json.loads((state / f"metrics_{tag}.json").read_text())
    found["server_work"] = metrics["total"]
    stamps = [float((run / name).read_text().strip()) for name in ("start", "end") if (run / name).exists()]
    found["wall_s"] = round(stamps[1] - stamps[0], 1) if len(stamps) == 2 else None
    code = [p for p in (run / "code").rglob("*") if p.is_file()] if (run / "code").exists() else []
    found["own_code_lines"] = sum(
        sum(1 for line in p.read_text(errors="replace").splitlines() if line.strip()) for p in code
    )
    found["correct"] = wrong == 0 and covers and found["gym_reads"] is True and not stored_disagree
    return found


def _gym_reads(run: Path) -> bool | str:
    venv = os.environ.get("NGRP_GYM_VENV")
    if not venv:
        return "not checked: NGRP_GYM_VENV unset"
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
            shutil.copy(run / name, Path(tmp) / name)
        done = subprocess.run(
            [str(Path(venv) / "bin" / "gym"), "eval", "profile", "--inputs", "rollouts_materialized_inputs.jsonl",
             "--rollouts", "rollouts.jsonl"],
            cwd=tmp, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        return (
            True if done.returncode == 0 else f"gym eval profile exit {done.returncode}: {done.stderr[-300:]}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("servers")
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--count", type=int, default=2)
    p = sub.add_parser("stop")
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("--tag", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--url", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tasks", type=int, default=2000)
    p.add_argument("--draws", type=int, default=8, help="draws per task for the reference pass rates")
    p.add_argument("--choose-draws", type=int, default=4, help="draws per task that choose its answer")
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("monitor")
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--kill-after", type=float)
    p = sub.add_parser("grade")
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--run", type=Path, required=True)
    opts = parser.parse_args()
    if opts.command == "servers":
        opts.state.mkdir(parents=True, exist_ok=True)
        print(json.dumps(start_servers(opts.state, opts.tag, opts.count)))
    elif opts.command == "stop":
        stop_servers(opts.state, opts.tag)
    elif opts.command == "prepare":
        prepare(opts.url.rstrip("/"), opts.out, opts.tasks, opts.draws, opts.seed, opts.choose_draws)
    elif opts.command == "monitor":
        monitor(opts.state, opts.tag, opts.kill_after)
    else:
        print(json.dumps(grade(opts.state, opts.tag, opts.run), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
