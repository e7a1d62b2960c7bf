#!/usr/bin/env python3
"""Benchmark `ngrp health` on 80,000 rollouts (10,000 tasks x 8) against the floor: orjson parsing both files.

The rollouts are `validate_bench.py`'s rows (completion order) plus the matching materialized inputs (with a
max_output_tokens); every 100th rollout stops at that cap, so there are findings to write. `--text-chars N`
pads each reasoning text to about N characters (natural-looking words), to time the loop detector on long
generations. The timed call is `run_health` (read, judge, reduce, write both files); --overwrite each time.
Wall time and CPU time of this process are both reported: on a machine shared with other jobs the wall
clock swings with their load, the CPU seconds do not (both runs are single-threaded and read from cache).

    python3 benchmarks/health_bench.py [--rows 80000] [--repeat 3] [--text-chars 0] [--json]
    python3 benchmarks/health_bench.py --agent --rows 20000 --turns 20 --tool-chars 2000   # agent rollouts

`--agent` times the same call on Gym-shaped simple-agent rows (benchmarks/agent_run.py), where the agent
checks read every output item; every 50th rollout carries a planted agent defect.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from validate_bench import _text, best_of, floor, write_rows  # noqa: E402

from ngrp_lib.audit.health import run_health  # noqa: E402

CAP = 4096


def prepare(rollouts: Path, inputs: Path, text_chars: int, cap_every: int = 100) -> None:
    """Materialized rows for every key; every `cap_every`-th rollout reaches the cap; longer texts."""
    rng = random.Random(1)
    out_rows = []
    with open(rollouts, "rb") as handle, open(inputs, "wb") as out:
        for i, line in enumerate(handle):
            row = orjson.loads(line)
            params = {**row["responses_create_params"], "max_output_tokens": CAP}
            material = {
                "responses_create_params": params,
                "expected_answer": row["expected_answer"],
                "agent_ref": row["agent_ref"],
                "_ng_task_index": row["_ng_task_index"],
                "_ng_rollout_index": row["_ng_rollout_index"],
            }
            out.write(orjson.dumps(material, option=orjson.OPT_APPEND_NEWLINE))
            row["responses_create_params"] = params
            if text_chars:
                summary = row["response"]["output"][0]["summary"][0]
                words = []
                while sum(map(len, words)) + len(words) < text_chars:
                    words.append(_text(rng, 12))
                summary["text"] = " ".join(words)[:text_chars]
            if i % cap_every == 0:
                row["response"]["usage"]["output_tokens"] = CAP
            out_rows.append(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
    rollouts.write_bytes(b"".join(out_rows))


def main() -> int:
    args = _arguments()
    with tempfile.TemporaryDirectory() as tmp:
        rollouts, inputs = Path(tmp) / "rollouts.jsonl", Path(tmp) / "rollouts_materialized_inputs.jsonl"
        if args.agent:
            from agent_run import write_agent_run

            write_agent_run(Path(tmp), args.rows, args.turns, args.tool_chars)
        else:
            write_rows(rollouts, args.rows)
            prepare(rollouts, inputs, args.text_chars)
        size_mb = (rollouts.stat().st_size + inputs.stat().st_size) / 1e6
        result = run_health(inputs, rollouts)
        if not args.agent:
            capped = result.affected["ngrp/truncated_at_token_cap"]
            assert capped == -(-args.rows // 100), result.affected
        timed = _timed(inputs, rollouts, args.repeat)
        timed.update(_asked_again(inputs, rollouts, args.repeat))
    figures = {
        "rollout_rows": args.rows,
        "text_chars": args.text_chars,
        "input_mb": round(size_mb, 1),
        **timed,
        "health_rollouts_per_s": round(args.rows / timed["t_health"]),
        "unhealthy": result.verdicts["unhealthy"],
        "python": sys.version.split()[0],
    }
    if args.json:
        print(orjson.dumps({key: figures[key] for key in FIGURE_ORDER}).decode())
    else:
        _print_figures(figures, args.rows, args.repeat, size_mb)
    return 0


# the --json keys, in the order they have always been printed
FIGURE_ORDER = (
    "rollout_rows", "text_chars", "input_mb", "floor_s", "health_s", "health_rollouts_per_s", "ratio",
    "median_paired_ratio", "cpu_floor_s", "cpu_health_s", "cpu_ratio", "unhealthy", "peak_python_mb",
    "python", "again_s", "cpu_again_s",
)  # fmt: skip


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=80_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--text-chars", type=int, default=0, help="pad each reasoning text to this length")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--agent", action="store_true", help="Agent rollouts (see --turns, --tool-chars).")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tool-chars", type=int, default=2000)
    return parser.parse_args()


def _timed(inputs: Path, rollouts: Path, repeat: int) -> dict:
    """Best wall and CPU seconds of the floor and of health, their ratios, and health's peak memory."""
    floors, healths, cpu_floors, cpu_healths = [], [], [], []
    for _ in range(repeat):  # interleaved, so a burst of load on the machine hits both
        for walls, cpus, work in (
            (floors, cpu_floors, lambda: (floor(inputs), floor(rollouts))),
            (healths, cpu_healths, lambda: run_health(inputs, rollouts, overwrite=True)),
        ):
            cpu = time.process_time()
            walls.append(best_of(work, 1))
            cpus.append(time.process_time() - cpu)
    t_floor, t_health = min(floors), min(healths)
    paired = sorted(h / f for h, f in zip(healths, floors, strict=True))
    tracemalloc.start()
    run_health(inputs, rollouts, overwrite=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "floor_s": round(t_floor, 3),
        "health_s": round(t_health, 3),
        "ratio": round(t_health / t_floor, 2),
        "median_paired_ratio": round(paired[len(paired) // 2], 2),
        "cpu_floor_s": round(min(cpu_floors), 3),
        "cpu_health_s": round(min(cpu_healths), 3),
        "cpu_ratio": round(min(cpu_healths) / min(cpu_floors), 2),
        "peak_python_mb": round(peak / 1e6, 1),
        "t_floor": t_floor,  # unrounded, for the text lines
        "t_health": t_health,
    }


def _asked_again(inputs: Path, rollouts: Path, repeat: int) -> dict:
    """Best wall and CPU seconds of health asked again on the same, unchanged run (without --overwrite):
    it judges, compares what it would write with the two files on disk, and writes nothing."""
    before = {p: p.stat().st_mtime_ns for p in rollouts.parent.iterdir()}
    walls, cpus = [], []
    for _ in range(repeat):
        cpu = time.process_time()
        walls.append(best_of(lambda: run_health(inputs, rollouts), 1))
        cpus.append(time.process_time() - cpu)
    assert {p: p.stat().st_mtime_ns for p in rollouts.parent.iterdir()} == before, "asked again wrote"
    return {"again_s": round(min(walls), 3), "cpu_again_s": round(min(cpus), 3)}


def _print_figures(figures: dict, rows: int, repeat: int, size_mb: float) -> None:
    rate = figures["health_rollouts_per_s"]
    print(f"{rows} rollouts + {rows} inputs ({size_mb:.0f} MB), Python {figures['python']}")
    print(f"floor (orjson parse of both):  {figures['t_floor']:.3f} s (best of {repeat})")
    print(f"ngrp health (read, judge, write): {figures['t_health']:.3f} s  ({rate:,} rollouts/s)")
    print(f"ratio health / floor:          {figures['ratio']:.2f}x  (goal: at most 3x)")
    print(f"median of the paired ratios:   {figures['median_paired_ratio']:.2f}x")
    print(
        f"CPU seconds, floor / health:   {figures['cpu_floor_s']:.3f} / {figures['cpu_health_s']:.3f}"
        f"  ratio {figures['cpu_ratio']:.2f}x (steady on a loaded machine)"
    )
    print(f"unhealthy rollouts found:      {figures['unhealthy']}")
    print(f"peak Python memory in health:  {figures['peak_python_mb']} MB (tracemalloc)")
    print(
        f"asked again, unchanged run:    {figures['again_s']:.3f} s wall, {figures['cpu_again_s']:.3f} s CPU"
        " (judged, compared with the files, nothing written)"
    )


if __name__ == "__main__":
    sys.exit(main())
