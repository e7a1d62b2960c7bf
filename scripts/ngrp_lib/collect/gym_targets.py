"""NeMo Gym `/run` mode: where to post a materialized row, and how Gym stamps what comes back.

`--gym-url` accepts either
- a Gym **head server** (`gym env start`'s `http://127.0.0.1:11000`): servers are discovered with
  `GET /server_instances`, and each row goes to the environment server that relays its `agent_ref.name`
  (read from `GET /global_config_dict_yaml`), exactly as `gym eval run --no-serve` routes it; rows are
  stamped with `_ng_environment_server` (the server's name) and `_ng_result_type` (its type, for example
  `legacy_agent`), as Gym's collector stamps them; or
- one server's URL (an environment server or an agent, with or without `/run`): every row is posted
  there and no environment stamps are added (the URL does not say which server it is).
The row itself is the request body, byte for byte as in the materialized file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, agent_name
from ..errors import UsageError

ENVIRONMENT_SERVERS = "environment_servers"
AGENTS = "responses_api_agents"
# Keys Gym's collector copies from the materialized row onto the result, in its order.
ROW_STAMPS = (
    TASK_KEY,
    ROLLOUT_KEY,
    "agent_ref",
    "task_source",
    "skills_ref",
    "_ng_attempt_index",
    "_ng_rollout_id",
)
ENV_SERVER_KEY = "_ng_environment_server"
RESULT_TYPE_KEY = "_ng_result_type"
FAILURE_CLASS_KEY = "_ng_failure_class"
NO_PERSIST_KEY = "_ng_no_persist"

Fetch = Callable[[str], Any]


@dataclass(frozen=True)
class RunTarget:
    url: str  # full URL of the /run route
    environment_server: str | None = None
    result_type: str | None = None


@dataclass(frozen=True)
class GymTargets:
    by_agent: dict[str, RunTarget] = field(default_factory=dict)
    default: RunTarget | None = None
    head_url: str | None = None

    def for_row(self, row: dict) -> RunTarget:
        name = agent_name(row)
        target = self.by_agent.get(name) if name else None
        if target is None and (name is None or not self.by_agent):
            target = self.default  # a row without an agent, or a single fixed /run URL
        if target is None:
            known = ", ".join(sorted(self.by_agent)) or "none"
            raise UsageError(
                f"no Gym server runs agent {name!r} (agents with a /run: {known})",
                hint="set agent_ref.name in the rows (materialize --agent NAME), or pass that server's URL",
            )
        return target

    def servers(self) -> list[str]:
        urls = {t.url for t in self.by_agent.values()}
        if self.default is not None:
            urls.add(self.default.url)
        return sorted(urls)


def fetch_json(url: str, timeout: float = 10.0, limit: int = 1 << 24) -> Any:
    """GET a JSON document (at most `limit` bytes); None when the URL does not answer 200 with JSON."""
    from .http import AttemptFailed, fetch_bounded

    try:  # bounded and never redirected, like every reply ngrp reads
        status, data = fetch_bounded(url, timeout, limit)
        return json.loads(data) if status == 200 else None
    except (AttemptFailed, OSError, ValueError):
        return None


def resolve_gym_url(url: str, fetch: Fetch = fetch_json) -> GymTargets:
    """Work out where rows go: discovery through a head server, or one fixed /run URL."""
    base = url.rstrip("/")
    if base.endswith("/run"):
        return GymTargets(default=RunTarget(base))
    instances = fetch(base + "/server_instances")
    if not isinstance(instances, list):
        return GymTargets(default=RunTarget(base + "/run"))
    config = _global_config(fetch(base + "/global_config_dict_yaml"))
    return _targets_from_head(base, instances, config)


def _global_config(raw: Any) -> dict | None:
    """The head server's merged config (YAML inside a JSON string); None without PyYAML."""
    if not isinstance(raw, str):
        return None
    try:
        import yaml
    except ImportError:
        return None
    data = yaml.safe_load(raw)
    return data if isinstance(data, dict) else None


def _targets_from_head(head: str, instances: list, config: dict | None) -> GymTargets:
    envs = [i for i in instances if isinstance(i, dict) and i.get("server_type") == ENVIRONMENT_SERVERS]
    agents = [i for i in instances if isinstance(i, dict) and i.get("server_type") == AGENTS]
    env_targets = [RunTarget(e["url"] + "/run", e["process_name"], e.get("name")) for e in envs]
    relayed = [_relayed_agent(config, env) for env in envs]
    if len(envs) == 1 and relayed[0] is None:
        # One environment server and no config to read (no PyYAML): it runs every row.
        return GymTargets(default=env_targets[0], head_url=head)
    # Agents with no environment server are posted to directly (Gym before 0.7.0 had no relays).
    by_agent = {a["process_name"]: RunTarget(a["url"] + "/run") for a in agents if a.get("url")}
    by_agent.update(
        {agent: target for agent, target in zip(relayed, env_targets, strict=True) if agent is not None}
    )
    default = None
    if len(set(by_agent.values())) == 1:
        default = next(iter(by_agent.values()))  # one place to run rows: rows without an agent go there too
    if not by_agent and default is None:
        raise UsageError(f"the Gym head server at {head} lists no agent or environment server")
    return GymTargets(by_agent=by_agent, default=default, head_url=head)


def _relayed_agent(config: dict | None, env: dict) -> str | None:
    """The agent an environment server relays to (`<name>.environment_servers.<type>.agent_server.name`)."""
    if config is None:
        return None
    try:
        impl = config[env["process_name"]][ENVIRONMENT_SERVERS][env["name"]]
        return impl["agent_server"]["name"]
    except (KeyError, TypeError):
        return None


def stamp(row: dict, result: dict, target: RunTarget, attempt: int = 0) -> dict:
    """Gym's collector stamps: identity and routing keys from the row, then the environment server."""
    for key in ROW_STAMPS:
        if key in row:
            result[key] = row[key]
    if attempt and "_ng_attempt_index" not in row:
        result["_ng_attempt_index"] = attempt
    if target.environment_server is not None:
        result[ENV_SERVER_KEY] = target.environment_server
    if target.result_type is not None:
        result[RESULT_TYPE_KEY] = target.result_type
    return result


def outcome(result: dict) -> str:
    """'rollout' (main file), 'failure' (the server classed it: sidecar) or 'no_persist' (written nowhere)."""
    if result.get(NO_PERSIST_KEY):
        return "no_persist"
    if result.get(FAILURE_CLASS_KEY) is not None:
        return "failure"
    return "rollout"
