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


MAX_LINES = 200  # issue 36: read once, whole, by a tool that cuts a long file's middle
COMMON_PART = 150  # the lines that must carry the common requests


def test_length_limit():
    lines = SKILL.read_text(encoding="utf-8").rstrip("\n").split("\n")
    assert len(lines) <= MAX_LINES, f"SKILL.md has {len(lines)} lines: move detail to references/"


def test_every_reference_file_is_linked_with_when_to_open_it():
    """Each file in references/ is named in SKILL.md's last section, one line saying when to open it."""
    listing = section("References: when to read which")
    lines = [line for line in listing.split("\n") if line.startswith("- `references/")]
    named = [re.match(r"- `references/([^`]+)`: (.+)", line) for line in lines]
    assert all(named), lines
    assert {m.group(1) for m in named} == {p.name for p in REFERENCES}, "references/ vs SKILL.md's list"
    assert all(len(m.group(2).split()) >= 4 for m in named), "say when to open it"


def test_reference_check_catches_an_unlinked_file(tmp_path):
    """The rule above, on a listing that misses one file: the set comparison fails."""
    listing = "- `references/a.md`: when a thing happens here\n"
    named = {m.group(1) for m in re.finditer(r"- `references/([^`]+)`: ", listing)}
    assert named != {"a.md", "b.md"}


# Each common request (issue 36) and the words that must be in SKILL.md's first COMMON_PART lines.
COMMON_REQUESTS = {
    "set-up": ["pip install", "python3 scripts/ngrp.py"],
    "local model": ["scripts/prepare_smollm2.py", "~/.cache/ngrp/models/", "ngrp serve"],
    "collect": ["ngrp.py collect", "--num-repeats", "--verifier", "--endpoints"],
    "triage": ["--adaptive learnable"],
    "crash/resume": ["--resume", "incomplete:", "fix:"],
    "check/health": ["ngrp.py check", "ngrp.py health", "answer:", "--exclude-unhealthy"],
    "profile": ["ngrp.py profile", "--allow-partial"],
    "stats/compare": ["ngrp stats", "ngrp compare", "--group-size", "--component-diff"],
    "inspect/view": ["ngrp inspect", "ngrp view"],
    "curriculum": ["ngrp curriculum", "--learnable-for"],
}


@pytest.mark.parametrize("request_name", sorted(COMMON_REQUESTS))
def test_common_requests_in_the_first_lines(request_name):
    head = "\n".join(SKILL.read_text(encoding="utf-8").split("\n")[:COMMON_PART])
    missing = [w for w in COMMON_REQUESTS[request_name] if w not in head]
    assert not missing, f"{request_name}: not in SKILL.md's first {COMMON_PART} lines: {missing}"


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
    """Every command of the CLI is in SKILL.md's table and README's command table (W3: assign-keys was
    in neither, so a user with rows without keys found it only through `ngrp --help`)."""
    from ngrp_lib.cli import COMMANDS

    table = section("Available scripts")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for command in COMMANDS:
        assert f"| `{command}` |" in table, command
        assert f"| `{command}` |" in readme, command


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
