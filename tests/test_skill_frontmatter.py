"""SKILL.md frontmatter lint, as strict as the strictest public validators (skills-ref, quick_validate)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from skill_lint import FrontmatterError, parse_frontmatter, split_frontmatter

REPO = Path(__file__).resolve().parents[1]
SKILL = REPO / "SKILL.md"
ALLOWED = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
EXPECTED_KEYS = {"name", "description", "license", "compatibility", "metadata"}


@pytest.fixture(scope="module")
def front() -> tuple[str, dict]:
    raw, _ = split_frontmatter(SKILL.read_text(encoding="utf-8"))
    return raw, parse_frontmatter(raw)


def test_keys_are_exactly_the_spec_ones(front):
    _, data = front
    assert set(data) <= ALLOWED
    assert set(data) == EXPECTED_KEYS


def test_name_rules(front):
    name = front[1]["name"]
    assert name == "nemo-gym-reward-profiling"
    assert NAME_OK(name)


def NAME_OK(name: str) -> bool:
    return bool(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name)) and 1 <= len(name) <= 64


def test_description_rules(front):
    raw, data = front
    desc = data["description"]
    line = next(line for line in raw.split("\n") if line.startswith("description:"))
    assert line.startswith('description: "') and line.endswith('"'), "one line, double-quoted"
    assert 1 <= len(desc) <= 1024
    assert "<" not in desc and ">" not in desc
    assert "Use when" in desc, "says when to use it"
    assert "Do NOT use" in desc, "says what not to use it for"
    for word in ("reward profil", "rollouts", "pass@k", "gym eval profile"):
        assert word in desc


def test_other_fields(front):
    data = front[1]
    assert data["license"] == "Apache-2.0"
    assert 1 <= len(data["compatibility"]) <= 500
    meta = data["metadata"]
    assert set(meta) == {"author", "version", "tags"}
    assert all(isinstance(k, str) and isinstance(v, str) and v for k, v in meta.items())
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    version = re.search(r'^version\s*=\s*"([^"]+)"', pyproject, re.M).group(1)
    assert meta["version"] == version, "metadata.version follows pyproject.toml"


def test_agrees_with_pyyaml_when_available(front):
    yaml = pytest.importorskip("yaml")
    raw, data = front
    assert yaml.safe_load(raw) == data


@pytest.mark.parametrize(
    "bad",
    [
        'name: x\ndescription: "a"\nallowed-tools: [Bash, Read]',  # flow style
        "name: x\ndescription: Use when: profiling",  # unquoted ': '
        "name: x\ndescription: >-\n  folded",  # block scalar
        'name: x\nname: y\ndescription: "a"',  # duplicate key
        'name: x\ndescription: "a"\nmetadata:\n  version: 1.0',  # not a string
        'name: x\ndescription: "a"\n# comment',
        'name: x\ndescription: "a\n',  # unterminated
        'name: x\ndescription: "a"\nmetadata:\n    author: "deep"',
        'name: x\n\tdescription: "a"',
        "name: x\ndescription: &anchor a",
        'name: x\ndescription: "a"\nmetadata:',
    ],
)
def test_parser_rejects_what_strict_validators_reject(bad):
    with pytest.raises(FrontmatterError):
        parse_frontmatter(bad)


def test_parser_reads_the_recommended_form():
    text = 'name: a-b\ndescription: "x, y: z"\nlicense: Apache-2.0\nmetadata:\n  author: "me"\n  tags: "a, b"'
    assert parse_frontmatter(text) == {
        "name": "a-b",
        "description": "x, y: z",
        "license": "Apache-2.0",
        "metadata": {"author": "me", "tags": "a, b"},
    }


@pytest.mark.parametrize("name", ["Nemo", "a--b", "-a", "a-", "a_b", "a" * 65, ""])
def test_name_rule_rejects(name):
    assert not NAME_OK(name)


def test_split_requires_delimiters():
    with pytest.raises(FrontmatterError):
        split_frontmatter("# no frontmatter\n")
    with pytest.raises(FrontmatterError):
        split_frontmatter("---\nname: x\n")
