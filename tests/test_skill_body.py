"""SKILL.md body and references/*.md lint: sections, length, links, hidden content, secrets in examples."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from skill_lint import broken_links, invisible_characters, split_frontmatter

REPO = Path(__file__).resolve().parents[1]
SKILL = REPO / "SKILL.md"
REFERENCES = sorted((REPO / "references").glob("*.md"))
DOCS = [SKILL, *REFERENCES]
# Paths the docs mention that belong to another project, not to this bundle.
FOREIGN = {"scripts/wait_for_servers.sh"}
# Written on other branches (ledger: research-loop.md; foundation: schemas/); remove once merged.
REQUIRED_REFERENCES = [
    "quick-start",
    "output-format",
    "collection",
    "statistics",
    "troubleshooting",
    "commands",
]


def body() -> str:
    return split_frontmatter(SKILL.read_text(encoding="utf-8"))[1]


def section(name: str) -> str:
    text = body()
    start = text.index(f"\n## {name}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_length_limit():
    assert len(SKILL.read_text(encoding="utf-8").split("\n")) <= 500


@pytest.mark.parametrize(
    "name", ["Instructions", "Examples", "Available scripts", "Gotchas", "Troubleshooting"]
)
def test_required_sections(name):
    assert f"\n## {name}\n" in body()


def test_instructions_cover_all_three_spellings():
    text = section("Instructions")
    for needle in (
        "gym env start",
        "gym eval run --no-serve",
        "gym eval profile",
        "ng_run",
        "ng_collect_rollouts",
        "ng_reward_profile",
        "+num_repeats=",
        "++allow_partial_rollouts=True",
        "python3 scripts/ngrp.py",
    ):
        assert needle in text, needle
    assert "`ngrp <command>" in body(), "shows the installed spelling too"


def test_gotchas_cover_the_known_traps():
    text = section("Gotchas")
    for needle in (
        "rollouts stem",
        "completion order",
        "_ng_task_index",
        "_ng_rollout_index",
        "--allow-partial",
        "++allow_partial_rollouts=True",
        "agent_ref.name",
        "_aggregate_metrics.json",
        "pass@k",
        "Repeats are the main lever",
        "environment variables",
    ):
        assert needle in text, needle


def test_paths_note_said_exactly_once():
    assert len(re.findall(r"relative to the folder that\s+holds this SKILL\.md", body())) == 1


def test_scripts_table_lists_every_known_command():
    table = section("Available scripts")
    for command in ("materialize", "collect", "serve", "validate", "check", "profile", "stats", "compare"):
        assert f"| `{command}` |" in table, command
    for command in ("report", "curriculum", "merge", "ledger"):
        assert f"| `{command}` |" in table, command


def test_every_reference_exists_and_is_pointed_to():
    text = body()
    for name in REQUIRED_REFERENCES:
        assert (REPO / "references" / f"{name}.md").exists(), name
        assert f"references/{name}.md" in text, f"SKILL.md never says when to read {name}.md"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_resolve(doc):
    problems = broken_links(doc, REPO, FOREIGN)
    assert not problems, problems


def test_link_checker_catches_a_broken_link(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("# Title\nsee [a](missing.md), `references/nope.md` and [b](#title) [c](#nowhere)\n")
    problems = broken_links(doc, tmp_path, set())
    assert len(problems) == 3, problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_hidden_content(doc):
    text = doc.read_text(encoding="utf-8")
    assert "<!--" not in text, "HTML comments hide text from readers"
    assert not invisible_characters(text)


def test_invisible_character_detector():
    sample = "ok\u200b\nbidi \u202e here\nsoft\u00adhyphen\nbom\ufeff\ttab ok"
    assert len(invisible_characters(sample)) == 4


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_unsafe_or_secret_examples(doc):
    text = doc.read_text(encoding="utf-8")
    assert not re.search(r"\bsudo\b|curl[^\n|]*\|\s*(ba)?sh|chmod\s+[0-7]{3}", text)
    in_code = False
    for number, line in enumerate(text.split("\n"), start=1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif in_code:
            assert "--model-api-key" not in line, f"{doc.name}:{number} API key on a command line"
            assert not re.search(r"api[_-]key\s*=\s*['\"]?[A-Za-z0-9_-]{8,}", line, re.I), (
                f"{doc.name}:{number}"
            )
            assert not re.search(r"\b(sk|nvapi)-[A-Za-z0-9]{8,}", line), (
                f"{doc.name}:{number} key-like literal"
            )
