"""Every command and subcommand answers --help, and every command runs once on small real data, as a
separate process through the one entry the tests use (cli_helpers.ENTRY).

From the tree this is a cheap smoke test; its real use is the installed-copy tier (tests/installed.sh),
where ENTRY is the `ngrp` of a fresh venv holding only the wheel and the install the docs give: a module
the wheel lacks or a package that install lacks fails here, not in a user's hands. `collect` against a
real server is the vLLM slice's (tests/test_collect_*_vllm.py); here it meets a closed port, and `serve`
plans its servers with --dry-run (starting vLLM is tests/test_serve_vllm.py's).
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import click
import pytest
from cli_helpers import check, ngrp_process
from ledger_helpers import make_repo, profile_with_means
from view_helpers import Viewer

from ngrp_lib.cli import COMMANDS

CASE = Path(__file__).resolve().parent / "golden" / "gym-0.7.0" / "case_complete"


def command_paths() -> list[tuple[str, ...]]:
    """Every command, and under a group each of its subcommands."""
    paths: list[tuple[str, ...]] = []
    for name in sorted(COMMANDS):
        paths.append((name,))
        command = importlib.import_module(COMMANDS[name][0]).command
        if isinstance(command, click.Group):
            paths += [(name, sub) for sub in command.list_commands(click.Context(command))]
    return paths


def test_the_command_list_is_complete():
    paths = command_paths()
    assert {p[0] for p in paths} == set(COMMANDS) and len(COMMANDS) >= 16
    assert ("serve", "stop") in paths and ("ledger", "status") in paths


@pytest.mark.parametrize("path", command_paths(), ids=" ".join)
def test_help(path, tmp_path):
    done = check(ngrp_process(*path, "--help", cwd=tmp_path))
    assert done.stdout.startswith(f"Usage: ngrp {' '.join(path)} "), done.stdout[:200]
    assert not done.stderr


@pytest.fixture
def run(tmp_path) -> Path:
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        shutil.copy(CASE / name, tmp_path / name)
    return tmp_path


def ngrp(cwd: Path, *args: object, code: int = 0):
    return check(ngrp_process(*args, cwd=cwd), code)


def profiled(cwd: Path) -> Path:
    ngrp(cwd, "profile", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl")
    return cwd / "rollouts_reward_profiling.jsonl"


def test_analysis_commands(run):
    ngrp(run, "validate", "rollouts.jsonl", "rollouts_materialized_inputs.jsonl")
    checked = json.loads(ngrp(run, "check", "--inputs", "rollouts_materialized_inputs.jsonl",
                              "--rollouts", "rollouts.jsonl", "--json").stdout)  # fmt: skip
    assert checked["counts"]["completed"] == 12
    ngrp(run, "health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl")
    profile = profiled(run)
    # Gym 0.7.0's means for this case (tests/golden/gym-0.7.0/case_complete): t0 3/4, t1 0.625, t2 1/4.
    means = [json.loads(line)["mean/reward"] for line in profile.read_text().splitlines()]
    assert means == pytest.approx([0.75, 0.625, 0.25])
    stats = json.loads(ngrp(run, "stats", profile, "--rollouts", "rollouts.jsonl", "--json").stdout)
    assert stats["overall"]["n_tasks"] == 3
    ngrp(run, "compare", profile, profile)
    ngrp(run, "inspect", "rollouts.jsonl", "--task", "1")
    ngrp(run, "curriculum", profile, "--tasks", "rollouts_materialized_inputs.jsonl",
         "--output", "kept.jsonl", "--learnable-for", "4", "--pass-threshold", "1")  # fmt: skip
    assert (run / "kept.jsonl").exists()


def test_stats_on_reward_components_needs_no_scipy(run):
    """The documented install has no scipy: the components' t interval is ngrp's own. Worked by hand: task
    means 3/8, 5/16, 1/8 (half the reward: a fraction keeps the t interval); se = sd/sqrt(3); df 2 has the
    closed form t_p = (2p-1) sqrt(2 / (4p(1-p))). A 0/1 component is a rate: all 1 gets the exact one-sided
    bound 0.05^(1/3) over its 3 tasks."""
    rows = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]
    with open(run / "rc.jsonl", "w") as handle:
        for row in rows:
            row["reward_components"] = {"correctness": row["reward"] / 2, "format": 1.0}
            handle.write(json.dumps(row) + "\n")
    profile = profiled(run)
    stats = json.loads(ngrp(run, "stats", profile, "--rollouts", "rc.jsonl", "--json").stdout)
    found = {c["name"]: c for c in stats["reward_components"]["components"]}
    means = [0.375, 0.3125, 0.125]
    mean = sum(means) / 3
    se = (sum((m - mean) ** 2 for m in means) / 2) ** 0.5 / 3**0.5
    p = 0.975
    t = (2 * p - 1) * (2 / (4 * p * (1 - p))) ** 0.5
    assert found["correctness"]["mean"] == pytest.approx(mean, rel=1e-12)
    assert found["correctness"]["se"] == pytest.approx(se, rel=1e-12)
    assert found["correctness"]["ci_low"] == pytest.approx(mean - t * se, rel=1e-9)
    assert found["correctness"]["ci_high"] == pytest.approx(mean + t * se, rel=1e-9)
    assert found["correctness"]["ci_method"] == "t" and found["format"]["ci_method"] == "one_sided_lower"
    assert found["format"]["ci_low"] == pytest.approx(0.05 ** (1 / 3), rel=1e-12)
    assert found["format"]["ci_high"] == 1.0


def test_report_writes_its_page_with_plots(run):
    """matplotlib is in the documented install ([report]): the plots render."""
    profile = profiled(run)
    ngrp(run, "report", profile, "--rollouts", "rollouts.jsonl", "--output", "report.html")
    assert "<svg" in (run / "report.html").read_text()


def test_materialize_merge_reverify(run):
    tasks = run / "tasks.jsonl"
    tasks.write_text('{"responses_create_params": {"input": "2+2?"}, "expected_answer": "4"}\n')
    ngrp(run, "materialize", "--input", tasks, "--output", "m.jsonl", "--num-repeats", "3", "--agent", "a")
    assert len((run / "m.jsonl").read_text().splitlines()) == 3
    ngrp(run, "merge", "rollouts.jsonl", "-o", "merged.jsonl")
    assert len((run / "merged.jsonl").read_text().splitlines()) == 12
    done = ngrp(run, "reverify", "--rollouts", "rollouts.jsonl", "--output", "rv.jsonl", "--verifier", "math",
                "--inputs", "rollouts_materialized_inputs.jsonl", "--json")  # fmt: skip
    assert len((run / "rv.jsonl").read_text().splitlines()) == 12 and json.loads(done.stdout)


def test_collect_against_a_closed_port_fails_cleanly(run):
    tasks = run / "tasks.jsonl"
    tasks.write_text('{"responses_create_params": {"input": "2+2?"}, "expected_answer": "4"}\n')
    argv = ["collect", "--input", tasks, "--output", run / "c" / "rollouts.jsonl", "--verifier", "math",
            "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]  # fmt: skip
    done = ngrp_process(*argv, cwd=run)
    assert done.returncode in (1, 2, 3) and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "127.0.0.1:9" in done.stderr


def test_serve_plans_with_dry_run(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    done = ngrp_process("serve", "--model", "model", "--dry-run", cwd=tmp_path)
    if done.returncode == 2 and "vLLM" in done.stderr:
        pytest.skip("no vLLM venv here to plan with (NGRP_VLLM_VENV)")
    check(done)
    assert "--served-model-name model" in done.stdout


def test_view_serves_the_run(run):
    with Viewer("rollouts.jsonl", cache=run / "cache", cwd=run) as viewer:
        status, _, body = viewer.get("/")
    assert status == 200 and b"<html" in body.lower()


def test_ledger_init_record_status(tmp_path):
    repo = make_repo(tmp_path / "repo")
    ngrp(repo, "ledger", "init", "--campaign", "c1", "--metric", "mean/reward", "--direction", "max",
         "--max-experiments", "3")  # fmt: skip
    profile = profile_with_means(tmp_path / "p_reward_profiling.jsonl", [0.5, 0.25])
    ngrp(repo, "ledger", "record", "--campaign", "c1", "--profile", profile, "--description", "first")
    status = json.loads(ngrp(repo, "ledger", "status", "--campaign", "c1", "--json").stdout)
    assert status["attempted"] == 1
