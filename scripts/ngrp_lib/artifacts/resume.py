"""The `ngrp collect ... --resume` command of a run, rebuilt from its run manifest (written by
`collect.state.build_manifest`), for the fixes `check` and `collect` print: every option that shapes the
run, and the runtime options that differ from their defaults. Never a secret: the manifest holds no API
key (only the name of the variable it is read from, `--api-key-env`) and its server URLs are public (no
`user:pass@`).

A server URL is the one the run used: a server restarted on another port needs the new one.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

# `ngrp collect`'s defaults, for the options the manifest's runtime block holds (a test holds them to the
# CLI's): an option at its default is left out of the command.
DEFAULTS: dict[str, Any] = {
    "concurrency": None,  # from the servers' max_num_seqs, else 128 per server
    "timeout": 120.0,
    "max_retries": 3,
    "max_attempts": 3,
    "abort_after": 16,
    "abort_after_same": 5,
    "max_response_bytes": 16 * 2**20,
    "api_key_env": "OPENAI_API_KEY",
    "answer_key": "expected_answer",
}
_VALUED = ("concurrency", "timeout", "max_retries", "max_attempts", "abort_after", "abort_after_same")


def resume_command(
    manifest: Any, without: tuple[str, ...] = (), output: Path | str | None = None
) -> str | None:
    """One copyable shell line; None when the manifest is not an ngrp collect manifest this can read.
    `without`: valued options to leave out (the caller appends a new value, e.g. `--max-attempts`);
    `output`: the rollouts file as the caller was given it (a copied run's manifest names the original)."""
    try:
        argv = resume_argv(manifest, output)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    for flag in without:
        while flag in argv:
            at = argv.index(flag)
            del argv[at : at + 2]
    return shlex.join([*entry_point(), *argv])


def entry_point(argv0: str | None = None) -> list[str]:
    """How the user runs ngrp, from how this process was started: `python3 scripts/ngrp.py` (the path as
    they typed it; another interpreter by its path, so a venv's packages come along) or `ngrp`."""
    import os
    import shutil
    import sys

    script = sys.argv[0] if argv0 is None else argv0
    if os.path.basename(script) != "ngrp.py":
        return ["ngrp"]
    on_path = shutil.which("python3")
    same = on_path is not None and os.path.realpath(on_path) == os.path.realpath(sys.executable)
    return ["python3" if same else sys.executable, script]


def resume_argv(manifest: dict[str, Any], rollouts: Path | str | None = None) -> list[str]:
    """The arguments after `ngrp` (raises KeyError/TypeError/ValueError on a manifest of another shape).
    `rollouts`: the file to resume, when not the one the manifest names (a copy of the run)."""
    opts, identity = manifest["options"], manifest["identity"]
    if not isinstance(opts, dict) or not isinstance(identity, dict):
        raise TypeError("not a collect manifest")
    argv = ["collect"]
    recorded = str(manifest["rollouts"]["path"])
    output = recorded if rollouts is None else str(rollouts)
    shard = identity.get("shard")
    if shard is not None:
        output = _unsharded(output, str(shard))
    if manifest.get("input") is not None:
        argv += ["--input", str(manifest["input"]["path"]), "--output", output]
        argv += _materialize_args(identity.get("materialize") or {})
    else:
        argv += ["--materialized", str(manifest["materialized"]["path"]), "--output", output]
    argv += _adaptive_args(identity.get("adaptive"), manifest.get("adaptive"))
    argv += _server_args(manifest, identity)
    argv += _verifier_args(identity)
    for name in _VALUED:
        value = opts.get(name)
        if value is not None and value != DEFAULTS[name]:
            argv += [_flag(name), _number(value)]
    size = opts.get("max_response_bytes")
    if size is not None and size != DEFAULTS["max_response_bytes"]:
        argv += ["--max-response-mb", str(-(-int(size) // 2**20))]
    if opts.get("follow_redirects"):
        argv.append("--follow-redirects")
    if opts.get("skip_preflight"):
        argv.append("--skip-preflight")
    key_env = opts.get("api_key_env")
    if key_env and key_env != DEFAULTS["api_key_env"]:
        argv += ["--api-key-env", str(key_env)]  # the variable's name; the key stays in the environment
    if shard is not None:
        argv += ["--shard", str(shard)]
    return [*argv, "--resume"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _unsharded(path: str, shard: str) -> str:
    """`out/r-shard-2-of-8.jsonl` back to `out/r.jsonl` (collect adds the suffix for `--shard 2/8`)."""
    index, count = (int(part) for part in shard.split("/"))
    p = Path(path)
    tail = f"-shard-{index:0{len(str(count - 1))}d}-of-{count}"
    if not p.stem.endswith(tail):
        raise ValueError(f"{path} is not the output of shard {shard}")
    return str(p.with_name(p.stem[: -len(tail)] + p.suffix))


def _materialize_args(m: dict[str, Any]) -> list[str]:
    args: list[str] = []
    if m.get("num_repeats", 1) != 1:
        args += ["--num-repeats", str(m["num_repeats"])]
    if m.get("agent") is not None:
        args += ["--agent", str(m["agent"])]
    if m.get("seed_per_repeat"):
        args.append("--seed-per-repeat")
    if m.get("interleave"):
        args.append("--interleave")
    if m.get("limit") is not None:
        args += ["--limit", str(m["limit"])]
    return args + _override_args(m.get("overrides") or {})


def _override_args(overrides: dict[str, Any]) -> list[str]:
    """The sampling overrides (`--temperature 0.7`, `--set top_k=20`): each by its own flag when it has
    one (`sampling.NAMED_OPTIONS`), else as `--set PATH=JSON`; without them a resume is refused."""
    from .sampling import NAMED_OPTIONS

    args: list[str] = []
    for path, value in overrides.items():
        flag = NAMED_OPTIONS.get(path)
        if flag is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            args += [flag, repr(value) if isinstance(value, float) else str(value)]
        else:
            args += ["--set", f"{path}={json.dumps(value, ensure_ascii=False, separators=(',', ':'))}"]
    return args


def _adaptive_args(block: Any, progress: Any) -> list[str]:
    """The rule and the rounds as the user gave them (the progress block's `rounds_option`, when it names
    these rounds; none given: none given again, the default; else the option that sets them)."""
    from .rounds_text import NOT_RECORDED, rounds_args

    if not isinstance(block, dict):
        return []
    rounds = block.get("rounds") or [block["first_round"]]  # a run begun before --rounds: rounds of R
    given = progress.get("rounds_option", NOT_RECORDED) if isinstance(progress, dict) else NOT_RECORDED
    args = ["--adaptive", str(block["rule"]), *rounds_args(rounds, given)]
    threshold = block.get("pass_threshold", 1.0)
    return args if threshold == 1.0 else [*args, "--pass-threshold", _number(threshold)]


def _server_args(manifest: dict[str, Any], identity: dict[str, Any]) -> list[str]:
    servers = [s for s in manifest.get("servers") or [] if isinstance(s, dict)]
    gym = [s["url"] for s in servers if s.get("gym")]
    if gym:
        return ["--gym-url", str(gym[0])]
    files = manifest["options"].get("endpoint_files")
    if files:  # the run's own server source: the file names the servers (and their model) again
        api = ["--api", "responses"] if identity.get("api") == "responses" else []
        chosen = ["--model", str(identity["model"])] if identity.get("model") else []
        return [arg for f in files for arg in ("--endpoints", str(f))] + chosen + api
    args: list[str] = []
    for server in servers:
        args += ["--base-url", str(server["url"])]
    models = {s.get("model") for s in servers}
    model = models.pop() if len(models) == 1 else identity.get("model")
    if not args or model is None or models:
        raise ValueError("the servers serve different models: no --base-url/--model line says that")
    if identity.get("api") == "responses":
        args += ["--api", "responses"]
    return [*args, "--model", str(model)]


def _verifier_args(identity: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for name in ("verifier", "verifier_pattern", "verify_url", "verifier_fn"):
        if identity.get(name) is not None:
            args += [_flag(name), str(identity[name])]
    if identity.get("answer_key", DEFAULTS["answer_key"]) != DEFAULTS["answer_key"]:
        args += ["--answer-key", str(identity["answer_key"])]
    if identity.get("return_token_ids"):
        args.append("--return-token-ids")
    return args
