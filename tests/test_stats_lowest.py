"""stats' lowest pass-rate lines: the inspect command they print must show the rollouts stats counted as
failed for exactly the tasks named."""

from __future__ import annotations

from types import SimpleNamespace

from ngrp_lib.commands.stats_grpo_text import lowest_task_lines


def _row(task, agent, successes, n=4):
    return {"task": task, "agent": agent, "n": n, "successes": successes, "pass_rate": successes / n,
            "mean_reward": successes / n, "prompt": f"p{task}"}  # fmt: skip


def _result(rows, threshold=None):
    return SimpleNamespace(per_task=rows, rollouts="r.jsonl", settings={"pass_threshold": threshold})


def test_the_inspect_command_names_the_agent_of_a_task_index_two_agents_share():
    rows = [_row(0, "math", 0), _row(0, "code", 4), _row(1, "math", 2), _row(1, "code", 3)]
    lines = lowest_task_lines(_result(rows))
    assert lines[-1] == "  why they fail: ngrp inspect r.jsonl --agent math --task 0 --failed"


def test_lowest_tasks_of_several_agents_get_one_command_each():
    rows = [_row(0, "math", 0), _row(3, "code", 0), _row(1, "math", 2)]
    lines = lowest_task_lines(_result(rows))
    assert lines[-2:] == [
        "  why they fail: ngrp inspect r.jsonl --agent code --task 3 --failed",
        "  why they fail: ngrp inspect r.jsonl --agent math --task 0 --failed",
    ]


def test_the_inspect_command_fails_rollouts_at_stats_pass_threshold():
    """stats --pass-threshold 0.5 counted a reward of 0.7 as a pass; inspect --failed alone (threshold
    1.0) would list it as a failure."""
    rows = [_row(0, None, 0), _row(1, None, 2)]
    lines = lowest_task_lines(_result(rows, threshold=0.5))
    assert lines[-1] == "  why they fail: ngrp inspect r.jsonl --task 0 --failed --pass-threshold 0.5"


def test_a_path_with_a_space_is_quoted():
    rows = [_row(0, None, 0), _row(1, None, 2)]
    result = SimpleNamespace(per_task=rows, rollouts="my runs/r.jsonl", settings={"pass_threshold": None})
    assert (
        lowest_task_lines(result)[-1] == "  why they fail: ngrp inspect 'my runs/r.jsonl' --task 0 --failed"
    )


def test_each_printed_command_shows_only_its_agents_failed_rollouts(tmp_path, run_ngrp):
    """End to end on a two-agent run (a task index names one task per agent): every 'why they fail'
    command runs and shows failed rollouts of the named agent and tasks only."""
    import json
    import shlex

    from run_helpers import write_run

    rollouts, inputs = write_run(tmp_path / "run", tasks=6, repeats=4, agents=("alpha", "beta"))
    run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts)
    profile = tmp_path / "run" / "rollouts_reward_profiling.jsonl"
    text = run_ngrp("stats", profile, "--rollouts", rollouts).stdout
    marker = "why they fail: "
    commands = [line.split(marker, 1)[1] for line in text.splitlines() if marker in line]
    assert commands
    for command in commands:
        argv = shlex.split(command)[1:]  # without "ngrp"
        agent = argv[argv.index("--agent") + 1]
        tasks = {int(argv[i + 1]) for i, word in enumerate(argv) if word == "--task"}
        shown = [json.loads(line) for line in run_ngrp(*argv, "--json").stdout.splitlines()]
        assert all(r["agent"] == agent and r["_ng_task_index"] in tasks for r in shown)
        assert all(r["reward"] < 1 for r in shown)
