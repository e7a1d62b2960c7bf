"""Remove secrets from free text before it is stored: ledger rows and session notes, and the names of
flags and variables that hold one (`secret_name`, which `ngrp serve` masks its shown commands by).

The ledger is a plain file that gets pasted into reports and chats, so anything that looks like a
credential is replaced by `***` (the name stays, so the command is still readable). Patterns err on the
side of redacting: a lost value in a logged command is cheap, a leaked key is not.

Known values are masked too: the value of every environment variable whose name is secret-looking
(`secret_name`, the rule collect applies to its API key), wherever it appears, as a run may print its
own environment (`MY_SERVICE_TOKEN=...`, or the value alone).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError

MASK = "***"

# Well-known token shapes, redacted wherever they appear.
_TOKEN_PATTERNS = [
    r"sk-[A-Za-z0-9_\-]{8,}",  # OpenAI / Anthropic style (sk-..., sk-proj-..., sk-ant-...)
    r"nvapi-[A-Za-z0-9_\-]{8,}",  # NVIDIA API catalog
    r"hf_[A-Za-z0-9]{8,}",  # Hugging Face
    r"gh[pousr]_[A-Za-z0-9]{16,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{16,}",
    r"glpat-[A-Za-z0-9_\-]{16,}",  # GitLab
    r"xox[abprs]-[A-Za-z0-9\-]{8,}",  # Slack
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key ids
    r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWTs
    r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe secret and restricted keys
    r"AIza[0-9A-Za-z_\-]{30,}",  # Google API keys
    r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",  # SendGrid
    r"pypi-[A-Za-z0-9_\-]{16,}",  # PyPI upload tokens
    r"npm_[A-Za-z0-9]{30,}",  # npm
    r"dapi[0-9a-f]{32}",  # Databricks
    r"\b\d{8,10}:[A-Za-z0-9_\-]{35}\b",  # Telegram bot tokens
    r"hooks\.slack\.com/services/[A-Za-z0-9/]+",  # Slack webhook URLs (the path is the secret)
]
_TOKENS = re.compile("|".join(f"(?:{p})" for p in _TOKEN_PATTERNS))

# `Bearer <token>` / `Basic <token>` / `token <token>` (HTTP Authorization schemes). "basic" and
# "token" are common words, so their value must look like a credential: a digit in it, or long.
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9_\-\.~\+/=]{6,})")
_AUTH_WORD = re.compile(
    r"(?i)\b(basic|token)(\s+)((?=[A-Za-z_\-\.~\+/=]*\d)[A-Za-z0-9_\-\.~\+/=]{8,}|[A-Za-z0-9_\-\.~\+/=]{20,})"
)

# scheme://user:password@host -> scheme://user:***@host
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^\s/:@'\"]*):([^\s/@'\"]+)@")
# scheme://TOKEN@host (a token as the user name, as GitHub takes it): masked when it is long enough not to be
# a plain user name such as git@
_URL_TOKEN_USER = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^\s/:@'\"]{12,})@")

# -----BEGIN ... PRIVATE KEY----- blocks, whole (a cut-off block to the end of the text).
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)", re.DOTALL)
# Credentials that tools take as option values whose names say nothing: curl -u user:pass, mysql -pPASS,
# sshpass -p PASS, docker login -p PASS, openssl -passin pass:PASS, wandb login KEY.
_USER_PASS = re.compile(
    r"(?P<lead>(?:^|\s)(?:-u|--user|--proxy-user)(?:\s+|=))(?P<user>[^\s:'\"]*):(?P<value>[^\s'\"]+)"
)
_GLUED_P = re.compile(
    r"(?P<lead>\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n;|&]*?\s-p)(?P<value>[^\s'\"]+)"
)
_SPACED_P = re.compile(
    r"(?P<lead>\b(?:sshpass|(?:docker|podman|nerdctl|helm(?:\s+registry)?)\s+login)\b[^\n;|&]*?\s-p\s+)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s'\"]+)"
)
_PASS_ARG = re.compile(r"(?P<lead>(?:^|\s)pass:)(?P<value>[^\s'\"]+)")
_LOGIN_KEY = re.compile(r"(?P<lead>\bwandb\s+login\s+(?:--relogin\s+)?)(?P<value>[A-Za-z0-9]{20,})")
# A secret-looking compound name (aws_secret_access_key, api-key) followed by a space and a value, as
# `aws configure set aws_secret_access_key VALUE` writes it. The separator and value are a lookahead, so a
# value is itself tried as a name: `run.sh api_key VALUE` (the word before looks like a name too).
_SPACED_NAME = re.compile(
    r"(?:^|(?<=[\s\"']))[\"']?(?P<name>[A-Za-z][A-Za-z0-9]*(?:[_.\-][A-Za-z0-9]+)+)"
    r"(?=[\"']?[ \t]+(?P<value>\"[^\"]*\"|'[^']*'|(?!-)[^\s\"',;&|]+))"
)

# Name segments that make an assignment secret-looking. `key` alone is too common (sort_key,
# --metric-key), so it only counts with a qualifier or as the whole name.
_SECRET_SEGMENTS = {
    "token", "secret", "secrets", "password", "passwd", "pwd", "credential", "credentials",
    "auth", "authorization", "apikey", "bearer", "cookie", "passphrase",
}  # fmt: skip
_KEY_QUALIFIERS = {
    "api",
    "access",
    "secret",
    "private",
    "client",
    "auth",
    "signing",
    "encryption",
    "master",
    "ngc",
}

# --name value / --name=value (a flag starts a word; a spaced value is not another flag).
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_VALUE = r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"',;&|]+)"
_FLAG = re.compile(rf"(?:(?<=[\s\"'])|^)(?P<lead>--?)(?P<name>{_NAME})(?P<sep>=|\s+(?=[^\s\-]))" + _VALUE)
# NAME=value, NAME: value, ++hydra.name=value, "name": "value".
_ASSIGN = re.compile(rf"(?P<lead>\+{{0,2}}[\"']?)(?P<name>{_NAME})(?P<sep>[\"']?[ \t]*[=:][ \t]*)" + _VALUE)


def secret_name(name: str) -> bool:
    """Whether a variable/option name looks like it holds a credential."""
    parts = [p for p in re.split(r"[_.\-]+", name.lower()) if p]
    if any(p in _SECRET_SEGMENTS for p in parts) or parts == ["key"]:
        return True
    if any(p == "key" and i > 0 and parts[i - 1] in _KEY_QUALIFIERS for i, p in enumerate(parts)):
        return True
    # Glued names: HFTOKEN, OPENAIAPIKEY, accesstoken, AccountKey (Azure), PGPASSWORD.
    glued = ("apikey", "token", "secret", "password", "accountkey", "accesskey", "privatekey", "secretkey")
    return any(p.endswith(glued) for p in parts)


def _mask(match: re.Match[str]) -> str:
    if not secret_name(match.group("name")):
        return match.group(0)
    value = match.group("value")
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match.group('lead')}{match.group('name')}{match.group('sep')}{quote}{MASK}{quote}"


_NOT_SECRET_VALUES = {"", "0", "1", "true", "false", "yes", "no", "none", "null", "on", "off"}
MIN_ENV_SECRET = 6  # shorter values of secret-named variables would mask ordinary words


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the secret-named variables of `environ` (default: this process's environment),
    longest first, leaving out flags and values too short to mask safely."""
    source = os.environ if environ is None else environ
    values = {
        value
        for name, value in source.items()
        if len(value) >= MIN_ENV_SECRET and value.lower() not in _NOT_SECRET_VALUES and secret_name(name)
    }
    return sorted(values, key=len, reverse=True)


def scrub(text: str) -> str:
    """Return `text` with credentials replaced by `***`."""
    if not text:
        return text
    for value in environment_secrets():
        if value in text:
            text = text.replace(value, MASK)
    text = _PEM.sub(lambda m: f"-----BEGIN {m.group(1)}-----{MASK}-----END {m.group(1)}-----", text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@", text)
    text = _URL_TOKEN_USER.sub(lambda m: m.group(0) if m.group(2) == MASK else f"{m.group(1)}{MASK}@", text)
    for scheme in (_BEARER, _AUTH_WORD):
        text = scheme.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _USER_PASS.sub(lambda m: f"{m.group('lead')}{m.group('user')}:{MASK}", text)
    for tool in (_GLUED_P, _SPACED_P, _PASS_ARG, _LOGIN_KEY):
        text = tool.sub(_mask_value, text)
    text = _FLAG.sub(_mask, text)
    text = _ASSIGN.sub(_mask, text)
    text = _mask_spaced_names(text)
    return _TOKENS.sub(MASK, text)


def _mask_spaced_names(text: str) -> str:
    """`NAME VALUE` with a secret NAME -> `NAME ***` (the value lies outside each match: see _SPACED_NAME)."""
    out: list[str] = []
    done = 0
    for match in _SPACED_NAME.finditer(text):
        if match.start("name") < done or not secret_name(match.group("name")):
            continue
        start, end = match.span("value")
        value = match.group("value")
        quote = value[0] if value[:1] in ("'", '"') else ""
        out.append(f"{text[done:start]}{quote}{MASK}{quote}")
        done = end
    return "".join(out) + text[done:]


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match.group('lead')}{quote}{MASK}{quote}"


_ENV_LINE = re.compile(r"^\s*(?:export\s+)?[A-Z_][A-Z0-9_]*=")


def refuse_env_dump(field: str, text: str, *, limit: int = 5) -> None:
    """Refuse text that looks like `env` / `printenv` output: it has no place in a ledger."""
    lines = text.splitlines()
    if len(lines) >= limit and sum(bool(_ENV_LINE.match(line)) for line in lines) >= limit:
        raise UsageError(
            f"--{field} looks like an environment dump ({len(lines)} lines of NAME=value)",
            hint="record the command you ran, not the environment; put settings in the recipe or the branch",
        )


class StreamMask:
    """Masks known secret values in a byte stream written in chunks (a launched command's output): each
    value becomes `***` even when a chunk boundary cuts it. The tail that could still begin a value is held
    back until the next chunk (or `flush`), so at most the longest value's length minus one byte waits."""

    def __init__(self, values: list[str]) -> None:
        self.values = sorted({v.encode("utf-8", "surrogatepass") for v in values if v}, key=len, reverse=True)
        self.pending = b""
        self.masked = 0  # values masked so far

    def feed(self, data: bytes) -> bytes:
        if not self.values:
            return data
        buf = self.pending + data
        for value in self.values:
            if value in buf:
                self.masked += buf.count(value)
                buf = buf.replace(value, MASK.encode())
        hold = self._held(buf)
        self.pending = buf[len(buf) - hold :] if hold else b""
        return buf[: len(buf) - hold]

    def flush(self) -> bytes:
        out, self.pending = self.pending, b""
        return out

    def _held(self, buf: bytes) -> int:
        """The length of the longest end of `buf` that begins some value (without being all of it)."""
        longest = min(len(self.values[0]) - 1, len(buf))
        for size in range(longest, 0, -1):
            tail = buf[-size:]
            if any(len(value) > size and value.startswith(tail) for value in self.values):
                return size
        return 0


def mask_file(path: Any, values: list[str], block: int = 1 << 20) -> bool:
    """Mask `values` in a file written by another program (a Slurm job's log): rewritten atomically in
    place when it held one; True then."""
    import tempfile
    from pathlib import Path

    path = Path(path)
    mask = StreamMask(values)
    if not mask.values or not path.is_file():
        return False
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    changed = False
    try:
        with open(path, "rb") as source, os.fdopen(fd, "wb") as out:
            for chunk in iter(lambda: source.read(block), b""):
                out.write(mask.feed(chunk))
            out.write(mask.flush())
        changed = mask.masked > 0
        if changed:
            os.replace(temp, path)
    finally:
        if not changed:
            os.unlink(temp)
    return changed
