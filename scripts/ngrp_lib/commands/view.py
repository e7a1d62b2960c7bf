"""`ngrp view`: browse a run in a local web page (tasks, every rollout of a task, a diff of two runs)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import click

from ..artifacts.terminal import say
from ._common import INPUT_FILE, FiniteFloat, pass_threshold_option

FILE = INPUT_FILE


HELP = """Browse a run in a local web page: a task table (pass rate with n and Wilson interval, mean reward,
tokens, truncation, band; sortable, filtered by band, agent, reward, any input field and text), a page
per task with its prompt once and every rollout (reward, tokens, finish status, verifier fields,
reasoning folded), keyboard navigation, and with --compare the tasks paired by key with the flipped
ones first (the per-task test of ngrp compare) and A's and B's rollouts side by side.

The rollouts file is read once into a byte-offset index, cached outside the run folder
(~/.cache/ngrp/view-index, or $NGRP_CACHE_DIR) by file size and modification time; rows are read
back only when shown. Every page has a JSON twin (/tasks.json, /task/N.json, /compare.json).
Listens on 127.0.0.1 only unless --host says otherwise, and answers only requests addressed to
127.0.0.1, localhost, [::1] or that host on its port. A rollouts file still being collected is
followed: each reload indexes only the rows appended since ("37 of 48 expected rollouts" from the
materialized inputs; a cut-off last line is skipped with a note). Once a file is replaced, truncated or
rewritten, every request answers 409 (restart to index it again). Ctrl-C or SIGTERM stops it.

\b
Example:
  ngrp view results/rollouts.jsonl
  ngrp view runs/B/rollouts.jsonl --compare runs/A/rollouts.jsonl --port 8800

\b
Exit codes: 0 stopped with Ctrl-C, 2 bad options or the port is taken, 3 unreadable or malformed input.
"""


@click.command("view", help=HELP)
@click.argument("rollouts", type=FILE)
@click.option(
    "--compare", "other", type=FILE, help="A second run's rollouts on the same tasks: adds compare mode."
)
@click.option(
    "--inputs", type=FILE, help="Materialized inputs (default: <stem>_materialized_inputs.jsonl beside)."
)
@click.option(
    "--compare-inputs", type=FILE, help="The second run's materialized inputs (default: beside it)."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@pass_threshold_option("Pass means reward >= X (default 1.0, as ngrp profile).")
@click.option(
    "--answer-key",
    default="expected_answer",
    show_default=True,
    metavar="K",
    help="Input field holding the expected answer.",
)
@click.option(
    "--alpha",
    type=FiniteFloat(0.0, strict_minimum=True),
    default=0.05,
    show_default=True,
    help="Compare mode: a task flipped when its BH q-value is below this (as ngrp compare).",
)
@click.option("--no-cache", is_flag=True, help="Index the file again and do not write the index cache.")
def command(
    rollouts: Path,
    other: Path | None,
    inputs: Path | None,
    compare_inputs: Path | None,
    host: str,
    port: int,
    pass_threshold: float | None,
    answer_key: str,
    alpha: float,
    no_cache: bool,
) -> int:
    from ..errors import UsageError
    from ..inspect.join import resolve
    from ..profile.extras import DEFAULT_PASS_THRESHOLD
    from ..view.app import make_app, serve
    from ..view.compare import Pairs
    from ..view.index import open_index
    from ..view.queries import Views

    if not 0 < alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, not {alpha}")
    threshold = DEFAULT_PASS_THRESHOLD if pass_threshold is None else pass_threshold

    def load(path: Path, inputs_path: Path | None) -> Views:
        index = open_index(
            resolve(path, inputs_path), threshold=threshold, answer_key=answer_key, use_cache=not no_cache
        )
        how = "from the cache" if index.cached else "indexed"
        say(
            f"{path}: {len(index.facts)} rollouts, {len(index.table)} tasks ({how} in {index.seconds:.1f} s)",
            err=True,
        )
        return Views(index)

    with _clean_sigterm():  # while the run is indexed; the server then sets its own
        views = load(rollouts, inputs)
        pairs = Pairs.build(load(other, compare_inputs), views, alpha) if other else None
    if host not in ("127.0.0.1", "localhost", "::1"):
        say(f"warning: listening on {host}: anyone who can reach it can read this run", err=True)

    def ready(url: str) -> None:
        say(
            f"ngrp view: {url}" + (f"  (compare: {url}compare)" if pairs else "") + "  - Ctrl-C stops it",
            err=False,
        )

    serve(make_app(views, pairs, bind_host=host), host, port, ready)
    say("stopped", err=True)
    return 0


@contextlib.contextmanager
def _clean_sigterm() -> Iterator[None]:
    """SIGTERM before the server listens is a clean stop (exit 0), as after it; the handler before is
    put back after."""

    def stopped(signum: int, frame: object) -> None:
        raise SystemExit(0)

    try:
        previous = signal.signal(signal.SIGTERM, stopped)
    except ValueError:  # not the main thread (an embedding caller): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
