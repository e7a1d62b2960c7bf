#!/usr/bin/env python3
"""Benchmark watching a growing run in `ngrp view`: the cost of catching up with appended rows.

Writes the rows `view_bench.py` writes (completion order, each response padded to `--text-chars`), keeps
the first `--start` share of them in the rollouts file, indexes it, then appends the rest in `--steps`
equal parts (each ending in a half-written line, as a collector mid-write leaves it) and times
`RunIndex.extend` after each. For scale it times a whole index of the final file (one process, no cache),
what a restart of the viewer would cost. No figure is asserted: they go into benchmarks/README.md.

    python3 benchmarks/view_live_bench.py [--rows 200000] [--text-chars 2000] [--start 0.9] [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from view_bench import write_run  # noqa: E402


def main() -> int:
    from ngrp_lib.inspect.join import RunPaths
    from ngrp_lib.view.index import open_index

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--text-chars", type=int, default=2000)
    parser.add_argument("--start", type=float, default=0.9)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rollouts, inputs = write_run(Path(tmp), args.rows, args.text_chars)
        lines = rollouts.read_bytes().splitlines(keepends=True)
        first = int(len(lines) * args.start)
        rollouts.write_bytes(b"".join(lines[:first]))
        paths = RunPaths(rollouts, inputs, None)
        index = open_index(paths, threshold=1.0, use_cache=False, workers=1)
        cuts = [first + (len(lines) - first) * k // args.steps for k in range(args.steps + 1)]
        pending, times = b"", []  # the rest of a line left half-written by the step before
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            data = pending + b"".join(lines[lo:hi])
            cut = len(data) if hi == len(lines) else len(data) - len(lines[hi - 1]) // 2
            data, pending = data[:cut], data[cut:]
            with open(rollouts, "ab") as handle:
                handle.write(data)
            start = time.perf_counter()
            assert index.extend() is None
            times.append(time.perf_counter() - start)
        assert len(index.facts) == len(lines)
        whole, _ = _timed(lambda: open_index(paths, threshold=1.0, use_cache=False, workers=1).close())
        index.close()
        result = {
            "rows": len(lines),
            "file_mb": rollouts.stat().st_size / 2**20,
            "rows_per_step": (len(lines) - first) // args.steps,
            "extend_ms_median": 1000 * sorted(times)[len(times) // 2],
            "extend_ms_max": 1000 * max(times),
            "whole_index_s": whole,
        }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:24} {value:.3f}" if isinstance(value, float) else f"{key:24} {value}")
    return 0


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


if __name__ == "__main__":
    sys.exit(main())
