"""Small pieces of `ledger run`, `branch` and the key-path hint, checked on hand-made inputs: /proc and
nvidia-smi parsing, Slurm's scontrol fields, the order of the crash classes, nearest key paths."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ngrp_lib.errors import UsageError
from ngrp_lib.ledger.campaign import check_branch_name
from ngrp_lib.ledger.classify import classify_end, classify_success
from ngrp_lib.ledger.keypaths import metric_paths, miss_hint, nearest_paths
from ngrp_lib.ledger.outcome import Outcome
from ngrp_lib.ledger.procwatch import PAGE, Proc, parse_nvidia_smi, parse_stat, scan, tree
from ngrp_lib.ledger.slurm import parse_duration_s, parse_exit, parse_job, parse_rss_bytes, sbatch_command

STATS = {
    "overall": {
        "n_tasks": 50,
        "mean_reward": {"task_weighted": {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}},
        "pass_at_k": [{"k": 1, "value": 0.4}, {"k": 4, "value": 0.7}],
        "variance": {"icc": 0.1},
    },
    "per_task": [{"task": 0, "mean_reward": 1.0}, {"task": 1, "mean_reward": 0.0}],
}


def test_metric_paths_name_list_items_by_their_field():
    paths = list(metric_paths(STATS))
    assert "overall.pass_at_k.k=1" in paths and "overall.pass_at_k.k=4" in paths
    assert "overall.mean_reward.task_weighted" in paths  # a metric object, not its ci_low/ci_high
    assert "overall.mean_reward.task_weighted.ci_low" not in paths
    assert "per_task.task=0.mean_reward" in paths and "overall.pass_at_k.k=1.k" not in paths


@pytest.mark.parametrize(
    ("key", "first"),
    [
        ("pass_at_k.k=1", "overall.pass_at_k.k=1"),
        ("mean_reward", "overall.mean_reward.task_weighted"),
        ("overall.mean_reward.taskweighted", "overall.mean_reward.task_weighted"),
        ("icc", "overall.variance.icc"),
    ],
)
def test_nearest_paths(key, first):
    assert nearest_paths(STATS, key)[0] == first


def test_miss_hint_when_nothing_is_near():
    assert miss_hint(STATS, "zzzz").startswith("no key path like it; key paths here include: overall.n_tasks")
    assert "no number" in miss_hint({"a": "b"}, "x")


def test_parse_stat_handles_spaces_and_parens_in_the_name():
    line = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 " + " ".join(["0"] * 14) + " 321 0 0"
    assert parse_stat(line) == Proc(4242, 1, 4242, "S", 321 * PAGE)
    assert parse_stat("garbage") is None


def test_scan_sees_this_process_and_tree_follows_children():
    procs = scan()
    me = procs[os.getpid()]
    assert me.ppid == os.getppid() and me.rss_bytes > 0
    fake = {
        1: Proc(1, 0, 1, "S", 10),
        10: Proc(10, 1, 10, "S", 100),  # the run's leader
        11: Proc(11, 10, 10, "S", 200),
        12: Proc(12, 11, 12, "S", 300),  # left the group with setsid: still a descendant
        13: Proc(13, 1, 10, "S", 400),  # orphan still in the group
        14: Proc(14, 10, 10, "Z", 999),  # zombie: not counted
        20: Proc(20, 1, 20, "S", 5000),  # unrelated
    }
    assert [p.pid for p in tree(fake, 10, 10)] == [10, 11, 12, 13]


def test_parse_nvidia_smi():
    text = "1234, 2048\n5678, 512\n999, [N/A]\n"
    assert parse_nvidia_smi(text, {1234, 5678}) == 2560.0
    assert parse_nvidia_smi(text, {42}) is None


def test_slurm_fields():
    line = "JobId=17 JobName=ngrp-c1-3 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 RunTime=00:01:05"
    fields = parse_job(line)
    assert (fields["JobState"], fields["ExitCode"], fields["RunTime"]) == ("FAILED", "3:0", "00:01:05")
    assert (
        parse_exit("3:0") == (3, None) and parse_exit("0:9") == (None, 9) and parse_exit("x") == (None, None)
    )
    assert parse_duration_s("00:01:05") == 65 and parse_duration_s("1-02:00:00") == 93600
    assert parse_duration_s("05:07") == 307 and parse_duration_s("n/a") is None
    assert parse_rss_bytes("\n1024K\n2M\n") == 2 * 1024**2 and parse_rss_bytes("") is None


def test_sbatch_command_rounds_the_time_limit_up():
    command = sbatch_command(
        ["python", "-c", "print('a b')"],
        Path("/tmp/x.log"),
        job_name="j",
        timeout_s=61,
        extra=["--gres=gpu:1"],
    )
    assert command[:3] == ["sbatch", "--wait", "--parsable"] and "--time=2" in command
    assert command[-2] == "--gres=gpu:1" and command[-1] == "--wrap=python -c 'print('\"'\"'a b'\"'\"')'"


def _end(**kwargs) -> Outcome:
    return Outcome("local", kwargs.pop("returncode", None), **kwargs)


@pytest.mark.parametrize(
    ("outcome", "tail", "expected"),
    [
        (_end(timed_out=True, signal=signal.SIGKILL), "CUDA out of memory", "timeout"),  # ours first
        (_end(stopped_by="SIGINT", signal=signal.SIGTERM), "", "killed"),
        (_end(returncode=1), "x\ntorch.OutOfMemoryError: CUDA out of memory.\n", "oom"),
        (_end(returncode=137), "", "oom"),
        (_end(signal=signal.SIGKILL), "", "oom"),
        (_end(returncode=1), "step 9 loss: NaN\n", "nan"),
        (_end(returncode=1), "grad_norm=inf\n", "nan"),
        (_end(signal=signal.SIGSEGV), "", "killed"),
        (_end(returncode=2), "inference failed; nanoseconds\n", "exit:2"),  # no false nan/inf match
        (_end(returncode=0, state="OUT_OF_MEMORY"), "", "oom"),
        (_end(returncode=0, state="TIMEOUT"), "", "timeout"),
        (_end(returncode=0, state="CANCELLED by 0"), "", "killed"),
    ],
)
def test_classify_end_order(outcome, tail, expected):
    assert classify_end(outcome, tail, 60.0).run_class == expected


def test_classify_success():
    log = Path("run.log")
    assert classify_end(_end(returncode=0), "all good", None) is None
    assert classify_success("all good", None, False, log).run_class == "ok"
    assert classify_success("loss tensor(nan)", None, False, log).run_class == "nan"
    assert classify_success("", "the metric is nan", True, log).run_class == "nan"
    nothing = classify_success("done\n", "no match", False, log)
    assert nothing.run_class == "no_metric" and "tail -n 50 run.log" in nothing.detail


@pytest.mark.parametrize("name", ["a b", "x..y", "x/", "x.lock", "-x", "a/.b", "a@{b", "a~1", "a:b", "a\\b"])
def test_bad_branch_names(name):
    with pytest.raises(UsageError):
        check_branch_name(name, "--branch-prefix")


def test_good_branch_names():
    for name in ("autoresearch/2026-03-24-dapo", "ar/c1/12-lr_2e-6", "x.y/z"):
        assert check_branch_name(name, "--branch-prefix") == name
