"""Verifiers: built-in (exact, math, mcq, regex), a NeMo Gym resources server's `/verify`, or a user function.

A built-in verifier compares the response text with the row's answer field (`expected_answer` unless
`--answer-key` says otherwise) and returns Gym-style fields: `reward`, `extracted_answer`, `is_correct`.
`/verify` is posted with collect's retry policy (http.py: per-request timeout, bounded retries). `score`
runs any verifier and turns whatever it raises into a `verify_failed` attempt; `collect` and `reverify`
both go through it.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable
from typing import Any, Protocol

from ..artifacts.answers import extract_math, math_equal
from ..artifacts.response import response_text
from ..errors import UsageError
from .http import AttemptFailed, RetryPolicy, post_json

BUILTINS = ("exact", "math", "mcq", "regex")


class VerifyError(Exception):
    """Verification could not produce a reward (recorded as a failed attempt)."""


# ---- answer extraction -------------------------------------------------------------------------


_MCQ_PATTERNS = (
    # after "answer": a capital letter, or a small one that ends the phrase ("Answer: b"), so that
    # "the answer is a bit tricky" does not read as A
    re.compile(r"(?i:answer\s*(?:is)?)\s*[:\-]?\s*\(?\**([A-J]\b|[a-j](?=\)?\**\s*(?:$|[.,;:!?\n])))"),
    re.compile(r"\\boxed\{\s*\(?([A-J])\)?\s*\}"),
    re.compile(r"\(([A-Ja-j])\)"),
    re.compile(r"\b([A-J])\b"),
)


def extract_letter(text: str) -> str | None:
    for pattern in _MCQ_PATTERNS:
        found = pattern.findall(text)
        if found:
            return found[-1].upper()
    return None


# ---- the verifier objects -----------------------------------------------------------------------


MAX_EXTRACTED = 1000  # characters of an extracted answer stored (the whole reply is in `response`)


def bounded_answer(text: str | None, limit: int = MAX_EXTRACTED) -> str | None:
    """The answer as stored: whole up to `limit` characters; longer, its start plus its length and a
    digest, so two long answers still compare equal only when they are equal (majority@k)."""
    if text is None or len(text) <= limit:
        return text
    import hashlib

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:limit]}...[{len(text)} characters, sha256 {digest}]"


def _fields(extracted: str | None, correct: bool) -> dict[str, Any]:
    answer = bounded_answer(extracted)
    return {"reward": 1.0 if correct else 0.0, "extracted_answer": answer, "is_correct": correct}


def verify_exact(text: str, expected: str) -> dict[str, Any]:
    got = text.strip()
    return _fields(got, got == expected.strip())


def verify_math(text: str, expected: str) -> dict[str, Any]:
    got = extract_math(text)
    return _fields(got, got is not None and math_equal(got, expected))


def verify_mcq(text: str, expected: str) -> dict[str, Any]:
    got = extract_letter(text)
    want = extract_letter(expected.strip()) or expected.strip().upper()
    return _fields(got, got is not None and got == want)


def regex_verifier(pattern: str) -> Callable[[str, str], dict[str, Any]]:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--verifier-pattern is not a valid regex: {exc}") from exc

    def verify(text: str, expected: str) -> dict[str, Any]:
        matches = list(compiled.finditer(text))
        if not matches:
            return _fields(None, False)
        last = matches[-1]
        got = last.group(1) if compiled.groups else last.group(0)
        if got is None:  # an optional group that took no part in the match: no answer
            return _fields(None, False)
        return _fields(got.strip(), got.strip() == expected.strip())

    return verify


class Verifier:
    """One verification strategy, chosen from the options; `await verifier(row, response, session)`."""

    kind = "builtin"
    needs_answer = True

    def __init__(self, name: str, answer_key: str, pattern: str | None = None) -> None:
        table = {"exact": verify_exact, "math": verify_math, "mcq": verify_mcq}
        self.name = name
        if name == "regex":
            if not pattern:
                raise UsageError("--verifier regex needs --verifier-pattern REGEX")
            self.check = regex_verifier(pattern)
        else:
            self.check = table[name]
        self.answer_key = answer_key

    async def __call__(self, row: dict, response: dict, session: Any) -> dict[str, Any]:
        expected = row.get(self.answer_key)
        if expected is None:
            raise VerifyError(f"row has no {self.answer_key!r} field to compare with")
        return self.check(response_text(response), str(expected))


class UrlVerifier:
    """POST the row plus `response` to a NeMo Gym resources server's `/verify`; keep what it returns.

    Connection errors, timeouts, 429 and 5xx are retried as collect retries the model (`policy`); when the
    retries run out, or on another status, the attempt fails as `verify_failed` with the HTTP status and
    the start of the body."""

    kind = "url"
    needs_answer = False

    def __init__(self, url: str, timeout: float, policy: RetryPolicy | None = None) -> None:
        self.url = url
        self.policy = policy or RetryPolicy(timeout=timeout)

    async def __call__(self, row: dict, response: dict, session: Any) -> dict[str, Any]:
        import orjson

        from ..artifacts import jsonl

        body = orjson.dumps({**row, "response": response})
        try:
            payload = await post_json(
                session, self.url, body, {"content-type": "application/json"}, self.policy
            )
        except AttemptFailed as failure:
            failure.failure_class = "verify_failed"
            failure.message = f"/verify: {failure.message}"
            raise
        try:
            result = jsonl.loads(payload)  # a lone surrogate escape reads as U+FFFD
        except orjson.JSONDecodeError as exc:
            raise VerifyError(f"/verify answered something that is not JSON: {payload[:300]!r}") from exc
        if not isinstance(result, dict) or "reward" not in result:
            raise VerifyError("/verify returned no 'reward'")
        return {k: v for k, v in result.items() if k not in ("response", "responses_create_params")}


class FunctionVerifier:
    """A user function `module:function(row, response) -> float | dict with 'reward'` (sync or async)."""

    kind = "function"
    needs_answer = False

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.function = load_function(spec)

    async def __call__(self, row: dict, response: dict, session: Any) -> dict[str, Any]:
        value = self.function(row, response)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, (bool, int, float)):
            return {"reward": float(value)}
        if isinstance(value, dict) and "reward" in value:
            return value
        raise VerifyError(
            f"verifier function returned {type(value).__name__}, not a number or a dict with 'reward'"
        )


async def score(verifier: Any, row: dict, response: dict, session: Any) -> dict[str, Any]:
    """Run one verifier; anything it raises becomes a `verify_failed` attempt (never a crash of the run)."""
    try:
        return await verifier(row, response, session)
    except AttemptFailed:
        raise
    except Exception as exc:  # VerifyError, or anything a user verifier raises
        raise AttemptFailed("verify_failed", type(exc).__name__, str(exc)[:2000]) from exc


def describe(verifier: Any) -> str:
    """A credential-free name of the verifier: `builtin:math`, `url:http://host/verify`, `function:m:f`."""
    if isinstance(verifier, UrlVerifier):
        from .routing import public_url

        return f"url:{public_url(verifier.url)}"
    if isinstance(verifier, FunctionVerifier):
        return f"function:{verifier.spec}"
    return f"builtin:{verifier.name}"


def load_function(spec: str) -> Callable:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--verifier-fn must be module:function, got {spec!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")  # modules in the working directory, like `python -m`
    try:
        module = importlib.import_module(module_name)
        function = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load verifier function {spec!r}: {exc}") from exc
    if not callable(function):
        raise UsageError(f"{spec!r} is not callable")
    return function


def make_verifier(
    name: str | None,
    *,
    answer_key: str,
    pattern: str | None,
    url: str | None,
    function: str | None,
    timeout: float,
    policy: RetryPolicy | None = None,
):
    chosen = [x for x in (name, url, function) if x]
    if len(chosen) != 1:
        raise UsageError(
            "choose exactly one verifier: --verifier exact|math|mcq|regex, "
            "--verify-url URL or --verifier-fn MOD:FN"
        )
    if url:
        return UrlVerifier(url, timeout, policy)
    if function:
        return FunctionVerifier(function)
    assert name is not None  # exactly one of the three was chosen
    return Verifier(name, answer_key, pattern)


class VerifierSettings(Protocol):
    """What `collect` and `reverify` options share to choose a verifier."""

    @property
    def verifier(self) -> str | None: ...
    @property
    def answer_key(self) -> str: ...
    @property
    def verifier_pattern(self) -> str | None: ...
    @property
    def verify_url(self) -> str | None: ...
    @property
    def verifier_fn(self) -> str | None: ...
    @property
    def retry(self) -> RetryPolicy: ...


def verifier_for(options: VerifierSettings) -> Any:
    """The verifier a command's options name, with `/verify` calls on the run's retry policy."""
    return make_verifier(
        options.verifier,
        answer_key=options.answer_key,
        pattern=options.verifier_pattern,
        url=options.verify_url,
        function=options.verifier_fn,
        timeout=options.retry.timeout,
        policy=options.retry,
    )
