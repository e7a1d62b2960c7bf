"""How two runs' task rows differ apart from identity: sampling parameters, prompt, dataset fields.

A paired claim ("B beats A") is a claim about whatever differs between the runs. `compare` pairs tasks by
index and reads each profile row's `sample` (the materialized row of the task's first rollout), so it can
say what that is: "runs differ only in temperature (0.7 vs 0.2)", or name every field that differs. What
the rows do not hold (the model, the verifier) it cannot see, and says so when the rows are the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

RCP = "responses_create_params"
# Names a person uses for request fields; any other request field is named `responses_create_params.<key>`.
FRIENDLY = {"input": "prompt", "instructions": "instructions (system prompt)"}
ROUTING = frozenset({"agent_ref", "task_source", "skills_ref"})
MAX_SHOWN = 40  # characters of a value quoted in the sentence


@dataclass
class FieldDiff:
    field: str  # "temperature", "prompt", "expected_answer", "responses_create_params.metadata"
    n_tasks: int  # paired tasks where it differs
    a: Any  # A's value when every differing task has the same one, else None (and varies is true)
    b: Any
    varies: bool  # the values differ from task to task

    def phrase(self, n_pairs: int) -> str:
        where = "" if self.n_tasks == n_pairs else f" in {self.n_tasks} of {n_pairs} tasks"
        if self.varies:
            return f"{self.field} (values vary by task{where})"
        a, b = _shown(self.a), _shown(self.b)
        if a is None or b is None:
            return f"{self.field}{' (' + where.strip() + ')' if where else ''}"
        return f"{self.field} ({a} vs {b}{';' + where if where else ''})"


@dataclass
class RowDifferences:
    n_pairs: int
    fields: list[FieldDiff]
    # positions (in the order `pairs` came) of the pairs whose dataset fields differ: the task rows are not
    # the same tasks, which pairing by _ng_task_index cannot see (a reordered or edited task file)
    data_differs: list[int] = field(default_factory=list)

    @property
    def summary(self) -> str:
        if not self.n_pairs:
            return "no paired task rows to compare"
        if not self.fields:
            return (
                f"the paired task rows are the same in both runs ({self.n_pairs} tasks: prompts, sampling "
                "parameters, dataset fields); what differs is outside them (model, verifier, seed, server)"
            )
        parts = [f.phrase(self.n_pairs) for f in self.fields]
        if len(parts) == 1:
            return f"runs differ only in {parts[0]}"
        return f"runs differ in {len(parts)} fields: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "n_pairs": self.n_pairs,
            "summary": self.summary,
            "fields": [
                {"field": f.field, "n_tasks": f.n_tasks, "a": f.a, "b": f.b, "varies": f.varies}
                for f in self.fields
            ],
        }


def comparable_fields(sample: dict) -> dict[str, Any]:
    """A task row's fields by the name a person uses: request fields (`temperature`, `prompt`...) and
    dataset fields, in the row's order; identity, routing stamps and underscore keys left out."""
    out: dict[str, Any] = {}
    for key, value in sample.items():
        if key == RCP and isinstance(value, dict):
            out.update(request_fields(sample))
        elif key not in ROUTING and not key.startswith("_"):
            out[key] = value
    return out


def request_fields(sample: dict) -> dict[str, Any]:
    """The row's `responses_create_params` by the name a person uses for each field."""
    request = sample.get(RCP)
    if not isinstance(request, dict):
        return {}
    return {
        FRIENDLY.get(name, name if name in SAMPLING else f"{RCP}.{name}"): sub
        for name, sub in request.items()
    }


def dataset_fields(sample: dict) -> dict[str, Any]:
    """What makes a row the task it is: every field but the request, routing stamps and underscore keys."""
    return {
        key: value
        for key, value in sample.items()
        if key not in ROUTING and not key.startswith("_") and not (key == RCP and isinstance(value, dict))
    }


def same_task(a: dict, b: dict) -> bool:
    """Whether two task rows hold the same task (their dataset fields are equal; a prompt change or another
    temperature is the same task asked differently)."""
    return not _differing(dataset_fields(a), dataset_fields(b))


# Request fields named bare: the sampling and length settings a comparison is usually about.
SAMPLING = frozenset(
    {
        "temperature", "top_p", "top_k", "min_p", "max_output_tokens", "max_tokens", "seed", "n",
        "presence_penalty", "frequency_penalty", "repetition_penalty", "stop", "reasoning", "tools",
        "tool_choice", "model",
    }
)  # fmt: skip


def between(samples_a: list[dict], samples_b: list[dict], pairs: Iterable[tuple[int, int]]) -> RowDifferences:
    """Every field whose value differs between A's and B's row of a paired task, in first-seen order, and
    which pairs' dataset fields differ."""
    seen: dict[str, list[tuple[Any, Any]]] = {}
    n_pairs, data_differs = 0, []
    for position, (i, j) in enumerate(pairs):
        n_pairs += 1
        if not same_task(samples_a[i], samples_b[j]):
            data_differs.append(position)
        differing = _differing(comparable_fields(samples_a[i]), comparable_fields(samples_b[j]))
        for name, pair in differing.items():
            seen.setdefault(name, []).append(pair)
    fields = []
    for name, values in seen.items():
        distinct = {(_key(a), _key(b)) for a, b in values}
        a, b = values[0]
        varies = len(distinct) > 1
        shown_a, shown_b = (None, None) if varies else (_plain(a), _plain(b))
        fields.append(FieldDiff(name, len(values), shown_a, shown_b, varies))
    return RowDifferences(n_pairs, fields, data_differs)


def _differing(fa: dict[str, Any], fb: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The fields whose values differ (absent on one side counts), in first-seen order."""
    out = {}
    for name in [*fa, *(k for k in fb if k not in fa)]:
        va, vb = fa.get(name, _ABSENT), fb.get(name, _ABSENT)
        if _key(va) != _key(vb):
            out[name] = (va, vb)
    return out


_ABSENT = object()


def _key(value: Any) -> bytes:
    if value is _ABSENT:
        return b"<absent>"
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits, which orjson does not write
        import json

        return json.dumps(value, sort_keys=True).encode()


def _plain(value: Any) -> Any:
    return None if value is _ABSENT else value


def _shown(value: Any) -> str | None:
    """A value short enough to quote in the sentence; None for a long one (a prompt)."""
    if value is None:
        return "absent"
    text = value if isinstance(value, str) else _key(value).decode()
    return text if len(text) <= MAX_SHOWN else None
