"""`ngrp ledger amend`: change a campaign's stop rules with the user's consent (ledger/amend.py)."""

from __future__ import annotations

import click

from ..artifacts.terminal import say
from ._common import FINITE, count, emit, json_option
from .ledger_common import campaign_option, dir_option


@click.command("amend")
@campaign_option
@click.option("--reason", required=True, help="What the user agreed to; recorded with each change.")
@click.option(
    "--max-experiments", type=count(maximum=2**31), help="New limit of attempted runs (baseline included)."
)
@click.option(
    "--deadline", help="New deadline: ISO 8601 instant (no offset = UTC), or a budget from now such as 2h."
)
@click.option("--target", type=FINITE, help="New target for the best kept run's metric.")
@click.option("--clear-target", is_flag=True, help="Remove the target rule.")
@click.option("--per-run-timeout", help="New longest time a run may take, e.g. 90m.")
@dir_option
@json_option
def amend_cmd(
    campaign, reason, max_experiments, deadline, target, clear_target, per_run_timeout, directory, as_json
):
    """Change the stop rules after init, only with the user's consent: each change is appended to the
    campaign file's history with its time, the old and new value and --reason, and `ledger status`
    then answers with the new rules. Ask the user first; quote their answer in --reason.

    \b
    Example:
      ngrp ledger amend --campaign c1 --max-experiments 8 --reason "user approved 2 more runs (chat 14:02)"
      ngrp ledger amend --campaign c1 --deadline 3h --clear-target --reason "user: keep going 3 more hours"

    \b
    Exit codes: 0 amended, 2 no --reason, nothing to change or a bad value, 3 missing or malformed
    campaign file.
    """
    from ..ledger.amend import Amendment, amend_campaign
    from ..ledger.campaign import resolve_dir

    change = Amendment(reason, max_experiments, deadline, target, clear_target, per_run_timeout)
    result = amend_campaign(resolve_dir(directory, campaign), change)
    _warn_if_past(result)
    emit(result, as_json, render_amend)
    return 0


def _warn_if_past(result: dict) -> None:
    """As init does: a deadline amended into the past stops the campaign at once."""
    from ..ledger.campaign import now_utc, parse_instant

    for entry in result["changes"]:
        if entry["rule"] == "deadline" and entry["new"] and parse_instant(entry["new"]) <= now_utc():
            say(
                f"warning: the new deadline {entry['new']} has already passed: `ngrp ledger status` will "
                "say STOP at once",
                err=True,
            )


def render_amend(result: dict) -> str:
    lines = [f"amended {result['campaign_file']}:"]
    for entry in result["changes"]:
        lines.append(
            f"  {entry['rule']}: {entry['old']} -> {entry['new']}  ({entry['at']}; {entry['reason']})"
        )
    lines.append("next: ngrp ledger status (exit 0: you may launch; 1: a stop rule is met)")
    return "\n".join(lines)
