#!/usr/bin/env python3
"""Benchmark `ngrp validate` on 100,000 realistic rollout rows against the floor: orjson parsing alone.

Rows have the shape of tests/golden/gym-0.7.0/case_complete/rollouts.jsonl (a reasoning item and a message
in `response.output`, usage with details, verifier fields, identity stamps), with seeded random text
lengths and rewards, shuffled into completion order. Both timings run in one process on one file, best
of `--repeat` runs each, so the ratio is robust to a noisy shared machine.

    python3 benchmarks/validate_bench.py [--rows 100000] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from ngrp_lib.audit.validate import validate_file  # noqa: E402

WORDS = ["the", "answer", "is", "so", "we", "get", "then", "compute", "sum", "of", "primes", "below"]
WORDS += ["therefore", "box", "step", "check", "thinking", "first", "next", "carry"]


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def make_row(rng: random.Random, task: int, rollout: int) -> dict:
    prompt = f"Task {task}: {_text(rng, rng.randint(8, 40))}? Put the answer in \\boxed{{}}."
    reasoning, output = rng.randint(20, 400), rng.randint(5, 120)
    answer = str(rng.randint(0, 1000))
    correct = rng.random() < 0.5
    response = _response(rng, task, rollout, 20 + len(prompt) // 4, (reasoning, output), answer)
    return {
        "responses_create_params": {"input": [{"role": "user", "content": prompt}], "temperature": 1.0},
        "response": response,
        "reward": 1.0 if correct else 0.0,
        "mask_sample": False,
        "failure_kind": None,
        "failure_reason": None,
        "expected_answer": answer if correct else str(rng.randint(0, 1000)),
        "difficulty": rng.choice(["easy", "medium", "hard"]),
        "extracted_answer": answer,
        "is_correct": correct,
        "judge_score": 10.0 if correct else 0.0,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"name": "math_simple_agent"},
        "_ng_environment_server": "math_environment_server",
        "_ng_result_type": "legacy_agent",
    }


def _response(
    rng: random.Random, task: int, rollout: int, input_tokens: int, lengths: tuple[int, int], answer: str
) -> dict:
    """The Responses API object of one rollout: a reasoning item, then the message that boxes `answer`
    (the texts drawn from `rng` in that order, as the rows have always been drawn)."""
    reasoning, output = lengths
    return {
        "id": f"resp_{task}_{rollout}",
        "created_at": 1760000000.0 + task * 10 + rollout,
        "model": "my-policy",
        "object": "response",
        "output": [
            {
                "id": f"rs_{task}_{rollout}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": _text(rng, reasoning // 8)}],
            },
            {
                "id": f"msg_{task}_{rollout}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {
                        "type": "output_text",
                        "text": f"{_text(rng, output // 4)} \\boxed{{{answer}}}",
                        "annotations": [],
                    }
                ],
            },
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "status": "completed",
        "incomplete_details": None,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reasoning + output,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + reasoning + output,
        },
    }


def write_rows(path: Path, n_rows: int, repeats: int = 8, seed: int = 0) -> None:
    rng = random.Random(seed)
    keys = [(t, r) for t in range(n_rows // repeats + 1) for r in range(repeats)][:n_rows]
    rng.shuffle(keys)  # completion order
    with open(path, "wb") as handle:
        for task, rollout in keys:
            handle.write(orjson.dumps(make_row(rng, task, rollout), option=orjson.OPT_APPEND_NEWLINE))


def write_invalid_copy(path: Path, out: Path) -> None:
    """Every row without `response.usage`: the worst case, every row fails the schema."""
    with open(path, "rb") as src, open(out, "wb") as dst:
        for line in src:
            row = orjson.loads(line)
            del row["response"]["usage"]
            dst.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))


def floor(path: Path) -> int:
    """The floor: read the file line by line and parse every line with orjson, nothing else."""
    n = 0
    loads = orjson.loads
    with open(path, "rb") as handle:
        for line in handle:
            loads(line)
            n += 1
    return n


def jsonschema_only_rate(path: Path, sample: int) -> float:
    """Rows/s of full jsonschema validation alone (no fast path), on the first `sample` parsed rows."""
    from ngrp_lib.artifacts import schemas

    validator = schemas.validator("rollout")
    with open(path, "rb") as handle:
        rows = [orjson.loads(line) for _, line in zip(range(sample), handle, strict=False)]
    start = time.perf_counter()
    for row in rows:
        assert validator.is_valid(row)
    return len(rows) / (time.perf_counter() - start)


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--jsonschema-sample", type=int, default=2000, help="rows timed with jsonschema alone"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rollouts.jsonl"
        write_rows(path, args.rows)
        size = path.stat().st_size
        report = validate_file(path)  # warm-up: compiles the schema, and checks the rows are valid
        assert report.status == "valid" and report.rows == args.rows, report
        t_floor = best_of(lambda: floor(path), args.repeat)
        t_validate = best_of(lambda: validate_file(path), args.repeat)
        js_rate = jsonschema_only_rate(path, args.jsonschema_sample)
        invalid = Path(tmp) / "invalid_rollouts.jsonl"
        write_invalid_copy(path, invalid)
        bad = validate_file(invalid)
        assert bad.status == "invalid" and bad.problem_count + bad.lines_not_itemized == args.rows, bad
        t_invalid = best_of(lambda: validate_file(invalid), args.repeat)
    figures = {
        "rows": args.rows,
        "file_mb": round(size / 1e6, 1),
        "floor_rows_per_s": round(args.rows / t_floor),
        "validate_rows_per_s": round(args.rows / t_validate),
        "floor_s": round(t_floor, 3),
        "validate_s": round(t_validate, 3),
        "ratio": round(t_validate / t_floor, 2),
        "jsonschema_only_rows_per_s": round(js_rate),
        "all_invalid_rows_per_s": round(args.rows / t_invalid),
        "all_invalid_ratio": round(t_invalid / t_floor, 2),
        "python": sys.version.split()[0],
    }
    if args.json:
        print(orjson.dumps(figures).decode())
    else:
        print(f"{args.rows} rows, {figures['file_mb']} MB, Python {figures['python']}")
        print(f"floor (orjson parse only): {figures['floor_rows_per_s']:>9,} rows/s  ({t_floor:.3f} s)")
        print(f"ngrp validate:             {figures['validate_rows_per_s']:>9,} rows/s  ({t_validate:.3f} s)")
        print(f"ratio validate / floor:    {figures['ratio']:.2f}x  (goal: at most 10x)")
        print(
            f"every row invalid (20 itemized): {figures['all_invalid_rows_per_s']:,} rows/s, "
            f"{figures['all_invalid_ratio']:.2f}x the floor"
        )
        print(f"jsonschema alone, no fast path ({args.jsonschema_sample} rows): {js_rate:>9,.0f} rows/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
