"""`ngrp curriculum`: Gym's task numbering of original lines, selection rules, refusals, exit codes."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_helpers import validated
from stats_helpers import profile_row, write_profile

from ngrp_lib.errors import FindingsError, InputError, UsageError
from ngrp_lib.stats.curriculum import RateOptions, Selection, export_curriculum, map_task_lines


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_mapping_matches_gym_dedup_demo(golden):
    # Gym's own materialization (dedup_demo): lines 1 and 3 are byte-identical -> task 0; line 2 -> task 1;
    # line 4 is the same JSON formatted differently -> task 2.
    lines = map_task_lines(golden / "raw_inputs_with_duplicate_line.jsonl")
    assert {t: [r.line for r in rows] for t, rows in lines.rows.items()} == {0: [1, 3], 1: [2], 2: [4]}
    assert lines.n_duplicate_lines == 1
    materialized = read(golden / "dedup_demo" / "rollouts_materialized_inputs.jsonl")
    for row in materialized:
        original = lines.rows[row["_ng_task_index"]][0].data
        assert row["expected_answer"] == original["expected_answer"]
        assert row["responses_create_params"] == original["responses_create_params"]


def test_unterminated_last_line_is_a_different_task(tmp_path):
    line = b'{"q": 1}'
    (tmp_path / "t.jsonl").write_bytes(line + b"\n" + line)
    assert sorted(map_task_lines(tmp_path / "t.jsonl").rows) == [0, 1]


def test_explicit_indices_kept_and_ambiguity_refused(tmp_path):
    ok = tmp_path / "ok.jsonl"
    ok.write_text('{"q": 1, "_ng_task_index": 42}\n{"q": 1, "_ng_task_index": 99}\n')
    assert sorted(map_task_lines(ok).rows) == [42, 99]
    clash = tmp_path / "clash.jsonl"
    clash.write_text('{"q": 1, "_ng_task_index": 7}\n{"q": 2, "_ng_task_index": 7}\n')
    with pytest.raises(FindingsError, match="same _ng_task_index 7"):
        map_task_lines(clash)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"q": 1}\n{"q": 2, "_ng_task_index": 0}\n')
    with pytest.raises(FindingsError, match="both written in a row and assigned by position"):
        map_task_lines(mixed)


def tasks_file(tmp_path, n):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        "".join(json.dumps({"q": f"question {i}", "expected_answer": str(i)}) + "\n" for i in range(n))
    )
    return path


def test_band_selection_writes_original_rows_with_rate(tmp_path):
    tasks = tasks_file(tmp_path, 4)
    prof = write_profile(
        tmp_path / "p.jsonl",
        [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
        sample=[{"q": f"question {i}", "expected_answer": str(i)} for i in range(4)],
    )
    out = tmp_path / "out.jsonl"
    r = export_curriculum(prof, tasks, out, Selection("band", 0.1, 0.9), RateOptions(key="pr"))
    assert r.n_selected == 2 and r.bands == {"all_fail": 1, "mixed": 2, "all_pass": 1}
    assert read(out) == [
        {"q": "question 1", "expected_answer": "1", "pr": 0.25, "pr_n": 4},
        {"q": "question 2", "expected_answer": "2", "pr": 0.75, "pr_n": 4},
    ]


def test_learnable_selection_and_undetermined(tmp_path):
    tasks = tasks_file(tmp_path, 3)
    # task 0: 2/4 -> P(informative | G=2) = 1 - (1 + 1)/6 = 2/3; task 1: 1/4 -> 1 - 3/6 = 1/2; task 2: n=1 < G
    prof = write_profile(tmp_path / "p.jsonl", [[1, 1, 0, 0], [1, 0, 0, 0], [1]])
    r = export_curriculum(
        prof, tasks, tmp_path / "o.jsonl", Selection("learnable", group_size=2, min_informative=0.6)
    )
    assert r.n_selected == 1 and r.n_undetermined == 1
    assert read(tmp_path / "o.jsonl")[0]["q"] == "question 0"


def test_refusals(tmp_path):
    tasks = tasks_file(tmp_path, 2)
    out = tmp_path / "o.jsonl"
    wrong = write_profile(
        tmp_path / "w.jsonl", [[1, 0], [0, 1]], sample=[{"q": "other"}, {"q": "question 1"}]
    )
    with pytest.raises(FindingsError, match="differs"):
        export_curriculum(wrong, tasks, out, Selection("band", 0.0, 1.0))
    extra = write_profile(tmp_path / "x.jsonl", [[1, 0], [0, 1], [1, 1]])
    with pytest.raises(FindingsError, match="no line"):
        export_curriculum(extra, tasks, out, Selection("band", 0.0, 1.0))
    shaped = write_profile(tmp_path / "s.jsonl", [[0.2, 0.9], [0.0, 1.0]])
    with pytest.raises(UsageError, match="threshold"):
        export_curriculum(shaped, tasks, out, Selection("band", 0.0, 1.0))
    r = export_curriculum(shaped, tasks, out, Selection("band", 0.4, 0.6), RateOptions(pass_threshold=0.5))
    assert r.n_selected == 2
    fan = tmp_path / "fan.jsonl"
    fan.write_text("".join(json.dumps(profile_row(0, [1, 0], agent=a)) + "\n" for a in ("a", "b")))
    with pytest.raises(UsageError, match="--agent"):
        export_curriculum(fan, tasks, tmp_path / "f.jsonl", Selection("band", 0.0, 1.0))
    r = export_curriculum(
        fan, tasks, tmp_path / "f.jsonl", Selection("band", 0.0, 1.0), RateOptions(agent="b")
    )
    assert r.n_selected == 1 and r.n_not_profiled == 1


def test_cli_curriculum_exit_codes(run_ngrp, tmp_path, golden):
    shutil.copy(golden / "raw_inputs.jsonl", tmp_path / "raw.jsonl")
    prof = golden / "case_complete" / "rollouts_reward_profiling.jsonl"
    args = ["curriculum", prof, "--tasks", tmp_path / "raw.jsonl", "-o", tmp_path / "o.jsonl"]
    res = run_ngrp(*args, "--min", "0.5", "--pass-threshold", "0.5", "--json")
    assert res.returncode == 0, res.stderr
    payload = json.loads(res.stdout)
    validated(payload, "curriculum_result")
    assert payload["n_selected"] == 2 and payload["n_written_lines"] == 2
    again = run_ngrp(*args, "--min", "0.5", "--pass-threshold", "0.5")
    assert again.returncode == 2 and "--overwrite" in again.stderr
    assert run_ngrp(*args, "--min", "0.5", "--pass-threshold", "0.5", "--overwrite").returncode == 0
    assert run_ngrp(*args, "--overwrite").returncode == 2  # no selection given
    assert run_ngrp(*args, "--min", "0.1", "--learnable-for", "4", "--overwrite").returncode == 2
    for size in ("0", "1"):  # 0 once slipped through as "no --learnable-for": every task kept
        zero = run_ngrp(*args, "--learnable-for", size, "--pass-threshold", "0.5", "--overwrite")
        assert zero.returncode == 2 and "at least 2" in zero.stderr
    assert run_ngrp(*args, "--min", "0.1", "--overwrite").returncode == 2  # rewards not binary
    (tmp_path / "bad.jsonl").write_text('{"q": 1}\n{"q": 2, "_ng_task_index": 0}\n')
    bad = ["curriculum", prof, "--tasks", tmp_path / "bad.jsonl", "-o", tmp_path / "b.jsonl"]
    res = run_ngrp(*bad, "--min", "0.1", "--pass-threshold", "0.5")
    assert res.returncode == 1 and "ambiguous" in res.stderr
    assert run_ngrp("curriculum", "--help").stdout.count("Example:") == 1


def test_cli_learnable_for_min_informative_and_key(run_ngrp, tmp_path):
    tasks = tasks_file(tmp_path, 3)
    # P(informative | G=2): task 0 (2/4) = 2/3, task 1 (1/4) = 1/2, task 2 (n=1 < G) undetermined
    prof = write_profile(tmp_path / "p.jsonl", [[1, 1, 0, 0], [1, 0, 0, 0], [1]])
    args = ["curriculum", prof, "--tasks", tasks, "--learnable-for", "2", "--json", "--overwrite"]
    strict = run_ngrp(*args, "-o", tmp_path / "a.jsonl", "--min-informative", "0.6")
    assert strict.returncode == 0, strict.stderr
    assert json.loads(strict.stdout)["n_selected"] == 1
    assert [r["q"] for r in read(tmp_path / "a.jsonl")] == ["question 0"]
    loose = run_ngrp(*args, "-o", tmp_path / "b.jsonl", "--min-informative", "0.5", "--key", "pr")
    assert json.loads(loose.stdout)["n_selected"] == 2
    rows = read(tmp_path / "b.jsonl")
    assert [(r["q"], r["pr"], r["pr_n"]) for r in rows] == [("question 0", 0.5, 4), ("question 1", 0.25, 4)]
    assert run_ngrp(*args, "-o", tmp_path / "c.jsonl", "--min-informative", "1.5").returncode == 2


def _materialize_seeded(run_ngrp, tasks, inputs, repeats):
    """`ngrp materialize --seed-per-repeat` for agent "a": each repeat's extra_body differs by its seed."""
    made = run_ngrp(
        "materialize", "--input", tasks, "--output", inputs, "--num-repeats", str(repeats), "--agent", "a",
        "--seed-per-repeat",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr


def test_materialized_with_seed_per_repeat_drops_only_the_seed(run_ngrp, tmp_path):
    """--seed-per-repeat writes a different metadata.extra_body per repeat: the task row taken back drops
    that one field and keeps the rest of metadata (a user's own keys) and every other field."""
    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {"responses_create_params": {"input": f"q{i}", "metadata": {"topic": f"t{i}"}}, "level": i}
        for i in range(3)
    ]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    inputs = tmp_path / "rollouts_materialized_inputs.jsonl"
    _materialize_seeded(run_ngrp, tasks, inputs, 4)
    mapped = map_task_lines(inputs)
    assert mapped.kind == "materialized"
    assert mapped.dropped_fields == ["responses_create_params.metadata.extra_body"]
    for i in range(3):
        (row,) = mapped.rows[i]
        assert row.data == {
            "responses_create_params": {"input": f"q{i}", "metadata": {"topic": f"t{i}"}},
            "level": i,
            "agent_ref": {"name": "a"},
            "_ng_task_index": i,
        }


def test_materialized_fields_differing_at_depth_and_an_emptied_object(tmp_path):
    """What differs is dropped at the deepest level; an object left empty by it goes too, an object
    that was empty in every repeat stays."""
    inputs = tmp_path / "m.jsonl"
    rows = [
        {"_ng_task_index": 0, "_ng_rollout_index": r, "a": {"b": {"c": r, "d": 1}, "e": {"f": r}}, "g": {}}
        for r in range(2)
    ]
    inputs.write_text("".join(json.dumps(x) + "\n" for x in rows))
    mapped = map_task_lines(inputs)
    assert mapped.dropped_fields == ["a.b.c", "a.e.f"]
    assert mapped.rows[0][0].data == {"_ng_task_index": 0, "a": {"b": {"d": 1}}, "g": {}}


def test_materialized_row_without_integer_identity_is_an_input_error(run_ngrp, tmp_path):
    inputs = tmp_path / "m.jsonl"
    good = {"_ng_task_index": 0, "_ng_rollout_index": 0, "x": 1}
    bad = {"_ng_task_index": "1", "_ng_rollout_index": 0, "x": 2}
    inputs.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(InputError) as err:
        map_task_lines(inputs)
    assert "m.jsonl:2" in str(err.value) and "_ng_task_index" in str(err.value)
    profile = write_profile(tmp_path / "p.jsonl", [[1, 0]])
    res = run_ngrp("curriculum", profile, "--tasks", inputs, "-o", tmp_path / "o.jsonl", "--min", "0")
    assert res.returncode == 3 and "m.jsonl:2" in res.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_materialized_seed_inside_the_tasks_own_extra_body_drops_only_the_seed(run_ngrp, tmp_path):
    """A task with its own extra_body ({"top_k": 5}): --seed-per-repeat adds "seed" inside that JSON
    string; taken back, the row keeps top_k and loses only the seed."""
    tasks = tmp_path / "tasks.jsonl"
    params = {"input": "q", "metadata": {"extra_body": json.dumps({"top_k": 5}), "tag": "x"}}
    tasks.write_text(json.dumps({"responses_create_params": params}) + "\n")
    inputs = tmp_path / "m.jsonl"
    _materialize_seeded(run_ngrp, tasks, inputs, 3)
    mapped = map_task_lines(inputs)
    assert mapped.dropped_fields == ["responses_create_params.metadata.extra_body.seed"]
    (row,) = mapped.rows[0]
    metadata = row.data["responses_create_params"]["metadata"]
    assert json.loads(metadata["extra_body"]) == {"top_k": 5} and metadata["tag"] == "x"
