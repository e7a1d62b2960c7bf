"""Lint helpers for the skill bundle, used by tests/test_skill_*.py.

The frontmatter parser accepts only the YAML subset a strict validator (strictyaml in skills-ref,
PyYAML in Anthropic's quick_validate.py, gray-matter in the `skills` CLI) reads the same way:
`key: value` lines with double-quoted or plain scalars, and one level of nested block mapping. Flow
style, block scalars, anchors, tags, comments, tabs and duplicate keys are rejected.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
KEY_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):(?: (.*))?$")
# Plain scalars that YAML would turn into something other than a string.
NON_STRING_PLAIN = re.compile(
    r"^(~|null|Null|NULL|true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF"
    r"|[-+]?(\d[\d_]*)?\.?\d+([eE][-+]?\d+)?|0x[0-9a-fA-F]+|0o[0-7]+|\.inf|\.nan)$"
)
PLAIN_BAD_START = tuple("[]{}>|&*!%@`'\"#,?:-") + (" ",)
# Zero-width, bidi controls, BOM, soft hyphen and other invisible format characters.
INVISIBLE = {0x00AD, 0x180E, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029, 0xFEFF}
INVISIBLE |= set(range(0x202A, 0x202F)) | set(range(0x2060, 0x2070))


class FrontmatterError(ValueError):
    pass


def split_frontmatter(text: str) -> tuple[str, str]:
    """Return (frontmatter, body). The file must start with a `---` line and close it with another."""
    lines = text.split("\n")
    if not lines or lines[0] != "---":
        raise FrontmatterError("SKILL.md must start with a line '---'")
    for i, line in enumerate(lines[1:], start=1):
        if line == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise FrontmatterError("frontmatter is not closed by a line '---'")


def _scalar(raw: str, where: str) -> str:
    if raw.startswith('"'):
        if len(raw) < 2 or not raw.endswith('"'):
            raise FrontmatterError(f"{where}: unterminated double-quoted string")
        try:
            value = json.loads(raw)  # YAML double-quoted escapes used here are a subset of JSON's
        except json.JSONDecodeError as exc:
            raise FrontmatterError(f"{where}: bad double-quoted string: {exc}") from None
        if not isinstance(value, str):
            raise FrontmatterError(f"{where}: not a single string")
        return value
    if not raw or raw.startswith(PLAIN_BAD_START):
        raise FrontmatterError(f"{where}: value {raw!r} needs quotes (flow style or special start)")
    if ": " in raw or " #" in raw or raw.endswith(":") or "\t" in raw:
        raise FrontmatterError(f"{where}: plain value {raw!r} contains ': ' or ' #'; quote it")
    if NON_STRING_PLAIN.match(raw):
        raise FrontmatterError(f"{where}: plain value {raw!r} is not a string in YAML; quote it")
    return raw


def parse_frontmatter(front: str) -> dict:
    """Parse the strict subset; values are str or dict[str, str]."""
    result: dict = {}
    current: dict | None = None
    for number, line in enumerate(front.split("\n"), start=1):
        where = f"frontmatter line {number}"
        if "\t" in line:
            raise FrontmatterError(f"{where}: tab character")
        if not line.strip():
            raise FrontmatterError(f"{where}: blank line")
        if line.lstrip().startswith("#"):
            raise FrontmatterError(f"{where}: comments are not allowed")
        indented = line.startswith("  ")
        if indented and current is None:
            raise FrontmatterError(f"{where}: unexpected indentation")
        body = line[2:] if indented else line
        if indented and body.startswith(" "):
            raise FrontmatterError(f"{where}: only one level of nesting (two spaces) is allowed")
        match = KEY_RE.match(body)
        if not match:
            raise FrontmatterError(f"{where}: expected 'key: value', got {line!r}")
        key, raw = match.group(1), (match.group(2) or "").rstrip()
        target = current if indented else result
        if key in target:
            raise FrontmatterError(f"{where}: duplicate key {key!r}")
        if indented:
            target[key] = _scalar(raw, where)
        elif raw == "":
            current = result[key] = {}
        else:
            current = None
            result[key] = _scalar(raw, where)
    for key, value in result.items():
        if value == {}:
            raise FrontmatterError(f"key {key!r} has an empty value")
    return result


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(markdown: str) -> set[str]:
    slugs = set()
    in_code = False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            slugs.add(github_slug(line.lstrip("#")))
    return slugs


LINK_RE = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
PATH_RE = re.compile(r"`((?:references|scripts|schemas|evals|tests)/[A-Za-z0-9_./-]+)`")


def relative_targets(markdown: str) -> list[str]:
    """Markdown link targets that are not URLs, plus backticked bundle paths (`references/x.md`)."""
    targets = [t for t in LINK_RE.findall(markdown) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]
    targets += [p.rstrip(".") for p in PATH_RE.findall(markdown)]
    return targets


def broken_links(md_path: Path, repo: Path, foreign: set[str]) -> list[str]:
    """Relative targets in md_path that do not resolve. Bundle paths resolve from the repo root."""
    text = md_path.read_text(encoding="utf-8")
    problems = []
    for target in relative_targets(text):
        if target in foreign:
            continue
        path_part, _, fragment = target.partition("#")
        if not path_part:
            file = md_path
        elif path_part.startswith(("references/", "scripts/", "schemas/", "evals/", "tests/")):
            file = repo / path_part
        else:
            file = (md_path.parent / path_part).resolve()
        if not file.exists():
            problems.append(f"{md_path.name}: {target} does not exist")
        elif fragment and file.suffix == ".md" and fragment not in headings(file.read_text(encoding="utf-8")):
            problems.append(f"{md_path.name}: {target}: no heading with anchor #{fragment}")
    return problems


def invisible_characters(text: str) -> list[str]:
    """Invisible or control characters (other than newline and tab), as 'line:col U+XXXX NAME'."""
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        for col, ch in enumerate(line, start=1):
            code = ord(ch)
            category = unicodedata.category(ch)
            if code in INVISIBLE or category == "Cf" or (category == "Cc" and ch != "\t"):
                found.append(f"{number}:{col} U+{code:04X} {unicodedata.name(ch, '?')}")
    return found


def schema_property_names(schema: dict) -> set[str]:
    """Property names at the top of a schema: the root object, or the items of a root array,
    including those under allOf/anyOf/oneOf and local $refs."""
    defs = schema.get("$defs", {})

    def names(node: dict, depth: int = 0) -> set[str]:
        if depth > 5 or not isinstance(node, dict):
            return set()
        ref = node.get("$ref", "")
        out = set(node.get("properties", {}))
        if ref.startswith("#/$defs/"):
            out |= names(defs.get(ref.split("/")[-1], {}), depth + 1)
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(key, []):
                out |= names(sub, depth + 1)
        if "items" in node and node.get("type") == "array":
            out |= names(node["items"], depth + 1)
        return out

    return names(schema)


INVOCATION_RE = re.compile(
    r"(?:python3\s+\S*scripts/ngrp\.py|(?<![\w/.-])ngrp|\$NGRP)\s+([a-z][a-z-]*)([^`#|;&]*)"
)


def cli_invocations(markdown: str) -> list[tuple[str, list[str], list[str]]]:
    """(line, words after the command name, --options) for each ngrp call in code blocks and inline code.

    Continuation lines (ending in a backslash) are joined; options after a bare `--` are not ngrp's.
    """
    chunks, in_code, pending = [], False, ""
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            in_code, pending = not in_code, ""
        elif in_code:
            pending += line.rstrip("\\").rstrip() + " "
            if not line.rstrip().endswith("\\"):
                chunks.append(pending)
                pending = ""
        else:
            chunks += re.findall(r"`([^`]+)`", line)
    calls = []
    for chunk in chunks:
        for match in INVOCATION_RE.finditer(chunk):
            words = match.group(2).split()
            if "--" in words:
                words = words[: words.index("--")]
            options = [w.split("=", 1)[0] for w in words if w.startswith("--")]
            calls.append((chunk.strip(), [match.group(1), *words], options))
    return calls
