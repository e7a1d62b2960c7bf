"""What profile, stats, compare and curriculum say about an adaptive run: its benchmark-level estimates are
exactly those of a fixed-R run of the same first-round rollouts; per-task rows and decisions use every
repeat. Also the usage errors of `collect --adaptive` (refused before any request)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from run_helpers import reward_of, write_run

from ngrp_lib.adaptive.rounds import AdaptiveSettings, summarize
from ngrp_lib.artifacts import jsonl, schemas
from ngrp_lib.stats.adaptive import Rule, Schedule, fixed_draws, play

R, N, TASKS = 2, 8, 12
SETTINGS = AdaptiveSettings(Rule("learnable"), Schedule(R, N))


def _keep(folder: Path, source: Path, name: str, keep) -> Path:
    rows = [r.data for r in jsonl.iter_rows(source / name) if keep(r.data)]
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder / name


# the rounds, and how the user gave them (replay 2026-12-05 W3: `--rounds 2` echoed as given, not as
# `--first-round 2`; neither option given: the default, said so)
SCHEDULES = {"R=2": ((R,), "--first-round 2"), "R=1": ((1,), "--first-round 1"),
             "1,1,2,4": ((1, 1, 2, 4), "--rounds 1,1,2,4"), "rounds 2": ((R,), "--rounds 2"),
             "default": ((R,), None)}  # fmt: skip


@pytest.fixture(params=list(SCHEDULES))
def runs(tmp_path, request):
    """`full`: fixed N for every task; `adaptive`: what learnable (R=2, or 1, or growing rounds 1,1,2,4;
    N=8) keeps of the same rows, with its manifest; `fixed_r`: the repeats every task got whatever happened
    (R, or 2 for R=1 and 1,1,2,4: learnable cannot settle on one draw), no manifest."""
    rounds, given = SCHEDULES[request.param]
    settings = AdaptiveSettings(Rule("learnable"), Schedule(rounds[0], N, rounds[1:]), rounds_option=given)
    flag = given or f"rounds of {rounds[0]}, the default"  # as every command echoes it
    fixed = fixed_draws(settings.rule, settings.schedule)
    assert fixed == max(rounds[0], 2)
    full = tmp_path / "full"
    write_run(full, tasks=TASKS, repeats=N)
    states = {
        t: play(settings.rule, settings.schedule, [reward_of(t, r) >= 1 for r in range(N)])
        for t in range(TASKS)
    }
    folders = {}
    for name, keep in (
        ("adaptive", lambda row: row["_ng_rollout_index"] < states[row["_ng_task_index"]].size),
        ("fixed_r", lambda row: row["_ng_rollout_index"] < fixed),
    ):
        folder = tmp_path / name
        folder.mkdir()
        for file in ("rollouts_materialized_inputs.jsonl", "rollouts.jsonl"):
            _keep(folder, full, file, keep)
        folders[name] = folder
    manifest = {
        "tool": {"name": "ngrp", "version": "test"},
        "created_at": "2026-12-01T00:00:00Z",
        "identity": {"materialize": {"num_repeats": N}, "adaptive": settings.to_json()},
        "adaptive": summarize(states, settings),
    }
    schemas.validator("run_manifest").validate(manifest)
    (folders["adaptive"] / "rollouts_run_manifest.json").write_text(json.dumps(manifest))
    return {"full": full, **folders, "states": states, "fixed": fixed, "flag": flag}


def _profile(run_ngrp, folder: Path) -> dict:
    proc = run_ngrp("profile", "--inputs", folder / "rollouts_materialized_inputs.jsonl",
                    "--rollouts", folder / "rollouts.jsonl", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _stats(run_ngrp, folder: Path, *extra) -> dict:
    proc = run_ngrp(
        "stats", folder / "rollouts_reward_profiling.jsonl", "--json", "--group-by", "level", *extra
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_runs_differ_as_intended(runs):
    sizes = Counter(s.size for s in runs["states"].values())
    assert sizes[N] >= 2 and sum(n for size, n in sizes.items() if size < N) >= 4  # some stop early, some not


def test_first_round_estimates_equal_a_fixed_r_profile_of_the_same_rollouts(runs, run_ngrp):
    adaptive_profile = _profile(run_ngrp, runs["adaptive"])
    _profile(run_ngrp, runs["fixed_r"])
    schemas.validator("profile_result").validate(adaptive_profile)
    ours, fixed = _stats(run_ngrp, runs["adaptive"]), _stats(run_ngrp, runs["fixed_r"])
    schemas.validator("stats_result").validate(ours)
    assert ours["overall"] == fixed["overall"]  # every estimate, interval and count, bootstrap included
    assert ours["groups"] == fixed["groups"]
    assert fixed["adaptive"] is None and ours["adaptive"]["rule"] == "learnable"
    assert ours["adaptive"]["schedule"] == runs["flag"]  # the rounds as the user gave them, not only R
    sizes = runs["flag"].split()[1 if runs["flag"].startswith("--") else 2].strip(",").split(",")
    assert ours["adaptive"]["rounds"] == [int(n) for n in sizes]
    assert any(f"adaptive run (learnable, {runs['flag']}, at most N={N})" in n for n in ours["notes"])
    first = adaptive_profile["adaptive"]["first_round_estimates"]
    headline = fixed["overall"]["mean_reward"]["task_weighted"]
    assert (first["mean_reward"]["value"], first["mean_reward"]["ci_low"]) == (
        headline["value"],
        headline["ci_low"],
    )
    assert first["pass_rate"]["ci_high"] == fixed["overall"]["pass_rate"]["ci_high"]
    assert any("fixed design alone" in w for w in adaptive_profile["warnings"])
    # per-task rows use every repeat, with the run's decision
    per_task = {row["task"]: row for row in ours["per_task"]}
    for task, state in runs["states"].items():
        assert per_task[task]["n"] == state.size
        assert per_task[task]["adaptive_decision"] == state.decision
    assert ours["adaptive"]["rollouts_assigned"] == sum(s.size for s in runs["states"].values())
    assert ours["adaptive"]["rollouts_fixed_n"] == TASKS * N


def test_stats_text_says_adaptive_and_counts_rounds(runs, run_ngrp):
    _profile(run_ngrp, runs["adaptive"])
    proc = run_ngrp("stats", runs["adaptive"] / "rollouts_reward_profiling.jsonl")
    assert proc.returncode == 0, proc.stderr
    settled = Counter(s.rounds for s in runs["states"].values() if s.reason == "settled")
    per_round = ", ".join(f"{r}: {settled[r]}" for r in range(1, 5))
    assert f"tasks settled per round: {per_round}" in proc.stdout
    assert f"estimates above from the fixed design ({runs['fixed']} repeats of every task)" in proc.stdout
    assert f"adaptive run: rule learnable, {runs['flag']}, N={N};" in proc.stdout
    assert "saved)" in proc.stdout


def test_compare_cuts_the_adaptive_side_to_its_first_round(runs, run_ngrp):
    for name in ("adaptive", "fixed_r", "full"):
        _profile(run_ngrp, runs[name])

    def compare(a: str, b: str) -> dict:
        proc = run_ngrp("compare", runs[a] / "rollouts_reward_profiling.jsonl",
                        runs[b] / "rollouts_reward_profiling.jsonl", "--json")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    ours, fixed = compare("adaptive", "full"), compare("fixed_r", "full")
    schemas.validator("compare_result").validate(ours)
    for key in ("n_tasks", "mean_a", "mean_b", "mean_diff", "ci_low", "ci_high", "per_task"):
        assert ours[key] == fixed[key], key
    assert set(ours["adaptive"]) == {"A"} and fixed["adaptive"] == {}
    assert any("compared on its first round only" in n and "B is a fixed-N run" in n for n in ours["notes"])
    assert any(f"A: learnable, {runs['flag']}, fixed {runs['fixed']}" in n for n in ours["notes"])


def test_curriculum_keeps_the_tasks_the_run_found_mixed(runs, run_ngrp, tmp_path):
    _profile(run_ngrp, runs["adaptive"])
    profile = runs["adaptive"] / "rollouts_reward_profiling.jsonl"
    tasks = runs["adaptive"] / "rollouts_materialized_inputs.jsonl"
    out = tmp_path / "picked.jsonl"
    proc = run_ngrp("curriculum", profile, "--tasks", tasks, "-o", out, "--learnable-for", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    schemas.validator("curriculum_result").validate(result)
    mixed = {t for t, s in runs["states"].items() if s.decision == "mixed"}
    assert {r.data["_ng_task_index"] for r in jsonl.iter_rows(out)} == mixed
    assert result["adaptive"]["selected_by"].startswith("the run's per-task decisions")
    text = run_ngrp("curriculum", profile, "--tasks", tasks, "-o", out, "--learnable-for", "8", "--overwrite")
    assert f"adaptive run (rule learnable, {runs['flag']}, N={N}): selected by" in text.stdout, text.stdout
    band = run_ngrp("curriculum", profile, "--tasks", tasks, "-o", out, "--min", "0.2", "--max", "0.8",
                    "--overwrite", "--json")  # fmt: skip
    assert json.loads(band.stdout)["adaptive"]["selected_by"].startswith("pass rates over all repeats")


def test_stats_group_size_follows_the_runs_decisions_as_curriculum_does(runs, run_ngrp, tmp_path):
    """On a learnable run, stats --group-size 8 counts the tasks curriculum --learnable-for 8 keeps (settled
    mixed, some after 2 of 8 repeats) and names the all-fail/all-pass ones; it never asks for more repeats."""
    _profile(run_ngrp, runs["adaptive"])
    profile = runs["adaptive"] / "rollouts_reward_profiling.jsonl"
    proc = run_ngrp("stats", profile, "--group-size", "8")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "kept.jsonl"
    tasks = runs["adaptive"] / "rollouts_materialized_inputs.jsonl"
    picked = run_ngrp("curriculum", profile, "--tasks", tasks, "-o", out, "--learnable-for", "8", "--json")
    kept = {t["task"] for t in json.loads(picked.stdout)["selected_tasks"]}
    decisions = Counter(s.decision for s in runs["states"].values())
    assert kept == {t for t, s in runs["states"].items() if s.decision == "mixed"}
    assert (
        f"GRPO at G=8, by the adaptive run's decisions (every repeat): {len(kept)} of {TASKS} tasks settled "
        f"mixed" in proc.stdout
    )
    assert (
        f"all fail {decisions['all_fail']}, all pass {decisions['all_pass']} (each ran to N={N}"
        in proc.stdout
    )
    for task, state in runs["states"].items():
        named = f"  task {task}: {state.decision.replace('_', ' ')}, " in proc.stdout
        assert named == (state.decision != "mixed"), task
    assert "profile with at least" not in proc.stdout and "not judged" not in proc.stdout


def test_curriculum_answers_which_lines_and_the_benchmark_pass_rate(runs, run_ngrp, tmp_path):
    """The triage answer in one output: the kept lines, flat and sorted, and pass@1 over every task with
    stats' interval, on the fixed design of an adaptive run and on every repeat of a fixed-N one."""
    for name in ("adaptive", "fixed_r"):
        _profile(run_ngrp, runs[name])
    fixed = _stats(run_ngrp, runs["fixed_r"])["overall"]["pass_rate"]
    shown = ("value", "ci_low", "ci_high", "ci_method", "n_tasks", "n_rollouts")
    for name, basis in (
        ("adaptive", f"the first {runs['fixed']} repeats of every task"),
        ("fixed_r", "every repeat"),
    ):
        folder = runs[name]
        inputs = folder / "rollouts_materialized_inputs.jsonl"
        args = ("curriculum", folder / "rollouts_reward_profiling.jsonl", "--tasks", inputs,
                "-o", tmp_path / f"{name}.jsonl", "--learnable-for", "8")  # fmt: skip
        result = json.loads(run_ngrp(*args, "--json").stdout)
        schemas.validator("curriculum_result").validate(result)
        flat = sorted(line for t in result["selected_tasks"] for line in t["source_lines"])
        assert result["selected_lines"] == flat and len(flat) == result["n_written_lines"]
        assert [r.line for r in jsonl.iter_rows(inputs)
                if r.data["_ng_rollout_index"] == 0 and r.data["_ng_task_index"] in
                {t["task"] for t in result["selected_tasks"]}] == flat  # fmt: skip
        p1 = result["pass_at_1"]
        assert {f: p1[f] for f in shown} == {f: fixed[f] for f in shown}, name
        assert basis in p1["stands_on"] and p1["n_tasks"] == TASKS
        text = run_ngrp(*args, "--overwrite").stdout
        assert (
            f"pass@1 (mean pass rate over all {TASKS} profiled tasks, kept or not): {fixed['value']:.4f}"
            in text
        )
        assert f"[{fixed['ci_low']:.4f}, {fixed['ci_high']:.4f}]" in text and basis in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--adaptive", "sometimes"], "is not a rule"),
        (
            ["--adaptive", "learnable", "--first-round", "9"],
            "--first-round must be between 1 and --num-repeats (8)",
        ),
        (["--first-round", "2"], "only apply with --adaptive"),
        (["--rounds", "1,1,2"], "only apply with --adaptive"),
        (["--adaptive", "learnable", "--rounds", "1,0,2"], "--rounds '1,0,2' is not a schedule"),
        (["--adaptive", "learnable", "--rounds", "9,1"], "--first-round must be between 1 and --num-repeats"),
        (["--adaptive", "learnable", "--rounds", "2", "--first-round", "2"], "both give the rounds"),
        (["--pass-threshold", "0.5"], "only apply with --adaptive"),
    ],
)
def test_collect_adaptive_usage_errors(run_ngrp, tmp_path, extra, message):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"responses_create_params": {"input": "hi"}}) + "\n")
    proc = run_ngrp("collect", "--input", tasks, "--output", tmp_path / "out.jsonl", "--num-repeats", "8",
                    "--base-url", "http://127.0.0.1:9/v1", "--model", "m", *extra)  # fmt: skip
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_collect_adaptive_needs_raw_tasks(run_ngrp, tmp_path):
    materialized, _ = write_run(tmp_path, tasks=2, repeats=1, name="given")
    proc = run_ngrp("collect", "--materialized", tmp_path / "given_materialized_inputs.jsonl",
                    "--output", tmp_path / "out.jsonl", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                    "--adaptive", "learnable", "--first-round", "1")  # fmt: skip
    assert proc.returncode == 2 and "--adaptive needs --input" in proc.stderr, proc.stderr


def test_the_resume_command_of_an_adaptive_run_carries_its_rule():
    from ngrp_lib.artifacts.resume import resume_command

    manifest = {
        "input": {"path": "t.jsonl"},
        "rollouts": {"path": "o/r.jsonl"},
        "options": {"api_key_env": "OPENAI_API_KEY"},
        "identity": {
            "shard": None,
            "materialize": {"num_repeats": 16},
            "model": "m",
            "api": "chat",
            "adaptive": {"rule": "band:0.2,0.8", "first_round": 4, "pass_threshold": 0.5},
        },
        "servers": [{"url": "http://127.0.0.1:8000/v1", "model": "m"}],
    }
    assert resume_command(manifest) == (
        "ngrp collect --input t.jsonl --output o/r.jsonl --num-repeats 16 --adaptive band:0.2,0.8"
        " --first-round 4 --pass-threshold 0.5 --base-url http://127.0.0.1:8000/v1 --model m --resume"
    )
    manifest["identity"]["adaptive"] = {"rule": "learnable", "first_round": 1, "rounds": [1, 1, 2, 4, 8]}
    assert resume_command(manifest) == (
        "ngrp collect --input t.jsonl --output o/r.jsonl --num-repeats 16 --adaptive learnable"
        " --rounds 1,1,2,4,8 --base-url http://127.0.0.1:8000/v1 --model m --resume"
    )


@pytest.mark.parametrize("rule", ["band:0.2,0.8", "band:0.2,0.8,0.01"])
def test_curriculum_band_selection_reads_a_band_rule_with_or_without_its_risk(rule):
    from types import SimpleNamespace

    from ngrp_lib.stats.adaptive_run import AdaptiveRun, decision_selector

    states = {"0": {"decision": "inside"}, "1": {"decision": "below"}, "2": {"decision": None}}
    run = AdaptiveRun("m.json", rule, 4, 16, {"task_states": states})
    keep = decision_selector(run, SimpleNamespace(mode="band", min_rate=0.2, max_rate=0.8))
    assert keep is not None and [keep(t) for t in (0, 1, 2)] == [True, False, None]
    other = SimpleNamespace(mode="band", min_rate=0.1, max_rate=0.8)  # another band: rates decide
    assert decision_selector(run, other) is None


@pytest.mark.parametrize(
    "block",
    [
        {"rule": "band:0.2", "first_round": 4},  # not a rule
        {"rule": "band:0.2,0.8"},  # no first_round
        {"rule": "band:0.2,0.8", "first_round": "four"},
        {"rule": "learnable", "first_round": 1, "rounds": "1,1,2"},  # rounds not a list of sizes
        {"rule": "learnable", "first_round": 2, "rounds": [1, 1, 2]},  # rounds not beginning with R
        {"rule": "learnable", "first_round": 2, "pass_threshold": "1"},  # a threshold that is text
        {"rule": "band:0.2,0.8", "first_round": 4, "extra": 1, "task_states": None},
    ],
)
def test_a_malformed_adaptive_manifest_is_an_input_error_naming_it(tmp_path, block):
    """stats, compare, profile and curriculum read the adaptive block of the manifest beside the rollouts:
    a damaged one is a one-line input error naming the file (exit 3), not a traceback or a usage error
    about an --adaptive option the command never had."""
    from types import SimpleNamespace

    from ngrp_lib.artifacts.names import manifest_path_for
    from ngrp_lib.errors import InputError
    from ngrp_lib.stats.adaptive_run import decision_selector, find_adaptive

    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("")
    manifest = manifest_path_for(rollouts)
    adaptive = {"task_states": {"x": {"decision": "inside"}}} if "extra" in block else {}
    manifest.write_text(json.dumps({"identity": {"adaptive": block, "materialize": {"num_repeats": 8}},
                                    "adaptive": adaptive}))  # fmt: skip
    with pytest.raises(InputError, match=str(manifest.name)):
        run = find_adaptive(None, rollouts)
        decision_selector(run, SimpleNamespace(mode="band", min_rate=0.2, max_rate=0.8))


def test_cost_per_informative_task_takes_tokens_from_the_first_round_as_p(runs, run_ngrp):
    # P(informative) stands on the first round (R = 2 repeats of every task), so the tokens per rollout it
    # divides must too: G x (first-round tokens / first-round rows) / P. Worked from the rows' usage: 30
    # input + 50 + 10 r + t output tokens (run_helpers), r < R. All rounds would weigh later, longer rows.
    _profile(run_ngrp, runs["adaptive"])
    ours = _stats(run_ngrp, runs["adaptive"])
    rows = [r.data for r in jsonl.iter_rows(runs["adaptive"] / "rollouts.jsonl")]
    first = [r for r in rows if r["_ng_rollout_index"] < runs["fixed"]]
    per_first = sum(30 + 50 + 10 * r["_ng_rollout_index"] + r["_ng_task_index"] for r in first) / len(first)
    per_all = sum(30 + 50 + 10 * r["_ng_rollout_index"] + r["_ng_task_index"] for r in rows) / len(rows)
    assert len(first) == TASKS * runs["fixed"] and per_all > per_first * 1.02
    cost = ours["cost"]
    assert cost["tokens_per_rollout"] == pytest.approx(round(per_all, 1))
    assert cost["informative_tokens_from"] == "the first round's rows (as P(informative))"
    p = {g["group_size"]: g["value"] for g in ours["overall"]["grpo_informative"]}
    for entry in cost["tokens_per_informative_task"]:
        g = entry["group_size"]
        assert entry["tokens"] == pytest.approx(round(g * per_first / p[g], 1))


def test_cost_per_kept_task_comes_from_the_runs_decisions(runs, run_ngrp):
    """P(informative at 8) from a first round of 2 repeats is undefined, so the cost per GRPO-informative
    task at G=8 cannot come from it; the run's decisions give it: every round's tokens over the tasks it
    settled mixed (what curriculum --learnable-for 8 keeps). Worked from the rows' usage (run_helpers:
    30 input + 50 + 10 r + t output tokens)."""
    _profile(run_ngrp, runs["adaptive"])
    profile = runs["adaptive"] / "rollouts_reward_profiling.jsonl"
    ours = _stats(run_ngrp, runs["adaptive"], "--group-size", "8")
    rows = [r.data for r in jsonl.iter_rows(runs["adaptive"] / "rollouts.jsonl")]
    total = sum(30 + 50 + 10 * r["_ng_rollout_index"] + r["_ng_task_index"] for r in rows)
    mixed = sum(s.decision == "mixed" for s in runs["states"].values())
    assert 0 < mixed < TASKS
    kept = ours["cost"]["tokens_per_kept_task"]
    assert kept == {
        "tokens": pytest.approx(round(total / mixed, 1)),
        "n_tasks": mixed,
        "decision": "mixed",
        "tokens_total": total,
        "basis": "the adaptive run's decisions (every repeat): every rollout's tokens over the tasks "
        "decided mixed",
    }
    at8 = [e for e in ours["cost"]["tokens_per_informative_task"] if e["group_size"] == 8]
    assert at8 == [{"group_size": 8, "tokens": None}], "the first round cannot give it: n/a, never 0"
    text = run_ngrp("stats", profile, "--group-size", "8").stdout
    line = next(x for x in text.splitlines() if x.startswith("cost ("))
    assert (
        f"per GRPO-informative task (settled mixed) by the adaptive run's decisions {total / mixed:,.0f} "
        f"({total:,} tokens, every round, over {mixed} tasks)" in line
    )
    assert " - at G=8" not in line and "at G=8" not in line
    # the same figure as a fixed-N run's at G = N: there P(informative at N) of a task is 1 when its N
    # repeats mixed, so G x tokens per rollout / mean P is the run's tokens over its mixed tasks; the
    # learnable run decided the same tasks mixed (fixed N's decision on the same draws), for fewer tokens
    _profile(run_ngrp, runs["full"])
    full = _stats(run_ngrp, runs["full"], "--group-size", "8")["cost"]
    full_rows = [r.data for r in jsonl.iter_rows(runs["full"] / "rollouts.jsonl")]
    full_total = sum(30 + 50 + 10 * r["_ng_rollout_index"] + r["_ng_task_index"] for r in full_rows)
    at8 = next(e for e in full["tokens_per_informative_task"] if e["group_size"] == 8)
    assert at8["tokens"] == pytest.approx(round(full_total / mixed, 1))
    assert full["tokens_per_kept_task"] is None and kept["tokens"] < at8["tokens"]


@pytest.mark.parametrize(
    "rule, kept, words",
    [
        ("learnable", "mixed", "per GRPO-informative task (settled mixed) by the adaptive run's decisions"),
        ("band:0.2,0.8", "inside", "per task kept (decided inside the band) by the adaptive run's decisions"),
        ("width:0.3", None, None),
    ],
)
def test_each_rule_keeps_by_its_own_decision_and_the_cost_line_says_which(rule, kept, words):
    """A rule's kept tasks (`kept_decision`), the ones curriculum keeps by the run's decisions; width keeps
    none, and then an n/a figure stays n/a, said so, never a dash standing for a number."""
    from ngrp_lib.stats.adaptive_run import AdaptiveRun, kept_decision
    from ngrp_lib.stats.cost import FIRST_ROUND, cost_lines

    assert kept_decision(rule) == kept
    states = {str(t): {"decision": d} for t, d in enumerate(["mixed", "inside", "all_fail", "inside", None])}
    run = AdaptiveRun("m.json", rule, 2, 8, {"task_states": states})
    want = None if kept is None else {"decision": kept, "n_tasks": 1 if kept == "mixed" else 2}
    assert run.kept() == want
    tokens = {"rows": 40, "rows_without_usage": 0, "input_tokens": 1000, "output_tokens": 3000}
    per_kept = None
    if want is not None:
        n = want["n_tasks"]
        per_kept = {"tokens": 4000 / n, "n_tasks": n, "decision": kept, "tokens_total": 4000}
    cost = {
        "tokens": tokens,
        "tokens_per_rollout": 100.0,
        "tokens_per_success": 200.0,
        "rollouts_with_usage": 40,
        "informative_tokens_from": FIRST_ROUND,
        "tokens_per_kept_task": per_kept,
        "tokens_per_informative_task": [
            {"group_size": 2, "tokens": 300.0},
            {"group_size": 8, "tokens": None},
        ],
    }
    line = next(x for x in cost_lines(cost) if x.startswith("cost ("))
    assert "from the first round's P(informative) 300 at G=2" in line and " - at G=8" not in line
    if words is None:
        assert "n/a at G=8 (fewer first-round repeats)" in line
    else:
        n = want["n_tasks"]
        assert f"{words} {4000 / n:,.0f} (4,000 tokens, every round, over {n} tasks)" in line
        assert "n/a" not in line


def test_p_informative_at_n_of_a_learnable_run_comes_from_its_decisions(runs, run_ngrp):
    """A first round of 2 cannot give P(informative at 8); the decisions can: a task settled mixed would
    have mixed in 8 draws and one that ran to 8 unmixed did not, so the mean of those 0/1 values is fixed
    N's own estimate on the same draws: equal, with its interval, to stats on the fixed-N run of them."""
    for name in ("adaptive", "full"):
        _profile(run_ngrp, runs[name])
    ours = _stats(run_ngrp, runs["adaptive"], "--group-size", "8")
    fixed = _stats(run_ngrp, runs["full"], "--group-size", "8")
    schemas.validator("stats_result").validate(ours)
    mixed = sum(s.decision == "mixed" for s in runs["states"].values())
    at8, want = ({e["group_size"]: e for e in r["overall"]["grpo_informative"]}[8] for r in (ours, fixed))
    assert at8["from_decisions"] is True and want["from_decisions"] is False
    assert at8["value"] == pytest.approx(mixed / TASKS) and at8["n_tasks"] == TASKS
    for key in ("value", "ci_low", "ci_high", "ci_method", "t_ci_low", "t_ci_high", "n_tasks"):
        assert at8[key] == pytest.approx(want[key]), key
    assert at8["n_rollouts"] == sum(s.size for s in runs["states"].values())  # the rollouts the run used
    for group in ours["groups"]:  # each --group-by group from its own tasks' decisions
        g8 = {e["group_size"]: e for e in group["grpo_informative"]}[8]
        assert g8["from_decisions"] is True and g8["n_tasks"] == group["n_tasks"]
    text = run_ngrp("stats", runs["adaptive"] / "rollouts_reward_profiling.jsonl", "--group-size", "8").stdout
    assert f"G=8: {mixed / TASKS:.3f} (n={TASKS}, by the adaptive run's decisions)" in text
    assert "n/a at G=8" not in text


def test_compare_takes_p_informative_at_n_of_a_learnable_side_from_its_decisions(runs, run_ngrp):
    """The fixed-N run against the learnable run of the same draws at G=8: the adaptive side's first round
    cannot give P(informative at 8), its decisions can, and they are fixed N's on the same draws: so B - A
    is 0 on every task (one set of draws, two designs)."""
    for name in ("adaptive", "full"):
        _profile(run_ngrp, runs[name])
    profiles = [runs[n] / "rollouts_reward_profiling.jsonl" for n in ("full", "adaptive")]
    res = run_ngrp("compare", *profiles, "--group-size", "8", "--json")
    out = json.loads(res.stdout)
    schemas.validator("compare_result").validate(out)
    mixed = sum(s.decision == "mixed" for s in runs["states"].values())
    (at8,) = [e for e in out["grpo_informative"] if e["k"] == 8]
    assert at8["from_decisions"] == ["B"] and at8["n_tasks"] == TASKS
    assert at8["mean_a"] == at8["mean_b"] == pytest.approx(mixed / TASKS) and at8["mean_diff"] == 0
    assert not any("not compared for G=8" in n for n in out["notes"])
    text = run_ngrp("compare", *profiles, "--group-size", "8").stdout
    assert "; B by the adaptive run's decisions)" in text


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda m: m["adaptive"].update(task_states=[1]), "adaptive.task_states is [1], not an object"),
        (lambda m: m["adaptive"].update(task_states="x"), "adaptive.task_states is 'x'"),
        (lambda m: m["adaptive"]["task_states"].update({"0": "x"}), "adaptive.task_states.0 is 'x'"),
        (lambda m: m["adaptive"]["task_states"].update({"²": {}}), "the key '²', not a task index"),
        (lambda m: m["adaptive"]["task_states"]["0"].update(repeats=True), "task_states.0.repeats is True"),
        (lambda m: m["adaptive"]["task_states"]["0"].update(repeats=-1), "task_states.0.repeats is -1"),
        (lambda m: m["adaptive"]["task_states"]["0"].update(reason=["settled"]), "task_states.0.reason is"),
        (lambda m: m["adaptive"]["task_states"]["0"].update(decision=1), "task_states.0.decision is 1"),
        (lambda m: m["adaptive"].update(tasks_by_reason=[]), "adaptive.tasks_by_reason is []"),
        (lambda m: m["adaptive"].update(settled_per_round="1: 2"), "adaptive.settled_per_round is '1: 2'"),
        (lambda m: m["adaptive"].update(rollouts_assigned="x"), "adaptive.rollouts_assigned is 'x'"),
        (lambda m: m["adaptive"].update(rollouts_fixed_n=1.5), "adaptive.rollouts_fixed_n is 1.5"),
        (lambda m: m["identity"].update(materialize="x"), "identity.materialize is 'x', not an object"),
        (lambda m: m["identity"]["materialize"].update(num_repeats=1), "num_repeats is 1, less than"),
    ],
)
def test_a_malformed_progress_block_is_an_input_error_naming_the_key(tmp_path, edit, named):
    """Every reader of the manifest's `adaptive` block (check's replay, stats, compare, the report,
    curriculum) goes through adaptive_in: a value of another shape than collect writes is one InputError
    naming the key, never an AttributeError or TypeError from deep inside a reader (hostile pass 6: a list
    for task_states crashed check, stats and compare; a text rollouts_assigned crashed stats)."""
    from ngrp_lib.errors import InputError
    from ngrp_lib.stats.adaptive_run import adaptive_in

    manifest = {
        "identity": {"adaptive": {"rule": "learnable", "first_round": 2}, "materialize": {"num_repeats": 8}},
        "adaptive": {
            "task_states": {"0": {"repeats": 2, "reason": "settled", "decision": "mixed"}},
            "tasks_by_reason": {"settled": 1},
            "settled_per_round": {"1": 1},
            "rollouts_assigned": 2,
            "rollouts_fixed_n": 8,
        },
    }
    run = adaptive_in(manifest, tmp_path / "m.json")  # as collect writes it: read, summarized
    assert run is not None and run.summary()["rollouts_saved_share"] == 0.75
    edit(manifest)
    with pytest.raises(InputError, match="m.json") as caught:
        adaptive_in(manifest, tmp_path / "m.json")
    assert named in str(caught.value)


@pytest.mark.parametrize("key", ["tasks_by_reason", "settled_per_round", "task_states"])
def test_a_null_progress_key_reads_as_absent(tmp_path, key):
    from ngrp_lib.stats.adaptive_run import adaptive_in

    manifest = {"identity": {"adaptive": {"rule": "learnable", "first_round": 2}}, "adaptive": {key: None}}
    run = adaptive_in(manifest, tmp_path / "m.json")
    assert run is not None and run.summary()[key if key != "task_states" else "decisions"] == {}
