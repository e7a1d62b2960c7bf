#!/usr/bin/env python3
"""Time `health` (judge only) on one reply of each adversarial shape (tests/adversarial_replies.py: unclosed
and nested boxes, a box followed by braces, stated exponents, ...) against a benign reply of the same length.
Prints CPU seconds, seconds per MiB and the ratio to the benign reply; the longest time comes last. The
bound the test holds (tests/test_hardening_linear_health.py): 200 x the benign reply + 2 s.

    python3 benchmarks/health_adversarial_bench.py [--mib 2] [--json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "scripts")]

from adversarial_replies import BASELINE, SHAPES, time_health  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=2.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    chars = int(args.mib * 2**20)
    times = {}
    for name, shape in SHAPES.items():
        with tempfile.TemporaryDirectory() as folder:
            times[name] = time_health(Path(folder), shape(chars))
    base = times[BASELINE]
    worst = max((t, n) for n, t in times.items() if n != BASELINE)
    if args.json:
        print(orjson.dumps({"mib": args.mib, "seconds": times, "longest": worst[1]}).decode())
        return
    for name, took in sorted(times.items(), key=lambda item: item[1]):
        print(f"{name:24} {took:7.3f} s  {took / args.mib:6.3f} s/MiB  {took / base:6.1f}x benign")
    print(f"longest: {worst[1]} {worst[0]:.3f} s ({worst[0] / args.mib:.3f} s/MiB)")


if __name__ == "__main__":
    main()
