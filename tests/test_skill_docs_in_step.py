"""Docs that must follow the code: output-format.md vs schemas/, commands.md vs every --help."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gen_command_reference
import pytest
from skill_lint import cli_invocations, schema_property_names

REPO = Path(__file__).resolve().parents[1]
OUTPUT_FORMAT = REPO / "references" / "output-format.md"
SCHEMAS = sorted((REPO / "schemas").glob("*.schema.json"))
# The commands of the design (DESIGN.md); the docs may mention them before their branch is merged.


def missing_from_doc(doc: str, schema_file: str, schema: dict) -> list[str]:
    """Schema file name and top-level property names that the document never mentions in backticks."""
    missing = [] if f"`{schema_file}`" in doc else [schema_file]
    missing += sorted(name for name in schema_property_names(schema) if f"`{name}`" not in doc)
    return missing


@pytest.mark.parametrize("schema_path", SCHEMAS, ids=lambda p: p.name)
def test_output_format_mentions_schema_and_its_keys(schema_path):
    doc = OUTPUT_FORMAT.read_text(encoding="utf-8")
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    assert not missing_from_doc(doc, schema_path.name, schema), (
        "document these in references/output-format.md"
    )


def test_schema_key_collector_and_check(tmp_path):
    schema = {
        "type": "array",
        "items": {
            "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"extra_key": {}}}],
            "properties": {"agent_ref": {}},
        },
        "$defs": {"base": {"properties": {"_ng_task_index": {}, "nested": {"properties": {"deep": {}}}}}},
    }
    assert schema_property_names(schema) == {"agent_ref", "extra_key", "_ng_task_index", "nested"}
    doc = "`x.schema.json` documents `agent_ref`, `_ng_task_index`, extra_key and `nested`"
    assert missing_from_doc(doc, "x.schema.json", schema) == ["extra_key"]
    assert missing_from_doc("", "y.schema.json", {"properties": {}}) == ["y.schema.json"]


def test_commands_reference_is_current():
    committed = (REPO / "references" / "commands.md").read_text(encoding="utf-8")
    assert committed == gen_command_reference.render(), (
        "references/commands.md is stale: run python3 scripts/gen_command_reference.py"
    )


def test_commands_reference_covers_every_command():
    from ngrp_lib.cli import COMMANDS

    text = (REPO / "references" / "commands.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert re.search(rf"^## ngrp {re.escape(name)}$", text, re.M), name


def command_paths() -> list[list[str]]:
    """Every registered command and subcommand, as argv prefixes."""
    from ngrp_lib.cli import COMMANDS

    paths = [[]]
    for name in sorted(COMMANDS):
        paths.append([name])
        paths += [[name, sub] for sub in gen_command_reference._subcommands(name)]
    return paths


def test_every_help_has_an_example_and_exit_codes():
    """Agents learn a command from --help: each one shows an example and its exit codes."""
    lacking = []
    for args in command_paths():
        text = gen_command_reference._help_text(args)
        if "Example" not in text or "Exit codes" not in text:
            lacking.append(" ".join(["ngrp", *args]))
    assert not lacking, f"--help without 'Example' or 'Exit codes': {lacking}"


def _help_for(words: list[str]) -> str:
    """Help text that documents the options of `ngrp WORDS...`."""
    from ngrp_lib.cli import COMMANDS

    name = words[0]
    assert name in COMMANDS, f"the docs call `ngrp {name}`, which is not a command"
    subs = gen_command_reference._subcommands(name)
    if len(words) > 1 and words[1] in subs:
        return gen_command_reference._help_text([name, words[1]])
    return "\n".join(gen_command_reference._help_text([name, *extra]) for extra in [[], *[[s] for s in subs]])


def test_documented_options_exist():
    """Every `--option` the docs pass to an ngrp command appears in that command's --help."""
    unknown, helps = [], {}
    for doc in [REPO / "SKILL.md", *sorted((REPO / "references").glob("*.md"))]:
        if doc.name == "commands.md":
            continue
        for line, words, options in cli_invocations(doc.read_text(encoding="utf-8")):
            key = tuple(words[:2])
            if key not in helps:
                helps[key] = _help_for(words)
            text = helps[key]
            for option in options:
                if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text):
                    unknown.append(f"{doc.name}: ngrp {words[0]} {option}   ({line[:80]})")
    assert not unknown, "\n".join(unknown)


def test_invocation_parser():
    text = (
        "see `ngrp check --inputs a --json` and\n```bash\n"
        "python3 scripts/ngrp.py serve start --model m \\\n  --detach -- --max-model-len 9\n```\n"
    )
    calls = cli_invocations(text)
    assert [(c[1][0], c[2]) for c in calls] == [
        ("check", ["--inputs", "--json"]),
        ("serve", ["--model", "--detach"]),
    ]


def test_skill_invocations_with_arguments_name_the_required_options():
    """SKILL.md said `ngrp curriculum PROFILE --tasks tasks.jsonl`, which exits 2 (no --output): a call
    written out with its arguments must run as written."""
    import click

    from ngrp_lib.cli import cli

    incomplete = []
    for line, words, _ in cli_invocations((REPO / "SKILL.md").read_text(encoding="utf-8")):
        command = cli.get_command(click.Context(cli), words[0])
        if command is None or isinstance(command, click.Group) or "..." in line:
            continue
        if len(words) < 2 or words[1].startswith("-"):
            continue  # a command named with an option or two, not a call written out
        for param in command.params:
            named = any(w.split("=", 1)[0] in param.opts for w in words)
            if isinstance(param, click.Option) and param.required and not named:
                incomplete.append(f"{line[:90]}: no {param.opts[0]}")
    assert not incomplete, "\n".join(incomplete)
