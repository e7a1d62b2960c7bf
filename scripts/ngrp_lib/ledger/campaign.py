"""The campaign file: metric, direction and stop rules, fixed when the ledger is created."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ..artifacts.jsonl import read_json, write_json
from ..errors import InputError, UsageError
from . import table

SCHEMA_ID = "ngrp.ledger_campaign.v1"
LEDGER_NAME = "results.tsv"
CAMPAIGN_NAME = "campaign.json"
DEFAULT_ROOT = Path("reports") / "auto_research"
# With no stop rule at all: the baseline plus up to 3 experiments, then summarise and ask.
DEFAULT_MAX_EXPERIMENTS = 4

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|min|s)")
_UNIT_MIN = {"d": 1440.0, "h": 60.0, "m": 1.0, "min": 1.0, "s": 1 / 60}
MAX_DURATION_MIN = 100 * 365.25 * 1440  # a budget beyond a century is a typo, and datetime ends at 9999


@dataclass
class Campaign:
    campaign: str
    metric: str
    direction: str
    created_at: str
    target: float | None = None
    max_experiments: int | None = None
    deadline: str | None = None
    per_run_timeout_min: float | None = None
    default_rule: bool = False
    # The paired comparison of profiles: which rollout_infos field, and which way is better. The
    # campaign metric may be a loss from a log (min) while the profiles hold rewards (max).
    compare_metric: str = "reward"
    compare_direction: str = "max"
    # Branches of the campaign: `<branch_prefix>/baseline`, `<branch_prefix>/<index>-<slug>`. Campaign
    # files written before the prefix existed get `autoresearch/<campaign>`.
    branch_prefix: str | None = None
    schema: str = SCHEMA_ID

    def deadline_at(self) -> datetime | None:
        return None if self.deadline is None else parse_instant(self.deadline)

    def prefix(self) -> str:
        return self.branch_prefix or f"autoresearch/{self.campaign}"

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LedgerPaths:
    dir: Path

    @property
    def ledger(self) -> Path:
        return self.dir / LEDGER_NAME

    @property
    def campaign(self) -> Path:
        return self.dir / CAMPAIGN_NAME

    @property
    def logs(self) -> Path:
        """One folder per run: `logs/<index>/run.log` and `run.json`."""
        return self.dir / "logs"

    @property
    def sessions(self) -> Path:
        """Session memory: `session/<YYYYmmdd_HHMMSS>/`."""
        return self.dir / "session"


def check_name(campaign: str) -> str:
    """Campaign names become folder names: keep them plain."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._\-]*", campaign or ""):
        raise UsageError(f"campaign name {campaign!r} must be letters, digits, '.', '_' or '-'")
    return campaign


def resolve_dir(directory: Path | None, campaign: str | None) -> LedgerPaths:
    """`--dir` wins; else `reports/auto_research/<campaign>`; one of them is needed."""
    if directory is not None:
        return LedgerPaths(Path(directory))
    if campaign:
        return LedgerPaths(DEFAULT_ROOT / check_name(campaign))
    raise UsageError("say which ledger: pass --dir DIR or --campaign NAME")


_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def check_branch_name(name: str, option: str) -> str:
    """The rules of `git check-ref-format --branch`, checked without git (it may not be installed)."""
    parts = name.split("/")
    if (
        not name
        or _BAD_REF.search(name)
        or name.startswith(("-", "/"))
        or name.endswith(("/", ".", ".lock"))
        or any(p.startswith(".") or p.endswith(".lock") for p in parts)
        or name == "@"
    ):
        raise UsageError(
            f"{option} {name!r} is not a valid git branch name",
            hint="use letters, digits, '-', '_', '.' and '/' (e.g. autoresearch/2026-03-24-dapo)",
        )
    return name


def parse_duration_min(text: str) -> float:
    """'90m', '2h', '1h30m', '1.5h', '45s', '1d' (or a bare number of minutes) -> minutes."""
    stripped = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", stripped):
        minutes = float(stripped)
    else:
        parts = _DURATION.findall(stripped)
        if not parts or _DURATION.sub("", stripped).strip():
            raise UsageError(f"cannot read duration {text!r}", hint="write it like 90m, 2h, 1h30m or 1d")
        minutes = sum(float(number) * _UNIT_MIN[unit] for number, unit in parts)
    if not (math.isfinite(minutes) and 0 < minutes <= MAX_DURATION_MIN):
        raise UsageError(
            f"duration {text!r} must be more than zero and at most 100 years",
            hint="write it like 90m, 2h or 1d",
        )
    return minutes


def parse_instant(text: str) -> datetime:
    """ISO 8601 instant; no offset means UTC. 'Z' is accepted on every Python version."""
    raw = text.strip()
    try:
        value = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise UsageError(
            f"cannot read time {text!r}",
            hint="use ISO 8601, e.g. 2026-03-24T18:00:00Z, or a duration like 10h",
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def parse_deadline(text: str, now: datetime) -> str:
    """A deadline is an ISO instant, or a duration from now (a budget fixed at campaign start)."""
    try:
        instant = parse_instant(text)
    except UsageError:
        try:
            instant = now + timedelta(minutes=parse_duration_min(text))
        except (UsageError, OverflowError) as exc:
            message = exc.message if isinstance(exc, UsageError) else ""
            why = f": {message}" if message and "cannot read" not in message else ""
            raise UsageError(
                f"cannot read --deadline {text!r}{why}",
                hint="use ISO 8601 (2026-03-24T18:00:00Z) or a budget from now (10h, 90m)",
            ) from None
    try:
        return instant.astimezone(timezone.utc).isoformat(timespec="seconds")
    except OverflowError:  # 9999-12-31T23:59-01:00 is past the last instant datetime holds in UTC
        raise UsageError(f"--deadline {text!r} is out of range", hint="give a date before 9999") from None


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class CampaignSpec:
    """What `ledger init` is asked for, before `init_campaign` checks it and fixes the campaign's rules."""

    campaign: str
    metric: str
    direction: str
    target: float | None = None
    max_experiments: int | None = None
    deadline: str | None = None
    per_run_timeout: str | None = None  # a duration
    compare_metric: str = "reward"
    compare_direction: str | None = None  # None: the campaign's direction
    branch_prefix: str | None = None


def init_campaign(paths: LedgerPaths, spec: CampaignSpec, *, now: datetime | None = None) -> Campaign:
    """Create the campaign file and an empty ledger; refuse if either exists."""
    now = now or now_utc()
    check_name(spec.campaign)
    if not spec.metric.strip():
        raise UsageError("--metric must name the metric (it is empty)")
    prefix = spec.branch_prefix or f"autoresearch/{now:%Y-%m-%d}-{spec.campaign}"
    check_branch_name(prefix, "--branch-prefix")
    for name, value in (
        ("--direction", spec.direction),
        ("--compare-direction", spec.compare_direction or spec.direction),
    ):
        if value not in ("max", "min"):
            raise UsageError(f"{name} must be max or min, not {value!r}")
    if spec.max_experiments is not None and spec.max_experiments < 1:
        raise UsageError("--max-experiments must be at least 1")
    if spec.target is not None and not math.isfinite(
        spec.target
    ):  # nan would leave the campaign with no stop rule
        raise UsageError(f"--target must be a finite number, not {spec.target}")
    default_rule = spec.target is None and spec.max_experiments is None and spec.deadline is None
    record = Campaign(
        campaign=spec.campaign,
        metric=spec.metric,
        direction=spec.direction,
        created_at=now.isoformat(timespec="seconds"),
        target=spec.target,
        max_experiments=DEFAULT_MAX_EXPERIMENTS if default_rule else spec.max_experiments,
        deadline=None if spec.deadline is None else parse_deadline(spec.deadline, now),
        per_run_timeout_min=None
        if spec.per_run_timeout is None
        else parse_duration_min(spec.per_run_timeout),
        default_rule=default_rule,
        compare_metric=spec.compare_metric,
        compare_direction=spec.compare_direction or spec.direction,
        branch_prefix=prefix,
    )
    with table.locked(paths.ledger):
        for existing in (paths.ledger, paths.campaign):
            if existing.exists():
                raise UsageError(
                    f"{existing} already exists; refusing to overwrite a ledger",
                    hint="use another --dir (or --campaign), or move the old ledger away yourself",
                )
        write_json(paths.campaign, record.to_json(), indent=True)
        table.create(paths.ledger)
    return record


def load_campaign(paths: LedgerPaths) -> Campaign:
    if not paths.campaign.exists():
        raise InputError(
            "no campaign file here", path=paths.campaign, hint="create one with `ngrp ledger init`"
        )
    data = read_json(paths.campaign)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_ID:
        raise InputError(f"not a ledger campaign file (schema {SCHEMA_ID} expected)", path=paths.campaign)
    try:
        campaign = Campaign(**{k: v for k, v in data.items() if k in Campaign.__dataclass_fields__})
        for value in (campaign.direction, campaign.compare_direction):
            if value not in ("max", "min"):
                raise ValueError(f"direction {value!r} is not max or min")
        campaign.deadline_at()
    except (TypeError, ValueError, UsageError) as exc:
        raise InputError(f"malformed campaign file: {exc}", path=paths.campaign) from None
    return campaign
