"""`run_health`: judge every rollout of a run from its rows, then write Gym's two health files.

read (materialized caps, failures sidecar, rollouts: one judgement per line) -> accumulate (one small
digest per rollout; duplicates marked once all lines are read; failure-only keys added) -> reduce (task
checks, coverage, counts; Gym's `_reduce` shape) -> write `quality_summary.json` and
`rollout_verdicts.jsonl` together, atomically.

Verdicts follow Gym: `unhealthy` when the rollout has a finding, else `unobserved` when a check could not
be judged on it, else `healthy`. Task-level findings flag the task, never its rollouts.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import orjson

from .. import __version__
from ..artifacts import jsonl
from ..artifacts.collector_retries import retries_of
from ..artifacts.jsonl import (
    BLANK,
    NOT_OBJECT,
    Problem,
    atomic_outputs,
    gc_paused,
    iter_parsed,
    refuse_existing,
)
from ..artifacts.kinds import FAILURES, refuse_swapped, refuse_wrong_kind
from ..artifacts.live import adaptive_up_to, live_run, pace, progress_block
from ..artifacts.manifest import manifest_beside
from ..artifacts.names import (
    MAX_INDEX,
    ROLLOUT_KEY,
    TASK_KEY,
    failures_beside,
    health_paths_for,
    is_index,
    key_problem,
    manifest_path_for,
    pack_key,
    rollout_key,
)
from ..artifacts.opening import require_regular
from ..errors import InputError, OutputExistsError
from .health_causes import answer_text
from .health_checks import (
    CONDITIONAL_IDS,
    REGISTRY,
    RESPONSE_IDS,
    ROLLOUT_IDS,
    TASK_IDS,
    Digest,
    Settings,
    finding,
    judge_row,
)
from .health_scan import RolloutScan, SidecarFailures
from .identical import identical_replies
from .tool_breakdown import tool_breakdown

ROLLOUT_ID_KEY = "_ng_rollout_id"
VERIFY_FAILED = "verify_failed"  # the collector's failure class for a verifier that could not score
# What a failure-only key (no rollout row, only failed attempts) can be judged on; it is not a record, so
# the record checks are unobserved on it (and Gym's coverage of them stays Gym's plus these keys).
_FAILURE_JUDGED = frozenset({"model_call_failed", "ngrp/verifier_error"})


@dataclass
class HealthResult:
    rollouts: str
    inputs: str
    failures: str | None
    outputs: dict[str, str] | None  # None when nothing was written (--no-write, or the run is in progress)
    summary: dict[str, Any]  # what quality_summary.json holds
    affected: dict[str, int]  # check -> rollouts (or tasks) with a finding
    flagged_tasks: dict[str, list[Any]]  # task check -> first task indices flagged
    unhealthy_examples: list[list[Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)  # `tool_breakdown`: which tool breaks the agent
    collector_retries: dict[str, int] = field(default_factory=dict)  # cause -> requests sent again
    identical_replies: dict[str, Any] = field(default_factory=dict)  # `identical.identical_replies`
    # `live.progress_block` while a collector holds the run's lock (who, since when, rate, ETA), else None
    in_progress: dict[str, Any] | None = None

    @property
    def verdicts(self) -> dict[str, int]:
        return self.summary["run"]["verdicts"]

    @property
    def exit_code(self) -> int:
        v = self.verdicts
        judged = self.summary["ngrp"]["keys"]["judged"]  # nothing judged is no evidence of health
        return 0 if judged and v["unhealthy"] == 0 and v["unobserved"] == 0 else 1

    def to_json(self) -> dict[str, Any]:
        run, ours = self.summary["run"], self.summary["ngrp"]
        checks = [
            {
                "id": check.id,
                "origin": check.origin,
                "scope": check.scope,
                "cause": check.cause,
                "findings": run["issues"][check.id],
                "affected": self.affected[check.id],
                **run["artifacts"]["coverage"][check.id],
            }
            for check in REGISTRY
        ]
        return {
            "tool": {"name": "ngrp", "version": __version__},
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "files": {"rollouts": self.rollouts, "inputs": self.inputs, "failures": self.failures},
            "outputs": self.outputs,
            "ignored_checks": run["ignored_checks"],
            "verdicts": run["verdicts"],
            "keys": ours["keys"],
            "checks": checks,
            "flagged_tasks": self.flagged_tasks,
            "zero_rewards": ours["zero_rewards"],
            "causes": ours["causes"],
            "unhealthy_examples": self.unhealthy_examples,
            "tools": self.tools,
            "collector_retries": self.collector_retries,
            "identical_replies": self.identical_replies,
            "in_progress": self.in_progress,
        }


def _regular_file(path: Path, role: str) -> None:
    """The readers' own check (a FIFO, device, folder or symlink loop is named as such), with the role."""
    try:
        require_regular(path)
    except InputError as exc:
        why = exc.detail.removeprefix("cannot read: ")
        raise InputError(f"cannot read {role}: {why}", path=path) from None


def _read_inputs(path: Path, steps: dict[Any, int] | None = None) -> dict[Any, int | None]:
    """Expected keys (packed) -> the row's max_output_tokens (None when unset); into `steps`, the keys
    whose row holds an integer `max_steps` (an agent's step limit the task sets). Malformed lines stop here,
    and so do a row without integer keys and a repeated key (exit 3, as every reader of materialized
    inputs does: this collector never writes either)."""
    _regular_file(path, "materialized inputs")
    caps: dict[Any, int | None] = {}
    lines: dict[Any, int] = {}
    for line, row in iter_parsed(path):
        if isinstance(row, Problem):
            if row.kind != BLANK:
                raise InputError(row.message, path=path, line=line)
            continue
        key = rollout_key(row)
        if key is None:
            raise InputError(key_problem(row), path=path, line=line)
        packed = pack_key(key)
        if packed in lines:
            raise InputError(
                f"rollout key {key} is also at line {lines[packed]}",
                path=path,
                line=line,
                hint="pass the materialized inputs as the collector wrote them (`ngrp check` lists repeats)",
            )
        lines[packed] = line
        caps[packed] = _cap(row)
        if steps is not None and type(row.get("max_steps")) is int:
            steps[packed] = row["max_steps"]
    return caps


def _keyed(task: Any, rollout: Any) -> bool:
    """is_index on both, inlined: this runs once per row."""
    return type(task) is int and type(rollout) is int and 0 <= task <= MAX_INDEX and 0 <= rollout <= MAX_INDEX


def _cap(row: dict[str, Any]) -> int | None:
    params = row.get("responses_create_params")
    cap = params.get("max_output_tokens") if isinstance(params, dict) else None
    return cap if type(cap) is int and cap > 0 else None


def _read_failures(path: Path | None) -> SidecarFailures:
    out = SidecarFailures(path)
    if path is None:
        return out
    _regular_file(path, "failures sidecar")
    for line, row in iter_parsed(path):
        if isinstance(row, Problem):
            out.unreadable += row.kind != BLANK
            continue
        out.rows += 1
        task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
        if not (is_index(task) and is_index(rollout)):
            continue
        packed = pack_key((task, rollout))
        cls = row.get("_ng_failure_class")
        cls = cls if isinstance(cls, str) else "(no class)"
        entry = out.by_key.setdefault(packed, [0, cls, line, (task, rollout)])
        entry[0] += 1
        entry[1], entry[2] = cls, line
        if cls != VERIFY_FAILED:
            out.call_errors[packed] += 1
            status = row.get("_ng_failure_http_status")
            out.statuses[str(status) if type(status) is int else "unknown"] += 1
    return out


def _unreadable(path: Path, line: int, error: str, settings: Settings) -> Digest:
    """Gym's digest for a line that does not parse: its own pseudo task, every other check unobserved."""
    task = f"__unreadable_record__:input-0:line-{line}"
    unobserved = [c for c in ROLLOUT_IDS if c != "record_unreadable" and c not in settings.ignored]
    findings = []
    if "record_unreadable" not in settings.ignored:
        detail = {"reason": "rollout record is unreadable", "error": error}
        findings.append(finding("record_unreadable", detail, {"source_file": str(path), "line": line}))
    digest = Digest(task, 0, f"{task}-0", findings, unobserved)
    digest.unscored = True
    return digest


def _failed_checks(exc: Exception, settings: Settings) -> Digest:
    """A check raised on this row (a bug): every check unobserved, and Gym's check_execution_error."""
    unobserved = [c for c in ROLLOUT_IDS if c not in settings.ignored and c != "check_execution_error"]
    digest = Digest(unobserved=unobserved)
    if "check_execution_error" not in settings.ignored:
        detail = {"reason": "check raised an unexpected exception", "error": type(exc).__name__}
        digest.findings.append(finding("check_execution_error", detail))
    return digest


def _judge(
    row: dict[str, Any],
    line: int,
    caps: dict[Any, int | None],
    settings: Settings,
    seen: set,
    steps: dict[Any, int],
) -> Digest:
    task: Any = row.get(TASK_KEY)
    rollout: Any = row.get(ROLLOUT_KEY)
    keyed = _keyed(task, rollout)
    cap = max_steps = None
    if keyed:
        packed = pack_key((task, rollout))
        seen.add(packed)
        cap = caps.get(packed)
        if steps:
            max_steps = steps.get(packed)
    if cap is None:
        cap = _cap(row)
    try:
        digest = judge_row(row, cap, settings, max_steps)
    except Exception as exc:  # a check must never stop the run: record it as Gym does
        digest = _failed_checks(exc, settings)
    if not keyed:
        task, rollout = f"__no_identity__:line-{line}", 0
        if "ngrp/record_without_identity" not in settings.ignored:
            detail = {TASK_KEY: _describe(row.get(TASK_KEY)), ROLLOUT_KEY: _describe(row.get(ROLLOUT_KEY))}
            digest.findings.insert(0, finding("ngrp/record_without_identity", detail, {"line": line}))
    explicit = row.get(ROLLOUT_ID_KEY)
    if not explicit and "ng_trajectory" in row:
        trajectory = row["ng_trajectory"]
        if type(trajectory) is dict:
            explicit = trajectory.get("rollout_id")
    digest.task, digest.rollout, digest.stage = task, rollout, row.get("stage_index")
    digest.in_inputs = keyed and packed in caps
    if keyed and type(packed) is int and digest.stage is None:
        digest.packed = packed
    if explicit:  # else "<task>-<rollout>", made when the row is written
        digest.rollout_id = str(explicit)
    return digest


def _describe(value: Any) -> Any:
    return "absent" if value is None else value if isinstance(value, (int, str)) else type(value).__name__


def _scan_rollouts(
    path: Path, caps: dict[Any, int | None], settings: Settings, steps: dict[Any, int] | None = None
) -> RolloutScan:
    _regular_file(path, "rollouts")
    scan = RolloutScan()
    append, seen = scan.digests.append, scan.seen
    for line, row in iter_parsed(path):
        if not isinstance(row, Problem):
            append(_judge(row, line, caps, settings, seen, steps or {}))
        elif row.kind == BLANK:
            scan.blank_lines += 1
        else:
            scan.unreadable += 1
            error = "ValueError" if row.kind == NOT_OBJECT else "JSONDecodeError"
            append(_unreadable(path, line, error, settings))
    scan.rows = len(scan.digests) - scan.unreadable
    return scan


def _failure_only(
    failures: SidecarFailures, scan: RolloutScan, caps: dict, settings: Settings
) -> list[Digest]:
    """A key with failed attempts and no rollout row (expected by the inputs): judged from the sidecar."""
    out = []
    unobserved = [c for c in ROLLOUT_IDS if c not in _FAILURE_JUDGED and c not in settings.ignored]
    for packed, (attempts, cls, line, (task, rollout)) in failures.by_key.items():
        if packed in scan.seen or packed not in caps:
            continue
        check = "ngrp/verifier_error" if cls == VERIFY_FAILED else "model_call_failed"
        findings = []
        if check not in settings.ignored:
            detail = {"source": "failures", "failure_class": cls, "attempts": attempts}
            findings.append(finding(check, detail, {"source_file": str(failures.path), "line": line}))
        digest = Digest(task, rollout, "", findings, list(unobserved), unscored=True, in_inputs=True,
                        from_failures=True)  # fmt: skip
        digest.packed = packed if type(packed) is int else -1
        digest.successful_call = cls == VERIFY_FAILED  # the model answered; its verifier failed
        digest.failed_call = cls != VERIFY_FAILED
        out.append(digest)
    return out


def run_health(
    inputs: Path | str,
    rollouts: Path | str,
    failures: Path | str | None = None,
    settings: Settings | None = None,
    *,
    overwrite: bool = False,
    write: bool = True,
) -> HealthResult:
    """Judge the run and write its two health files next to the rollouts file (with write=False: judge
    only, nothing written or refused, so asking again about a judged run is a read)."""
    settings = settings or Settings()
    settings.check()
    inputs, rollouts = Path(inputs), Path(rollouts)
    failures = failures_beside(rollouts, failures)
    paths = health_paths_for(rollouts)
    if write:  # an existing output is refused later, and only when what would be written differs
        refuse_existing(list(paths.values()), True, inputs=(inputs, rollouts, failures))
    refuse_swapped(inputs, rollouts)
    if failures is not None:
        refuse_wrong_kind(failures, FAILURES, option="--failures")
    from .health_summary import EXAMPLES, summarize

    with gc_paused():  # one digest per rollout accumulates: no cycles, nothing for the GC to find
        steps: dict[Any, int] = {}
        caps = _read_inputs(inputs, steps)
        sidecar = _read_failures(failures)
        scan = _scan_rollouts(rollouts, caps, settings, steps)
        digests = scan.digests + _failure_only(sidecar, scan, caps, settings)
        _sort(digests)  # Gym's order; summarize marks duplicates (adjacent copies) on its way
        summary, affected, flagged = summarize(digests, scan, sidecar, caps, settings)
    summary["ngrp"]["sources"] = {
        "rollouts": {"path": str(rollouts), "rows": scan.rows, "blank_lines": scan.blank_lines,
                     "unreadable_lines": scan.unreadable},
        "inputs": {"path": str(inputs), "keys": len(caps)},
        "failures": None if failures is None else {"path": str(failures), "rows": sidecar.rows,
                                                   "unreadable_lines": sidecar.unreadable},
    }  # fmt: skip
    causes = summary["ngrp"]["causes"]
    _add_collector_stop(causes, rollouts)
    manifest = manifest_beside(rollouts)  # read once, for the live pace, the retries and the seed
    live = live_run(rollouts)
    in_progress = None
    if live is not None:  # keys not written yet are not "never attempted": a collector is writing them
        # who and since when, not for how long: the same run asked again judges the same (no clock in it)
        causes["unscored"]["in_progress"] = {k: v for k, v in live.to_json().items() if k != "running_s"}
        causes["unscored"]["collector_stopped"] = None
        if causes["unscored"]["not_judged"]:
            causes["unscored"]["not_judged_attempted"] = "in_progress"
        # the pace is this answer's, not the judgement's: it goes beside the summary, never into it
        speed = pace(rollouts, live, summary["ngrp"]["keys"]["missing"], manifest)
        in_progress = progress_block(live, speed, adaptive_up_to(manifest))
    # a run still being written is judged and answered, never written as if final: its files would be a
    # judgement of rows that are still coming (asked when it has finished, health writes them)
    write_now = write and live is None
    # the verifier hint is a command to copy: this run's rollouts; --finding reads the verdicts file
    inspect = f"ngrp inspect {shlex.quote(str(rollouts))}"
    later = "ngrp health when the run has finished" if write else "ngrp health without --no-write"
    folder = str(rollouts.parent) if str(rollouts.parent) != "." else None
    causes["answer"] = answer_text(causes, inspect if write_now else f"{later}, then {inspect}", folder)
    tools = tool_breakdown(digests, inspect if write_now else None)
    if write_now:
        _write_unless_same(paths, summary, digests, overwrite)
    examples = [[d.task, d.rollout] for d in digests if d.findings][:EXAMPLES]
    return HealthResult(
        rollouts=str(rollouts),
        inputs=str(inputs),
        failures=None if failures is None else str(failures),
        outputs={name: str(path) for name, path in paths.items()} if write_now else None,
        summary=summary,
        affected=affected,
        flagged_tasks=flagged,
        unhealthy_examples=examples,
        tools=tools,
        collector_retries=retries_of(manifest),
        identical_replies=identical_replies(digests, manifest),
        in_progress=in_progress,
    )


def _sort(digests: list[Digest]) -> None:
    """Gym's order. The usual run (integer keys, no stages) sorts on one packed int per digest."""
    if all(d.packed >= 0 for d in digests):
        digests.sort(key=attrgetter("packed"))
    else:
        digests.sort(key=_sort_key)


def _part(value: Any) -> tuple[int, Any]:
    return (0, value) if type(value) is int else (1, str(value))


def _sort_key(digest: Digest) -> tuple[Any, ...]:
    """Gym's order (part(task), part(rollout), part(stage), integers before strings). A real key has
    integer task and rollout; only pseudo-identities (an unreadable line, a row without identity) have
    a string task."""
    t, r, s = digest.task, digest.rollout, digest.stage
    stage = _STAGE_NONE if s is None else _part(s)
    if type(t) is int and type(r) is int:
        return (0, t, r, stage)
    return (1, str(t), _part(r), stage)


_STAGE_NONE = (1, "None")  # Gym's part(None)


def _add_collector_stop(causes: dict[str, Any], rollouts: Path) -> None:
    """Keys never attempted have a cause the rows cannot show: the collector stopped. Its manifest beside
    the rollouts records why (the last invocation's stopped_early); the answer line then says it. A
    manifest that is absent, not a regular file or unreadable leaves `collector_stopped` null."""
    unscored = causes["unscored"]
    manifest = manifest_path_for(rollouts)
    if not unscored["not_judged"] or not manifest.is_file():
        return
    try:
        runs = jsonl.read_json(manifest).get("runs")
    except (InputError, OSError, AttributeError):
        return
    last = runs[-1] if isinstance(runs, list) and runs and isinstance(runs[-1], dict) else {}
    reason = last.get("stopped_early")
    if isinstance(reason, str) and reason and not _written_since(rollouts, last.get("finished_at")):
        unscored["collector_stopped"] = reason


def _written_since(rollouts: Path, finished_at: Any) -> bool:
    """True when the rollouts or failures file changed after the manifest's last invocation ended: a
    later collect that crashed before recording itself wrote them, so that entry's reason is stale
    (finished_at has whole seconds; a 2 s margin). Unknown times count as changed: say nothing."""
    from datetime import datetime

    try:
        ended = datetime.fromisoformat(str(finished_at).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return True
    paths = [rollouts, failures_beside(rollouts, None)]
    return any(p is not None and p.is_file() and p.stat().st_mtime > ended + 2 for p in paths)


def verdict_row(digest: Digest) -> dict[str, Any]:
    """One rollout_verdicts.jsonl line, with Gym's keys in Gym's order."""
    row: dict[str, Any] = {
        TASK_KEY: digest.task,
        ROLLOUT_KEY: digest.rollout,
        "rollout_id": digest.rollout_id or f"{digest.task}-{digest.rollout}",
        "verdict": digest.verdict,
        "findings": digest.findings,
        "unobserved": digest.unobserved,
    }
    if digest.stage is not None:
        row["stage_index"] = digest.stage
    return row


# A healthy rollout with integer keys and Gym's default rollout_id, as orjson writes verdict_row() of it.
_HEALTHY_ROW = (
    b'{"_ng_task_index":%d,"_ng_rollout_index":%d,"rollout_id":"%d-%d","verdict":"healthy",'
    b'"findings":[],"unobserved":[]}\n'
)


_BATCH = 4096  # verdict rows per write call (each write of the atomic writer has a fixed cost)


def _verdict_chunks(digests: list[Digest]) -> Iterator[bytes]:
    """The verdicts file's bytes, _BATCH rows at a time, in Gym's order."""
    dumps = orjson.dumps
    newline = orjson.OPT_APPEND_NEWLINE
    for start in range(0, len(digests), _BATCH):
        chunk = []
        for d in digests[start : start + _BATCH]:  # already in Gym's order
            if d.findings or d.unobserved or d.rollout_id or d.stage is not None or type(d.task) is not int:
                chunk.append(dumps(verdict_row(d), option=newline))
            else:  # most rows: the same bytes, without building a dict per row
                chunk.append(_HEALTHY_ROW % (d.task, d.rollout, d.task, d.rollout))
        yield b"".join(chunk)


def _summary_bytes(summary: dict) -> bytes:
    return orjson.dumps(summary, option=orjson.OPT_INDENT_2)


def _same_on_disk(paths: dict[str, Path], summary: dict, digests: list[Digest]) -> bool:
    """Both health files exist and hold exactly the bytes this judgement would write (compared chunk by
    chunk: the verdicts are never held whole)."""
    try:
        with open(paths["quality_summary"], "rb") as fh:
            if fh.read() != _summary_bytes(summary):
                return False
        with open(paths["rollout_verdicts"], "rb") as fh:
            for chunk in _verdict_chunks(digests):
                if fh.read(len(chunk)) != chunk:
                    return False
            return fh.read(1) == b""
    except OSError:
        return False


def _earlier_state(paths: dict[str, Path], summary: dict) -> bool:
    """Both files are this judgement of an earlier, shorter state of the same run: the same rollouts and
    inputs (and the same failures sidecar, or none read then), the same ignored checks and settings, and
    then fewer rows, or the run was in progress (written by a version that wrote during a live run).
    Such files are stale, not a user's different judgement, so they are replaced without --overwrite."""
    if not all(path.is_file() for path in paths.values()):
        return False
    try:
        old = orjson.loads(paths["quality_summary"].read_bytes())
        ours, new = old["ngrp"], summary["ngrp"]
        was, now = ours["sources"], new["sources"]
        same = (
            old["run"]["ignored_checks"] == summary["run"]["ignored_checks"]
            and ours["settings"] == new["settings"]
            and was["rollouts"]["path"] == now["rollouts"]["path"]
            and was["inputs"]["path"] == now["inputs"]["path"]
            and was["inputs"]["keys"] == now["inputs"]["keys"]
            and (was["failures"] is None or (now["failures"] or {}).get("path") == was["failures"]["path"])
        )
        live_then = ours["causes"]["unscored"].get("in_progress") is not None
        return bool(same and (live_then or was["rollouts"]["rows"] < now["rollouts"]["rows"]))
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return False  # not a summary of ours we can read: a user's file, kept


def _write_unless_same(paths: dict[str, Path], summary: dict, digests: list[Digest], overwrite: bool) -> None:
    """Write the two files; when both already hold these bytes (the same run asked again), write
    nothing; when they hold an earlier state of the same run (`_earlier_state`), replace them; when one
    exists and would change otherwise, refuse (exit 2) unless `overwrite`."""
    if not overwrite and any(path.exists() for path in paths.values()):
        if _same_on_disk(paths, summary, digests):
            return
        overwrite = _earlier_state(paths, summary)
    if not overwrite and any(path.exists() for path in paths.values()):
        existing = next(path for path in paths.values() if path.exists())
        exc = OutputExistsError(existing)
        exc.message = (
            f"{existing} already exists and this judgement differs from it (the run, its files or the "
            "options changed); refusing to overwrite it"
        )
        exc.hint = "--no-write reports without writing anything; --overwrite replaces the two files"
        raise exc
    with atomic_outputs(paths, overwrite=overwrite) as out:
        out["quality_summary"].write(_summary_bytes(summary))
        write = out["rollout_verdicts"].write
        for chunk in _verdict_chunks(digests):
            write(chunk)


__all__ = ["CONDITIONAL_IDS", "RESPONSE_IDS", "TASK_IDS", "Digest", "HealthResult", "run_health"]
