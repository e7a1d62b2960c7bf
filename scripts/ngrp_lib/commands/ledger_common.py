"""Options and text renderers shared by the `ngrp ledger` subcommands."""

from __future__ import annotations

import click

from ..artifacts.sampling import sampling_lines
from ._common import FOLDER

dir_option = click.option(
    "--dir",
    "directory",
    type=FOLDER,
    help="Ledger folder (results.tsv + campaign.json). Default: reports/auto_research/<campaign>.",
)
campaign_option = click.option("--campaign", help="Campaign name; locates the default --dir.")


def render_record(result) -> str:
    row = result.row
    verb = "recorded" if result.written else "would record (dry run)"
    text = f"{verb} #{result.index} {row['branch']} {result.status}"
    if result.status != "crash":
        text += f": {row['metric_name']} = {row['metric_value']:.6g}"
        if row["ci_low"] is not None and row["ci_high"] is not None:
            text += f" [{row['ci_low']:.6g}, {row['ci_high']:.6g}]"
    text += f"\n  suggestion: {result.suggested or 'crash'} ({result.reason})"
    if row["compared_to"]:
        text += f"\n  compared to {row['compared_to']}"
    if result.overridden:
        text += "\n  status overrides the suggestion (noted in the description)"
    for line in sampling_lines(result.sampling):
        text += f"\n  sampling: {line}"
    return text + f"\n  ledger: {result.ledger}\n  next: ngrp ledger status"
