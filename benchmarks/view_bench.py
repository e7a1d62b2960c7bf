#!/usr/bin/env python3
"""Benchmark `ngrp view` on 200,000 rollouts (25,000 tasks x 8): time to the first page, RSS while paging.

Generates the rows `validate_bench.py` writes (completion order), with each response's text padded to
`--text-chars` so rows are the size of real reasoning runs, and their materialized inputs. Then starts the
real `ngrp view` process with an empty index cache and measures, from the process start:
- cold open: until `GET /` (the task table's first page) has been answered, the index built and cached;
- warm open: the same with the cache in place;
then pages through the task table, opens task pages, runs filters and a text search, and samples the
server's resident memory (VmRSS, and the kernel's peak VmHWM) after each request. `ngrp inspect` on the
same file is timed too, with its peak RSS. No figure is asserted: they go into benchmarks/README.md.

    python3 benchmarks/view_bench.py [--rows 200000] [--text-chars 2000] [--pages 200] [--json]
    python3 benchmarks/view_bench.py --agent --rows 20000 --turns 20 --tool-chars 2000   # agent rollouts

`--agent` writes Gym-shaped simple-agent rows instead (benchmarks/agent_run.py): `--turns` model turns, each
but the last calling a tool whose output is about `--tool-chars` characters.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_bench import make_row  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"


def write_run(folder: Path, rows: int, text_chars: int, repeats: int = 8, seed: int = 0) -> tuple[Path, Path]:
    rng = random.Random(seed)
    rollouts, inputs = folder / "rollouts.jsonl", folder / "rollouts_materialized_inputs.jsonl"
    tasks = rows // repeats
    with open(inputs, "wb") as out:
        for task in range(tasks):
            for rollout in range(repeats):
                out.write(
                    orjson.dumps(
                        {
                            "responses_create_params": {
                                "input": [{"role": "user", "content": f"Problem {task}: compute it."}]
                            },
                            "expected_answer": str(task % 1000),
                            "level": ("easy", "medium", "hard")[task % 3],
                            "agent_ref": {"name": "math_simple_agent"},
                            "_ng_task_index": task,
                            "_ng_rollout_index": rollout,
                        },
                        option=orjson.OPT_APPEND_NEWLINE,
                    )
                )
    keys = [(t, r) for t in range(tasks) for r in range(repeats)]
    rng.shuffle(keys)
    pad = "".join(rng.choice("abcdefghij klmnop qrstuv wxyz ") for _ in range(text_chars))
    with open(rollouts, "wb") as out:
        for task, rollout in keys:
            row = make_row(rng, task, rollout)
            content = row["response"]["output"][-1]["content"][0]
            content["text"] = pad[: rng.randint(text_chars // 2, text_chars)] + content["text"]
            out.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
    return rollouts, inputs


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and of its children that have ended (the index workers)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    text = Path(f"/proc/{pid}/status").read_text()
    found = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", text, re.M))
    return int(found["VmRSS"]) / 1024, int(found["VmHWM"]) / 1024


class Server:
    def __init__(self, rollouts: Path, cache: Path) -> None:
        env = dict(os.environ, NGRP_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
        self.start = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, str(SCRIPT), "view", str(rollouts), "--port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline()
        found = re.search(r"(http://\S+/)", line)
        if not found:
            raise RuntimeError(f"no URL: {line!r} {self.process.stderr.read()}")
        self.url = found.group(1)

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=600) as reply:
            return reply.read()

    def stop(self) -> str:
        self.process.send_signal(signal.SIGINT)
        _, err = self.process.communicate(timeout=60)
        return err


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def bench_view(rollouts: Path, cache: Path, pages: int, agent: str = "math_simple_agent") -> dict:
    out: dict = {}
    server = Server(rollouts, cache)
    server.get("/")
    out["cold_open_s"] = time.perf_counter() - server.start
    out["cold_open_cpu_s"] = cpu_seconds(server.process.pid)
    out["load_average_1min"] = os.getloadavg()[0]
    out["rss_after_open_mb"] = memory(server.process.pid)[0]
    total = json.loads(server.get("/tasks.json?per_page=50"))["pages"]
    rng = random.Random(1)
    rss, latencies = [], []
    for _ in range(pages):
        number = rng.randint(1, total)
        seconds, body = timed(lambda n=number: server.get(f"/?page={n}"))
        latencies.append(seconds)
        rss.append(memory(server.process.pid)[0])
    out["table_page_ms_median"] = 1000 * sorted(latencies)[len(latencies) // 2]
    tasks_seen = []
    task_latency = []
    for _ in range(pages // 4):
        task = rng.randint(0, total * 50 - 1)
        seconds, _ = timed(lambda t=task: server.get(f"/task/{t}?a={agent}"))
        task_latency.append(seconds)
        tasks_seen.append(task)
        rss.append(memory(server.process.pid)[0])
    out["task_page_ms_median"] = 1000 * sorted(task_latency)[len(task_latency) // 2]
    for name, query in (
        ("filter_failed", "outcome=failed"),
        ("sort_pass_rate", "sort=pass_rate&desc=1"),
        ("where_level", "where=level%3Dhard"),
        ("search_text", "q=boxed%7B7%7D"),
    ):
        seconds, _ = timed(lambda q=query: server.get(f"/?{q}"))
        again, _ = timed(lambda q=query: server.get(f"/?{q}&page=2"))
        out[f"{name}_s"], out[f"{name}_page2_s"] = seconds, again
        rss.append(memory(server.process.pid)[0])
    out["rss_paging_max_mb"] = max(rss)
    out["rss_peak_hwm_mb"] = memory(server.process.pid)[1]
    err = server.stop()
    out["stopped_cleanly"] = server.process.returncode == 0 and "stopped" in err
    warm = Server(rollouts, cache)
    warm.get("/")
    out["warm_open_s"] = time.perf_counter() - warm.start
    out["warm_open_cpu_s"] = cpu_seconds(warm.process.pid)
    out["rss_warm_mb"] = memory(warm.process.pid)[0]
    warm.stop()
    return out


def critical_path(rollouts: Path, cache: Path) -> dict:
    """CPU seconds of each step of a cold open, measured one by one in this process (imports in a fresh
    one), and their critical path with two index workers: imports + max(each worker's half, the inputs
    index) + merge, cache write and the first page. On an idle two-core machine that is the wall time;
    on a loaded one the wall time is longer by the share of the cores the other jobs take."""
    code = (
        "import time; t = time.process_time(); import numpy, aiohttp, ngrp_lib.view.app, "
        "ngrp_lib.view.index; print(time.process_time() - t)"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    imports = float(
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout
    )
    sys.path.insert(0, str(REPO / "scripts"))
    from ngrp_lib.inspect import facts as f
    from ngrp_lib.inspect.join import InputsIndex, resolve
    from ngrp_lib.view import index as vi
    from ngrp_lib.view.pages import tasks_page
    from ngrp_lib.view.queries import Views, parse_params

    paths = resolve(rollouts)
    size = rollouts.stat().st_size
    cuts = f._cuts(rollouts, size, 2)
    parts, halves = [], []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        start = time.process_time()
        parts.append(f._scan_part(rollouts, a, b, True))
        halves.append(time.process_time() - start)
    start = time.process_time()
    inputs = InputsIndex.build(paths.inputs)
    inputs_s = time.process_time() - start
    start = time.process_time()
    facts, stats, builder = f._merge(parts, rollouts, size)
    index = vi.RunIndex(paths, facts, stats, builder.previews, inputs, "expected_answer", 1.0)
    vi._save(cache / "critical.npz", index)
    index.finish()
    tasks_page(Views(index).tasks(parse_params({}, 1.0)), compare=False)
    rest = time.process_time() - start
    return {
        "cpu_imports_s": imports,
        "cpu_scan_half_1_s": halves[0],
        "cpu_scan_half_2_s": halves[-1],
        "cpu_inputs_index_s": inputs_s,
        "cpu_merge_save_first_page_s": rest,
        "critical_path_two_workers_s": imports + max(*halves, inputs_s) + rest,
        "cpu_serial_total_s": imports + sum(halves) + inputs_s + rest,
    }


def bench_inspect(rollouts: Path) -> dict:
    """Time and peak RSS (os.wait4's rusage of that one child) of `ngrp inspect` runs."""
    out = {}
    cases = (
        ("inspect_task", ["--task", "123"]),
        ("inspect_failed_json_all", ["--failed", "--limit", "0", "--json"]),
    )
    for name, args in cases:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, str(SCRIPT), "inspect", str(rollouts), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        read = process.stdout.read
        size = sum(len(chunk) for chunk in iter(lambda read=read: read(1 << 20), b""))
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        assert process.returncode == 0, name
        out[f"{name}_s"] = time.perf_counter() - start
        out[f"{name}_peak_rss_mb"] = usage.ru_maxrss / 1024
        out[f"{name}_cpu_s"] = usage.ru_utime + usage.ru_stime
        out[f"{name}_stdout_mb"] = size / 2**20
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--text-chars", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, help="Generate the run into this folder once and reuse it.")
    parser.add_argument("--agent", action="store_true", help="Agent rollouts (see --turns, --tool-chars).")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tool-chars", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        rollouts = folder / "rollouts.jsonl"
        if not rollouts.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            if args.agent:
                from agent_run import write_agent_run

                write_agent_run(folder, args.rows, args.turns, args.tool_chars)
            else:
                write_run(folder, args.rows, args.text_chars)
        result = {"rows": args.rows, "file_mb": rollouts.stat().st_size / 2**20}
        agent = "docs_simple_agent" if args.agent else "math_simple_agent"
        result.update(bench_view(rollouts, Path(tmp) / "cache", args.pages, agent))
        result.update(bench_inspect(rollouts))  # before critical_path grows this process (a forked child's
        result.update(critical_path(rollouts, Path(tmp)))  # peak RSS counts its parent's pages before exec)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:32} {value:.3f}" if isinstance(value, float) else f"{key:32} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
