"""Gym 0.7.0's field rules, hand-worked: which fields are profiled, in which order, and who wins a clash."""

from __future__ import annotations

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ngrp_lib.profile.dataset import numbers, offsets
from ngrp_lib.profile.infos import rollout_infos
from ngrp_lib.profile.records import FLOAT, INT, ResultStore, run_labels


class Kept:
    """One rollout as the store keeps it: its plan's stats (names and float64 values) and its rollout_info,
    read back through the same offsets and writer the profile rows use."""

    def __init__(self, row, task, rollout, null_policy):
        store = ResultStore(null_policy)
        store.add(row, task, rollout)
        plan = store.plans[store.plan[0]]
        floats, ints = numbers(store, "floats", "float64"), numbers(store, "ints")
        source = {FLOAT: floats, INT: ints}
        self.masked, self.reward_state = plan.masked, plan.reward_state
        self.names = plan.names
        self.values = tuple(float(source[kind][k]) if kind in source else 0.0 for _, kind, k in plan.stats)
        self.info = None if plan.masked else rollout_infos(store, offsets(store), np.array([0]))[0]


def result_record(row, task, rollout, null_policy):
    return Kept(row, task, rollout, null_policy)


def _row(**extra):
    row = {
        "response": {"usage": {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14, "x": {"n": 1}}},
        "reward": 1.0,
        "is_correct": True,
        "note": "text",
        "_ng_task_index": 3,
        "_ng_rollout_index": 1,
    }
    row.update(extra)
    return row


def test_stats_fields_follow_result_then_usage_order_and_bools_count():
    rec = result_record(_row(), 3, 1, "exclude")
    assert rec.names == ("reward", "is_correct", "input_tokens", "output_tokens", "total_tokens")
    assert [float(v) for v in rec.values] == [1.0, 1.0, 5.0, 9.0, 14.0]
    info = orjson.loads(rec.info)
    assert list(info) == ["rollout_id", "_ng_task_index", "_ng_rollout_index", "reward", "input_tokens",
                          "output_tokens", "total_tokens", "is_correct"]  # fmt: skip
    assert info["rollout_id"] == "3:1" and info["is_correct"] == 1


def test_name_clash_usage_wins_stats_result_wins_info():
    rec = result_record(_row(output_tokens=7), 3, 1, "exclude")
    stats = dict(zip(rec.names, rec.values, strict=True))
    assert stats["output_tokens"] == 9  # `result | usage`
    assert rec.names.index("output_tokens") == 2  # ...at the result key's position
    assert orjson.loads(rec.info)["output_tokens"] == 7  # rollout_info: result overwrites usage
    # a string in usage hides the result's number from the stats but not from rollout_info
    hidden = result_record(_row(judge=4.0, response={"usage": {"judge": "n/a"}}), 3, 1, "exclude")
    assert "judge" not in hidden.names and orjson.loads(hidden.info)["judge"] == 4.0


def test_null_absent_and_masked_rewards():
    null = result_record(_row(reward=None), 3, 1, "exclude")
    assert null.reward_state == "null" and "reward" not in null.names
    assert orjson.loads(null.info)["reward"] is None  # kept in rollout_infos, even when null
    absent = _row()
    del absent["reward"]
    rec = result_record(absent, 3, 1, "zero")
    assert rec.reward_state == "absent" and dict(zip(rec.names, rec.values, strict=True))["reward"] == 0.0
    assert "reward" not in orjson.loads(rec.info)
    assert result_record(_row(mask_sample=True), 3, 1, "exclude").masked
    kept = result_record(_row(mask_sample=False), 3, 1, "exclude")
    assert "mask_sample" not in kept.names and "mask_sample" not in orjson.loads(kept.info)
    assert orjson.loads(kept.info)["reward"] == 1.0


def test_run_labels_like_gym():
    # each run key's agent (of its first row); rows without a run key have no label
    agents = {"env_a": "agent", "env_b": "agent", "solo": "solo"}  # one agent behind two servers
    assert run_labels(agents) == {"env_a": "env_a", "env_b": "env_b", "solo": "solo"}
    assert run_labels({"math_env": "math_agent"}) == {"math_env": "math_agent"}


def _reference_info(row, task, rollout):
    """Gym's rollout_info, written out directly: identity, the reward as it is, then usage numbers, then
    result numbers (result wins a clash, keeping the first position), bools as 0/1."""
    info = {"rollout_id": f"{task}:{rollout}", "_ng_task_index": task, "_ng_rollout_index": rollout}
    if "reward" in row:
        info["reward"] = row["reward"]
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    sources = [usage if isinstance(usage, dict) else {}]
    sources.append({k: v for k, v in row.items() if not k.startswith("_") and k not in _NOT_INFO})
    for source in sources:
        for name, value in source.items():
            if type(value) in (int, float, bool):
                info[name] = int(value) if type(value) is bool else value
    return orjson.dumps(info)


_NOT_INFO = ("reward", "response", "mask_sample")


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            ["reward", "score", "n%d", 'q"x', "ünï", "tokens", "input_tokens", "_hidden", "rollout_id"]
        ),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(2**63), 2**64 - 1),  # the range orjson reads and writes
            st.text(max_size=3),
            st.floats(allow_nan=False, allow_infinity=False),
            st.lists(st.integers(-(2**63), 2**64 - 1), max_size=2),
        ),
    ),
    st.dictionaries(
        st.sampled_from(["input_tokens", "output_tokens", "score", "reward", "_ng_task_index", "x"]),
        st.one_of(
            st.none(), st.booleans(), st.integers(0, 10**6), st.floats(allow_nan=False, allow_infinity=False)
        ),
    ),
    st.integers(0, 10**6),
    st.integers(0, 64),
)
def test_rollout_info_bytes_match_gym_rules(row, usage, task, rollout):  # fmt: skip
    row = {**row, "response": {"usage": usage}}
    for _ in range(2):  # second call: the cached layout and plan
        assert result_record(row, task, rollout, "exclude").info == _reference_info(row, task, rollout)
