"""`ngrp profile`: a thin shell over `ngrp_lib.profile.run_profile` / `merge_profiles`."""

from __future__ import annotations

import re
from pathlib import Path

import click

from ..artifacts.terminal import say
from ..errors import UsageError
from ._common import (
    FINITE,
    AnyPath,
    emit,
    exclude_unhealthy_option,
    json_option,
    overwrite_option,
    require_inputs,
)

# Gym's Hydra spelling of our options, accepted as extra arguments: `++allow_partial_rollouts=True` etc.
_GYM_TOKEN = re.compile(
    r"^\+{1,2}(allow_partial_rollouts|materialized_inputs_jsonl_fpath|rollouts_jsonl_fpath)=(.*)$"
)
_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}


def _gym_tokens(args: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    found, rest = {}, []
    for arg in args:
        match = _GYM_TOKEN.match(arg)
        if match:
            found[match.group(1)] = match.group(2)
        else:
            rest.append(arg)
    return found, rest


def _flag(value: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise UsageError(
        f"allow_partial_rollouts={value!r} is not a boolean", hint="write ++allow_partial_rollouts=True"
    )


HELP = """NeMo Gym-compatible reward profile of a run: writes <stem>_reward_profiling.jsonl,
<stem>_agent_metrics.json and <stem>_repeat_level_metrics.json with Gym 0.7.0's keys and
values, plus <stem>_profile_summary.json (completion accounting, input hashes, options,
warnings). Strict by default: missing rollouts fail unless --allow-partial (Gym's
++allow_partial_rollouts=True is accepted too). Profile rows also get ngrp/* keys: pass rate
at --pass-threshold, unbiased pass@k (k = 1, 2, 4, ... and n) and its Wilson 95% interval.

\b
Example:
  ngrp profile --inputs rollouts_materialized_inputs.jsonl --rollouts rollouts.jsonl
  ngrp profile --inputs m.jsonl --rollouts r.jsonl ++allow_partial_rollouts=True
  ngrp profile --inputs s0/m.jsonl --rollouts s0/r.jsonl --save-state   # one per shard
  ngrp profile --merge --rollouts all/r.jsonl s0/r_reward_profiling.jsonl s1/r_reward_profiling.jsonl
  ngrp profile --inputs m.jsonl --rollouts r.jsonl --exclude-unhealthy r_rollout_verdicts.jsonl

With --exclude-unhealthy (a verdicts file from `ngrp health`), its unhealthy rollouts are treated as
masked in every output (Gym's files count them as masked) and counted as unhealthy_excluded in the
summary; without it the outputs are byte-identical to Gym's (Gym's t intervals use scipy's quantiles:
with scipy 1.17 or later installed (`pip install 'scipy>=1.17'`, or the `gym` extra) ngrp uses them too;
with an older scipy or none the ci_* values may differ from Gym's in their last digits).

With --merge, ARGS are shard profiles (<stem>_reward_profiling.jsonl, or their
<stem>_profile_state.jsonl) written with --save-state; the outputs equal one pass over all shards.
Each state is checked against its header: one cut short, edited or with task groups added, dropped
or moved is refused (exit 3, file:line). Shards are counted per run by their names, as `ngrp merge`
counts them: a shard of a <base>-shard-i-of-N run (or a gap in NeMo Gym's -chunk<id> numbering)
that is not among ARGS is refused unless --allow-missing-shards (then the counts cover the shards
given only; --allow-partial does not cover a missing shard). Two shards holding one rollout key (a
shard given twice, or shards of different runs) are refused, naming both. --inputs, --save-state and
--exclude-unhealthy apply to profiling each shard, not to --merge (usage error).

\b
Exit codes: 0 profiled (warnings allowed), 1 missing, extra or duplicate rollout keys, a row
whose _ng_task_index or _ng_rollout_index is missing or not an integer (file:line and key named;
Gym's profiler exits 1 on it too), or a null reward with --null-reward error; with --merge also
missing or overlapping shards, 2 usage error or an output exists (use --overwrite), 3 a file
cannot be read, a line is not valid JSON or a profile state does not match its header.
"""


@click.command("profile", help=HELP, context_settings={"ignore_unknown_options": True})
@click.option("--inputs", type=AnyPath(str), help="Materialized inputs JSONL (Gym: --inputs).")
@click.option("--rollouts", type=AnyPath(str), help="Rollouts JSONL; outputs are named from its stem.")
@click.option("--output-dir", type=AnyPath(str), help="Write outputs here instead of next to --rollouts.")
@click.option("--allow-partial", is_flag=True, help="Profile completed rollouts when some are missing.")
@overwrite_option
@click.option(
    "--gym-only",
    is_flag=True,
    help="Write exactly Gym's keys in Gym's three files (no ngrp/* extras); ngrp's own "
    "<stem>_profile_summary.json is still written beside them (Gym has no such file).",
)
@click.option(
    "--pass-threshold",
    type=FINITE,
    default=1.0,
    show_default=True,
    help="A rollout passes when reward >= this (for ngrp/pass_rate, ngrp/pass@k, Wilson interval).",
)
@click.option(
    "--null-reward",
    type=click.Choice(["exclude", "zero", "error"]),
    default="exclude",
    show_default=True,
    help="Null or absent rewards: leave out of the statistics (Gym), count as 0, or fail.",
)
@click.option(
    "--save-state", is_flag=True, help="Also write <stem>_profile_state.jsonl, for a later --merge."
)
@click.option(
    "--merge", is_flag=True, help="Merge shard profiles (ARGS) into the outputs named by --rollouts."
)
@click.option(
    "--allow-missing-shards",
    is_flag=True,
    help="With --merge: merge what is there when shards of a -shard-i-of-N run are absent (warned).",
)
@exclude_unhealthy_option
@json_option
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(
    inputs: str | None,
    rollouts: str | None,
    output_dir: str | None,
    allow_partial: bool,
    overwrite: bool,
    gym_only: bool,
    pass_threshold: float,
    null_reward: str,
    save_state: bool,
    merge: bool,
    allow_missing_shards: bool,
    exclude_unhealthy,
    as_json: bool,
    args: tuple[str, ...],
) -> int:
    from ..profile import ProfileOptions, run_profile

    inputs, rollouts, allow_partial, shards = _arguments(
        inputs, rollouts, allow_partial, merge=merge, allow_missing_shards=allow_missing_shards, args=args
    )
    options = ProfileOptions(
        output_dir=None if output_dir is None else Path(output_dir),
        allow_partial=allow_partial,
        overwrite=overwrite,
        gym_only=gym_only,
        pass_threshold=pass_threshold,
        null_reward=null_reward,
        save_state=save_state,
        exclude_unhealthy=exclude_unhealthy,
    )
    if merge:
        from ..profile.merge import merge_profiles

        result = merge_profiles(shards, rollouts, options, allow_missing_shards=allow_missing_shards)
    else:
        inputs = require_inputs(inputs, rollouts)
        result = run_profile(inputs, rollouts, options)
        result.adaptive = _adaptive(result, rollouts, pass_threshold)
    for warning in result.warnings:
        say(f"warning: {warning}", err=True)
    emit(result, as_json, render_text)
    return 0


def _arguments(
    inputs: str | None,
    rollouts: str | None,
    allow_partial: bool,
    *,
    merge: bool,
    allow_missing_shards: bool,
    args: tuple[str, ...],
) -> tuple[str | None, str, bool, list[Path | str]]:
    """(inputs, rollouts, allow_partial, shards) from the options and Gym's ++key=value tokens among ARGS,
    or the usage error a mix of them makes."""
    tokens, rest = _gym_tokens(args)
    inputs = inputs or tokens.get("materialized_inputs_jsonl_fpath")
    rollouts = rollouts or tokens.get("rollouts_jsonl_fpath")
    if "allow_partial_rollouts" in tokens:
        allow_partial = allow_partial or _flag(tokens["allow_partial_rollouts"])
    options_given = [arg for arg in rest if arg.startswith("-")]
    if options_given:  # click lets them through because of the Gym tokens: say what it would have said
        raise UsageError(f"no such option: {options_given[0]}", hint="see `ngrp profile --help`")
    if rest and not merge:
        raise UsageError(f"unexpected arguments: {' '.join(rest)}", hint="shard files go with --merge")
    if not rollouts:
        raise UsageError("--rollouts is required", hint="with --merge it names the merged outputs' stem")
    if merge and inputs:
        raise UsageError(
            "--inputs applies when profiling rollouts, not to --merge: each shard's state holds its inputs",
            hint="profile each shard with its --inputs and --save-state, then merge the shards",
        )
    if allow_missing_shards and not merge:
        raise UsageError("--allow-missing-shards goes with --merge", hint="see `ngrp profile --help`")
    return inputs, rollouts, allow_partial, list(rest)


def _adaptive(result, rollouts, pass_threshold):
    """An adaptive run's benchmark-level estimates from its first round (the profile files stay Gym's)."""
    import os

    from ..artifacts.names import manifest_path_for

    if not os.path.lexists(manifest_path_for(rollouts)):  # no manifest, no adaptive run: the stats modules
        return None  # (~0.05 s to import) are left unloaded, as most profiles need none of them
    from ..stats.adaptive_run import find_adaptive
    from ..stats.summary import first_round_estimates

    run = find_adaptive(None, rollouts)
    if run is None:
        return None
    result.warnings.append(run.note() + "; the agent metrics file mixes tasks with different repeat counts")
    estimates = first_round_estimates(result.outputs["reward_profiling"], run, pass_threshold)
    return {**run.summary(), "first_round_estimates": estimates}


def render_text(result) -> str:
    from .profile_text import render_gym_text

    text = render_gym_text(result.completion, result.counts["masked"], result.outputs)
    lines = [text, f"Profile summary (ngrp): {result.outputs['profile_summary']}"]
    if "profile_state" in result.outputs:
        lines.append(f"Profile state for --merge (ngrp): {result.outputs['profile_state']}")
    if result.counts.get("unhealthy_excluded"):
        lines.append(
            f"Unhealthy rollouts left out (--exclude-unhealthy): {result.counts['unhealthy_excluded']} "
            "rollout rows, as masked ones (kept in completion accounting above)."
        )
    for name, e in ((result.adaptive or {}).get("first_round_estimates") or {}).items():
        if e is not None:
            lines.append(
                f"Adaptive run, first round ({result.adaptive['first_round']} repeats of every task): {name}"
                f" {e['value']:.4f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}]"
                f" ({e['ci_method']}, n={e['n_tasks']} tasks)"
            )
    if result.counts["null_reward"]:
        lines.append(f"Null or absent rewards: {result.counts['null_reward']} rollout rows (see warnings).")
    return "\n".join(lines)
