"""Issue 38, class 6: a `ledger run` whose command prints an environment value named like a secret
(MY_SERVICE_TOKEN, echoed by the command) kept it in the run's log, a ledger file. The launched
environment's secret-named values are now masked in the command's output before a byte of it is kept
(the log, the echo), a value cut across two reads of the pipe included; a Slurm job's log, which Slurm
writes itself, is masked once the job is over."""

from __future__ import annotations

import json
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_helpers import make_repo

from ngrp_lib.artifacts.scrub import MASK, StreamMask, mask_file

PLANTED = {"MY_SERVICE_TOKEN": "plainsvc-ZZ9988", "DB_PASSWORD": "hunter2-db-pw77"}
# The command prints the token whole, then split across two writes a second apart (two pipe reads),
# then its environment, then a value that is not a secret.
_CODE = """
import os, sys, time
token = os.environ["MY_SERVICE_TOKEN"]
print("token is", token, flush=True)
sys.stdout.write(token[:5]); sys.stdout.flush(); time.sleep(1.0)
sys.stdout.write(token[5:] + "\\n"); sys.stdout.flush()
for k in sorted(os.environ): print(k, os.environ[k])
print("keep-this-value-123")
"""


def test_secret_output_is_masked_in_every_ledger_file(tmp_path, run_ngrp):
    repo = make_repo(tmp_path / "repo")
    init = ["ledger", "init", "--campaign", "c1", "--metric", "score", "--direction", "max"]
    assert run_ngrp(*init, cwd=repo).returncode == 0
    env = {**os.environ, **PLANTED}
    argv = ["ledger", "run", "--campaign", "c1", "--json", "--metric-regex", r"score=(?P<value>[0-9.]+)"]
    ran = run_ngrp(*argv, "--", sys.executable, "-c", _CODE, cwd=repo, env=env)
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr
    ledger = repo / "reports" / "auto_research" / "c1"
    files = [p for p in ledger.rglob("*") if p.is_file()]
    log = next(p for p in files if p.name == "run.log")
    text = log.read_text()
    assert f"token is {MASK}\n{MASK}\n" in text and "keep-this-value-123" in text
    for path in files:
        data = path.read_bytes()
        for value in PLANTED.values():
            assert value.encode() not in data, (path.name, value)
    assert not any(value in ran.stdout + ran.stderr for value in PLANTED.values())
    assert json.loads(ran.stdout)["log_tail"]


@settings(max_examples=500, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(["plainsvc-ZZ9988", "hunter2-db-pw77", "plain", "svc-", "hunter", "\n", "x"])
    ),
    cuts=st.lists(st.integers(1, 9), min_size=1),
)
def test_secret_output_stream_mask_equals_masking_the_whole_text(parts, cuts):
    values = list(PLANTED.values())
    data = "".join(parts).encode()
    mask, out, i, k = StreamMask(values), b"", 0, 0
    while i < len(data):
        size = cuts[k % len(cuts)]
        out += mask.feed(data[i : i + size])
        i, k = i + size, k + 1
    out += mask.flush()
    expected = data
    for value in sorted(values, key=len, reverse=True):
        expected = expected.replace(value.encode(), MASK.encode())
    assert out == expected


@pytest.mark.parametrize("block", [4, 1 << 20])
def test_secret_output_mask_file_rewrites_a_log_written_by_another_program(tmp_path, block):
    log = tmp_path / "run.log"
    log.write_bytes(b"start plainsvc-ZZ9988 end\nclean\n")
    assert mask_file(log, list(PLANTED.values()), block=block)
    assert log.read_bytes() == b"start *** end\nclean\n"
    assert not mask_file(log, list(PLANTED.values()), block=block)  # nothing left: not rewritten
    assert [p.name for p in tmp_path.iterdir()] == ["run.log"]
