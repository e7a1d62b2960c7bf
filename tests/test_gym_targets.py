"""Gym `/run` mode: discovery through a head server's answers, and Gym's stamps on results."""

from __future__ import annotations

import json

import pytest

from ngrp_lib.collect.gym_targets import RunTarget, outcome, resolve_gym_url, stamp
from ngrp_lib.errors import UsageError

HEAD = "http://127.0.0.1:11000"


def instance(process_name, server_type, name, port):
    # The fields `GET /server_instances` returns in Gym 0.7.0 (seen on a real `gym env start`).
    url = f"http://127.0.0.1:{port}"
    return {"process_name": process_name, "server_type": server_type, "name": name, "host": "127.0.0.1",
            "port": port, "url": url, "pid": 1, "config_path": process_name}  # fmt: skip


INSTANCES = [
    instance("string_match", "resources_servers", "string_match", 11604),
    instance("string_match_simple_agent", "responses_api_agents", "simple_agent", 16052),
    instance("string_match_environment_server", "environment_servers", "legacy_agent", 16749),
    instance("policy_model", "responses_api_models", "vllm_model", 10325),
]
CONFIG_YAML = (
    "string_match_environment_server:\n  environment_servers:\n    legacy_agent:\n      entrypoint: app.py\n"
    "      agent_server:\n        type: responses_api_agents\n        name: string_match_simple_agent\n"
)


def fetcher(answers):
    return lambda url: answers.get(url)


def test_head_server_routes_each_agent_to_its_environment_server():
    pytest.importorskip("yaml")
    answers = {HEAD + "/server_instances": INSTANCES, HEAD + "/global_config_dict_yaml": CONFIG_YAML}
    targets = resolve_gym_url(HEAD + "/", fetcher(answers))
    row = {"agent_ref": {"name": "string_match_simple_agent"}}
    assert targets.for_row(row) == RunTarget(
        "http://127.0.0.1:16749/run", "string_match_environment_server", "legacy_agent"
    )
    with pytest.raises(UsageError, match="'other'"):
        targets.for_row({"agent_ref": {"name": "other"}})


def test_single_environment_server_without_config_runs_every_row():
    targets = resolve_gym_url(HEAD, fetcher({HEAD + "/server_instances": INSTANCES}))
    assert (
        targets.for_row({"agent_ref": {"name": "anything"}}).environment_server
        == "string_match_environment_server"
    )


def test_direct_server_url_gets_no_environment_stamps():
    for url in ("http://h:1", "http://h:1/", "http://h:1/run"):
        targets = resolve_gym_url(url, fetcher({}))
        assert targets.for_row({}) == RunTarget("http://h:1/run")
    with pytest.raises(UsageError, match="lists no agent"):
        resolve_gym_url(HEAD, fetcher({HEAD + "/server_instances": []}))


def test_stamps_follow_gym_collector_order(golden):
    gym_rows = [
        json.loads(x) for x in (golden.parent / "gym-stack" / "rollouts_2rows.jsonl").read_text().splitlines()
    ]
    inputs = {}
    for line in (golden.parent / "gym-stack" / "rollouts_materialized_inputs.jsonl").read_text().splitlines():
        row = json.loads(line)
        inputs[(row["_ng_task_index"], row["_ng_rollout_index"])] = row
    target = RunTarget("u", "string_match_environment_server", "legacy_agent")
    for gym_row in gym_rows:
        reply = {k: v for k, v in gym_row.items() if not k.startswith("_ng_") and k != "agent_ref"}
        ours = stamp(inputs[(gym_row["_ng_task_index"], gym_row["_ng_rollout_index"])], reply, target)
        assert json.dumps(ours) == json.dumps(gym_row)  # same keys, values and order as Gym wrote them
    assert stamp({"_ng_task_index": 0, "_ng_rollout_index": 1}, {}, RunTarget("u"), attempt=2) == {
        "_ng_task_index": 0, "_ng_rollout_index": 1, "_ng_attempt_index": 2}  # fmt: skip


def test_outcome_classes():
    assert outcome({"reward": 1.0}) == "rollout"
    assert outcome({"_ng_failure_class": "timeout_exceeded"}) == "failure"
    assert outcome({"_ng_failure_class": "cancelled", "_ng_no_persist": True}) == "no_persist"


def test_gym_mode_refuses_direct_mode_options(tmp_path):
    from ngrp_lib.collect.options import CollectOptions
    from ngrp_lib.collect.routing import Endpoint

    m = tmp_path / "m.jsonl"
    m.write_text("{}\n")
    ok = CollectOptions(output=tmp_path / "r.jsonl", endpoints=(), materialized=m, gym_url=HEAD)
    assert ok.identity(None, "0" * 64)["api"] == "gym"
    assert ok.runtime()["servers"] == [{"url": HEAD, "gym": True}]
    with pytest.raises(UsageError, match="--base-url/--endpoints, --verifier"):
        CollectOptions(output=tmp_path / "r.jsonl", endpoints=(Endpoint("http://h/v1", "m"),), materialized=m,
                       gym_url=HEAD, verifier="math")  # fmt: skip


def test_collect_checks_every_agent_named_from_its_one_scan_of_the_rows(tmp_path):
    """Gym mode refuses a row whose agent no server runs, before any request, from the rows the runner's
    scan kept (one for each agent named), so the materialized file is not read a second time."""

    from ngrp_lib.collect.gym_run import check_agents
    from ngrp_lib.collect.runner import scan_materialized

    def row(task, rollout, agent):
        return {"_ng_task_index": task, "_ng_rollout_index": rollout, "agent_ref": {"name": agent},
                "responses_create_params": {"input": "hi"}}  # fmt: skip

    path = tmp_path / "m.jsonl"
    rows = [
        row(0, 0, "string_match_simple_agent"),
        row(0, 1, "string_match_simple_agent"),
        row(1, 0, "other"),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    plan, _ = scan_materialized(path, None)
    assert [r["agent_ref"]["name"] for r in plan.agent_rows] == ["string_match_simple_agent", "other"]
    answers = {HEAD + "/server_instances": INSTANCES, HEAD + "/global_config_dict_yaml": CONFIG_YAML}
    targets = resolve_gym_url(HEAD + "/", fetcher(answers))
    with pytest.raises(UsageError, match="'other'"):
        check_agents(targets, plan.agent_rows)
    check_agents(targets, plan.agent_rows[:1])  # the served agent alone passes
