"""Agent health checks from the rows alone: each planted defect (tests/agent_rows.py) is flagged with its
own id and nothing else; clean agent rows, and near misses of each rule, are healthy."""

from __future__ import annotations

import json

import orjson
import pytest
from agent_rows import agent_row, write_run

from ngrp_lib.audit.agent_checks import output_reports_error
from ngrp_lib.audit.health import run_health
from ngrp_lib.audit.health_checks import Settings, judge_row
from ngrp_lib.errors import UsageError

PLANTED = {
    (0, 1): ("bad_args", ["ngrp/tool_arguments_invalid"]),
    (1, 2): ("tool_error", ["ngrp/tool_output_error"]),
    (2, 3): ("loop", ["ngrp/tool_call_loop"]),
    (3, 0): ("cut", ["ngrp/ended_on_tool_call"]),
    (3, 2): ("no_answer", ["ngrp/ended_on_tool_call_unknown"]),
    (2, 1): ("submit", []),  # answered through a tool: nothing to flag
    (4, 1): ("overflow", ["model_call_failed", "ngrp/context_window_exceeded"]),
}


def test_each_planted_agent_defect_is_flagged_with_its_id_alone(tmp_path):
    rollouts = write_run(tmp_path, tasks=5, repeats=4, turns=4, defects={k: v[0] for k, v in PLANTED.items()})
    result = run_health(tmp_path / "rollouts_materialized_inputs.jsonl", rollouts)
    rows = [json.loads(line) for line in (tmp_path / "rollout_verdicts.jsonl").read_text().splitlines()]
    for row in rows:
        key = (row["_ng_task_index"], row["_ng_rollout_index"])
        checks = [f["check"] for f in row["findings"]]
        assert checks == (PLANTED[key][1] if key in PLANTED else []), (key, row)
        assert row["verdict"] == ("unhealthy" if key in PLANTED and PLANTED[key][1] else "healthy")
    assert result.verdicts == {"healthy": 14, "unhealthy": 6, "unobserved": 0}
    summary = json.loads((tmp_path / "quality_summary.json").read_text())
    issues = {k: v for k, v in summary["run"]["issues"].items() if v}
    assert issues == {
        "ngrp/tool_arguments_invalid": 1,
        "ngrp/tool_output_error": 1,
        "ngrp/tool_call_loop": 1,
        "ngrp/ended_on_tool_call": 1,
        "ngrp/ended_on_tool_call_unknown": 1,
        "ngrp/context_window_exceeded": 1,
        "model_call_failed": 1,
    }
    assert summary["ngrp"]["settings"]["tool_loop_min_repeats"] == 3
    coverage = summary["run"]["artifacts"]["coverage"]
    assert coverage["ngrp/tool_call_loop"]["evaluated"] == 20


def _findings(row: dict, **settings) -> list[dict]:
    return judge_row(row, 256, Settings(**settings)).findings


def test_finding_details_name_the_turn_and_the_tool():
    (bad,) = _findings(agent_row(0, 0, defect="bad_args"))
    assert bad["locator"] == {"turn": 1}
    assert bad["detail"]["tool"] == "search_docs" and bad["detail"]["count"] == 1
    (err,) = _findings(agent_row(0, 0, turns=5, defect="tool_error"))
    assert err["detail"]["turn"] == 3 and err["detail"]["output"] == '{"detail":"page out of range"}'
    (loop,) = _findings(agent_row(0, 0, turns=6, defect="loop"))
    assert loop["detail"]["copies"] == 5 and loop["detail"]["first_turn"] == 1
    assert loop["detail"]["arguments"] == '{"page":1,"query":"feature 0"}'
    (end,) = _findings(agent_row(0, 0, defect="no_answer"))
    assert end["check"] == "ngrp/ended_on_tool_call_unknown"
    assert end["detail"] == {
        "last_item": "function_call_output", "tool": "search_docs", "turns": 3, "tools": {"search_docs": 1}
    }  # fmt: skip
    (cut,) = _findings(agent_row(0, 0, defect="cut"))
    assert cut["check"] == "ngrp/ended_on_tool_call"
    assert cut["detail"]["tool"] == "search_docs" and cut["detail"]["cut_by"] == "truncated: true"


def test_loop_threshold_and_arguments_compared_as_json():
    row = agent_row(0, 0, turns=4, defect="loop")  # 3 copies of one call
    assert [f["check"] for f in _findings(row, tool_loop_min_repeats=4)] == []
    assert [f["check"] for f in _findings(row, tool_loop_min_repeats=3)] == ["ngrp/tool_call_loop"]
    calls = [i for i in row["response"]["output"] if i["type"] == "function_call"]
    calls[1]["arguments"] = '{ "page": 1,  "query": "feature 0" }'  # same call, other spelling
    assert [f["check"] for f in _findings(row)] == ["ngrp/tool_call_loop"]
    calls[2]["arguments"] = '{"page": 2, "query": "feature 0"}'  # now only 2 copies
    assert _findings(row) == []
    with pytest.raises(UsageError):
        Settings(tool_loop_min_repeats=1).check()


def test_ended_on_a_bare_function_call():
    row = agent_row(0, 0, defect="no_answer")
    row["response"]["output"].pop()  # drop the last output: the row ends on the call itself
    assert _findings(row)[0]["detail"]["last_item"] == "function_call"


@pytest.mark.parametrize(
    ("output", "error"),
    [
        ('{"error": "Invalid tool call arguments: x"}', True),
        ('{"result": 3, "error": null}', False),  # an empty error field is no error
        ('{"error": ""}', False),
        ('{"detail": "Not Found"}', True),  # FastAPI's HTTP error body
        ('{"detail": [{"type": "missing", "loc": ["body", "city"]}]}', True),
        ('{"detail": "page 2", "hits": []}', False),  # detail among other keys: data
        ('{"text": "the word \\"error\\" in a document"}', False),
        ("Error: file not found", True),
        ("ERROR executing query: syntax", True),
        ("Traceback (most recent call last):\n  File x", True),
        ("No errors found.", False),
        ("error rate is 3%", False),  # no colon after a short lead
        ("{not json", False),
        ("", False),
    ],
)
def test_tool_output_error_rule(output, error):
    assert output_reports_error(output) is error


def test_context_overflow_where_the_server_says_so():
    row = agent_row(0, 0)
    assert _findings(row) == []
    row["failure_reason"] = "model call: This model's maximum context length is 2048 tokens"
    checks = [f["check"] for f in _findings(row)]
    assert checks == ["ngrp/context_window_exceeded", "ngrp/verifier_error"]  # why, and the row's failure
    row = agent_row(0, 0)
    row["response"]["incomplete_details"] = {"reason": "context_length_exceeded"}
    checks = [f["check"] for f in _findings(row)]
    assert "ngrp/context_window_exceeded" in checks
    row = agent_row(0, 0)
    row["response"]["incomplete_details"] = {
        "reason": "max_output_tokens"
    }  # the output cap is not the window
    assert "ngrp/context_window_exceeded" not in [f["check"] for f in _findings(row)]


def test_ignore_checks_leaves_agent_checks_out(tmp_path):
    row = agent_row(0, 0, defect="bad_args")
    ignored = frozenset({"ngrp/tool_arguments_invalid"})
    assert _findings(row, ignored=ignored) == []


def test_gym_committed_rows_are_healthy():
    from pathlib import Path

    path = Path(__file__).parent / "golden" / "agent" / "example_tool_call_multireward.jsonl"
    for line in path.read_bytes().splitlines():
        row = orjson.loads(line)
        assert [f["check"] for f in _findings(row) if f["check"].startswith("ngrp/tool")] == []


def test_an_agents_summed_usage_is_not_compared_with_the_per_call_cap():
    """Gym's agent sums usage over its model calls; max_output_tokens caps each call. Ten turns of 40
    tokens (400 in all) under a cap of 256 is no stop at the cap; one call of 400 is."""
    row = agent_row(0, 0, turns=10)
    assert row["response"]["usage"]["output_tokens"] == 400
    assert _findings(row) == []
    single = agent_row(0, 0, turns=1)
    single["response"]["usage"]["output_tokens"] = 400
    assert [f["check"] for f in _findings(single)] == ["ngrp/truncated_at_token_cap"]
    row["response"]["incomplete_details"] = {"reason": "max_output_tokens"}  # the server says a call was cut
    assert [f["check"] for f in _findings(row)] == ["ngrp/truncated_at_token_cap"]
