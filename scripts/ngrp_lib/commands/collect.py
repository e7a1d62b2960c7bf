"""`ngrp collect`: run materialized rows against vLLM / OpenAI-compatible servers."""

from __future__ import annotations

import asyncio
import os
import sys

import click

from ..artifacts.terminal import say
from ..errors import UsageError
from ._common import (
    DELAY,
    DURATION,
    INPUT_FILE,
    OUTPUT_FILE,
    class_counts,
    count,
    emit,
    failure_lines,
    json_option,
    overwrite_option,
    pass_threshold_option,
    repaired_line,
    verifier_options,
)
from .materialize import materialize_options

SAMPLING_PARAMS = ("temperature", "top_p", "max_output_tokens", "sets")

HELP = """Collect rollouts: every materialized row once, verified, in Gym's rollout shape.

All repeats of a task go to one server. Results and failed attempts are appended as they
complete; kill it at any moment and --resume finishes the run with every key exactly once.
"""

EPILOG = """\b
Example:
  ngrp collect --input tasks.jsonl --output results/rollouts.jsonl --num-repeats 8 \\
      --base-url http://127.0.0.1:8000/v1 --model my-policy --verifier math --api chat
  ngrp collect --input tasks.jsonl --output results/rollouts.jsonl --num-repeats 8 \\
      --endpoints endpoints.json --verifier math --api chat --resume
  ngrp collect --input tasks.jsonl --output results/rollouts.jsonl --num-repeats 8 \\
      --agent my_simple_agent --gym-url http://127.0.0.1:11000      # NeMo Gym /run mode
  ngrp collect ... --shard auto     # Slurm array task; then: ngrp merge results/rollouts-shard-*.jsonl ...
  ngrp collect ... --num-repeats 16 --adaptive learnable --first-round 4   # triage: rounds until mixed

\b
Files, next to OUTPUT: <stem>_materialized_inputs.jsonl (when given --input), <stem>_failures.jsonl
(every failed attempt), <stem>_run_manifest.json (checked by --resume), OUTPUT.lock (writer lock).
Rows without an agent_ref get {"name": MODEL}; --agent NAME re-routes every row (Gym's rule).
The API key is read from $OPENAI_API_KEY (or --api-key-env NAME), never from the command line.

\b
Before the first row (unless --skip-preflight), every server is asked GET <base_url>/models: it must
answer, accept the key and serve the model; a row asking for more max_output_tokens than the model's
context (vLLM's max_model_len) is refused. Of several endpoints, the ones that fail are named and left
out; the run goes on when at least half of them (rounded up) pass. Gym mode checks that the head server
and every server it lists answer. A refused run leaves an earlier run's files as they were.

\b
Stops early, keeping what it collected, after --abort-after attempts in a row got no reply, or when a
failure retrying cannot fix (HTTP 401/403/404/405, a redirect not followed: every row; a
context-length error, 400/413/422, a reply over --max-response-mb, a verifier error: rows of that many
different tasks) hits --abort-after-same rows in a row.
The summary lists the 3 most common failure messages; it says to rerun with --resume only when that
can help (never-tried keys, no reply, 429/5xx), and otherwise prints the fix.

\b
Exit codes: 0 every rollout key completed, 1 some keys still missing (the summary says what to do),
2 bad options, a server failed the pre-flight check, outputs exist without --resume/--overwrite,
changed configuration on --resume, or another collector holds the lock, 3 malformed input
(file:line named), 130 Ctrl-C (once rows run: the summary is printed, every row written stays, and
--resume sends the rest).
"""


@click.command(help=HELP, epilog=EPILOG)
@click.option(
    "--input",
    "input_path",
    type=INPUT_FILE,
    help="Raw task rows; materialized first to <stem>_materialized_inputs.jsonl.",
)
@click.option(
    "--materialized",
    type=INPUT_FILE,
    help="An already materialized file (instead of --input).",
)
@click.option("--output", required=True, type=OUTPUT_FILE, help="rollouts.jsonl")
@materialize_options
@click.option(
    "--base-url",
    "base_urls",
    multiple=True,
    help="Server base URL (http://host:port; /v1 is added when the path does not end in it), repeatable.",
)
@click.option(
    "--endpoints",
    "endpoint_files",
    multiple=True,
    type=INPUT_FILE,
    help="Endpoints file (JSON) written by `ngrp serve`; repeatable (one per node): every server is used.",
)
@click.option("--model", default=None, help="Served model name (optional with --endpoints).")
@click.option(
    "--api",
    type=click.Choice(["chat", "responses"]),
    default="chat",
    show_default=True,
    help="POST to /v1/chat/completions (converted) or /v1/responses.",
)
@click.option(
    "--api-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    help="Environment variable holding the API key (sent as a Bearer token when set).",
)
@verifier_options
@click.option(
    "--return-token-ids", is_flag=True, help="Store prompt/generation token ids and logprobs (chat)."
)
@click.option(
    "--one-request-per-rollout",
    is_flag=True,
    help="Send each rollout as its own request. By default (direct mode, --api chat) the pending repeats "
    "of a task that send the same request go as one request with n choices (at most 16): one request, "
    "template and tokenization for them (the server still prefills each rollout's prompt); rows with a "
    "seed, greedy rows (temperature 0), rows that differ, --api responses and --gym-url "
    "always go one by one.",
)
@click.option(
    "--concurrency",
    type=count(maximum=10_000),
    default=None,
    help="Sequences in flight: rollouts being generated at once, whatever the request shape (a grouped "
    "request of n choices counts n, and n never exceeds this). Default: the sum of the servers' "
    "max_num_seqs from an `ngrp serve` endpoints file, else 128 per server.",
)
@click.option(
    "--fill-batch",
    is_flag=True,
    help="Keep the servers' batch full: start at --concurrency (or its default) and raise the sequences in "
    "flight while no vLLM server has requests waiting and its tokens/s still grows (vLLM's /metrics, read "
    "every 2 s); back off when requests queue or time out. At most 4 times the starting limit.",
)
@click.option(
    "--timeout",
    type=DURATION,
    default=120.0,
    show_default=True,
    help="Seconds per sequence: a request carrying n sequences (a grouped request's n choices) waits n "
    "times this. A timeout is retried (--max-retries), each retry said on stderr and counted.",
)
@click.option(
    "--progress-every",
    type=DURATION,
    default=30.0,
    show_default=True,
    help="When stderr is not a terminal: seconds between plain progress lines on stderr (done, failed, "
    "retries by cause, sequences in flight). On a terminal a bar is redrawn instead.",
)
@click.option(
    "--max-retries",
    type=count(maximum=1000),
    default=3,
    show_default=True,
    help="Retries per request on connection errors, timeouts, 429 and 5xx.",
)
@click.option("--retry-base-delay", type=DELAY, default=0.5, show_default=True, help="First retry delay (s).")
@click.option(
    "--max-response-mb",
    type=count(1, 1 << 20),
    default=16,
    show_default=True,
    help="Largest reply read (MiB); a larger one is a response_too_large failure.",
)
@click.option(
    "--follow-redirects",
    is_flag=True,
    help="Follow HTTP redirects (by default a 3xx is a redirect_refused failure: the prompt stays put).",
)
@click.option(
    "--max-attempts",
    type=count(maximum=1000),
    default=3,
    show_default=True,
    help="--resume retries a failed key until it has this many failed attempts.",
)
@click.option(
    "--abort-after",
    type=count(),
    default=16,
    show_default=True,
    help="Stop admitting rows after this many attempts in a row got no reply.",
)
@click.option(
    "--abort-after-same",
    type=count(),
    default=5,
    show_default=True,
    help="Stop after this many rows (or tasks) in a row fail the same way, which retrying cannot fix.",
)
@click.option(
    "--skip-preflight", is_flag=True, help="Do not check the servers first (for servers without /v1/models)."
)
@click.option("--resume", is_flag=True, help="Continue an earlier run (checked against its manifest).")
@click.option(
    "--gym-url",
    default=None,
    help="NeMo Gym mode: post each row to this Gym head server (discovers the agents' /run) or /run URL.",
)
@click.option(
    "--shard",
    "shard_spec",
    default=None,
    help="Run only shard i/N (0-based, by task index) or `auto` (Slurm array); output gets -shard-i-of-N.",
)
@click.option(
    "--adaptive",
    "adaptive_rule",
    metavar="RULE",
    default=None,
    help="Rounds: every task gets --first-round repeats, then rounds of that many more go to the tasks RULE"
    " has not settled, up to --num-repeats; a task's next round starts as soon as its own round is done."
    " RULE: learnable (stop at the first pass and fail: the keep/drop"
    " decision of fixed N on the same draws, no interval); band:LOW,HIGH[,RISK] (stop when the task's Wilson"
    " 95% interval is wholly inside or outside [LOW, HIGH], when no draw to come can change fixed N's"
    " decision, or when drawing to N would lower the chance of misclassifying it by under RISK, default"
    " 0.03, under both a Jeffreys and a uniform prior; band:0.2,0.8 at N=16, R=4 measured 0.56-0.58 of fixed"
    " N's rollouts, misclassified at most 0.93 points more often than fixed N on four spread-out populations"
    " (Beta(2,3), Beta(1,1), Beta(0.3,0.3), Beta(0.25,2)), but 10.6 points more on tasks just outside the"
    " band (true rates uniform on [0.80, 0.85]) and 1.2 on Beta(20,80); RISK 0.001 (band:0.2,0.8,0.001)"
    " kept every one of them at fixed N's, at 0.81-0.84 of its rollouts (0.91-0.93 near the edges); other"
    " bands differ, see the figures); width:W (stop when"
    " the Wilson 95% interval is at most W wide; on the same four populations its final interval missed the"
    " true rate at most 0.3 points more often than fixed N's, but 5.9 points more with every rate near 0.5,"
    " where the interval is widest). Figures: references/statistics.md."
    " Needs --input.",
)
@click.option(
    "--first-round",
    type=count(maximum=1_000_000),
    default=None,
    help="With --adaptive: repeats every task gets, and the size of each later round. [default: 4, at most"
    " --num-repeats]",
)
@click.option(
    "--rounds",
    "round_sizes",
    metavar="SIZES",
    default=None,
    help="With --adaptive, instead of --first-round: the size of each round, comma-separated, the last one"
    " repeating until --num-repeats: 2 (rounds of 2), 1,1,1,1,2,2,4 (requests that grow while a task stays"
    " unsettled). The decisions are the rule's on the same draws whatever the rounds; smaller rounds use"
    " fewer rollouts and take more rounds: learnable at N=16 on Beta(2,3) pass rates uses 0.363 of fixed"
    " N's rollouts with rounds of 4, 0.292 of 2, 0.286 with 1,1,1,1,2,2,4, 0.271 one at a time (the"
    " floor). --resume refuses a change.",
)
@pass_threshold_option("With --adaptive: a pass means reward >= X (default 1).")
@overwrite_option
@json_option
def command(**options):
    shard = _refuse_expansion_options_with_materialized(options)
    output, resume = options["output"], options["resume"]
    servers = options["base_urls"] or options["endpoint_files"] or options["gym_url"]
    source = options["input_path"] or options["materialized"]
    if resume and not (servers and source):
        _bare_resume(_shard_output(output, shard), source)
    collect_options = _collect_options(options, shard)
    settings = _adaptive_settings(
        options["adaptive_rule"],
        options["first_round"],
        options["pass_threshold"],
        options["num_repeats"],
        options["round_sizes"],
    )
    result = asyncio.run(_collect(collect_options, settings))
    emit(result, options["as_json"], _render_adaptive if settings else _render)
    if result.next_step:
        say(result.next_step, err=True)
    return result.exit_code


def _shard_output(output, shard):
    from ..collect.shards import shard_output_path

    return shard_output_path(output, shard) if shard else output


def _refuse_expansion_options_with_materialized(options):
    """The options that shape the expansion of --input are refused with --materialized (its file already
    holds its rows); returns the parsed --shard."""
    from ..collect.shards import parse_shard

    if options["materialized"]:
        context = click.get_current_context()
        given = [
            "--" + name.replace("_", "-").removesuffix("s" if name == "sets" else "")
            for name in ("num_repeats", "seed_per_repeat", "interleave", "limit", "agent", *SAMPLING_PARAMS)
            if context.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)} only apply with --input; --materialized rows are run as they are",
                hint="drop them, or materialize again (ngrp materialize) with the repeats you want",
            )
    return parse_shard(options["shard_spec"]) if options["shard_spec"] else None


def _collect_options(o, shard):
    """The CollectOptions the command's options (a dict, by parameter name) describe."""
    from ..collect.http import RetryPolicy
    from ..collect.options import CollectOptions

    gym_only = o["gym_url"] and not (o["base_urls"] or o["endpoint_files"])
    endpoints = () if gym_only else tuple(_endpoints(o["base_urls"], o["endpoint_files"], o["model"]))
    return CollectOptions(
        output=_shard_output(o["output"], shard),
        endpoints=endpoints,
        endpoint_files=tuple(str(f) for f in o["endpoint_files"]),
        gym_url=o["gym_url"],
        shard=shard,
        input=o["input_path"],
        materialized=o["materialized"],
        materialize=_materialize_options(o, None if gym_only else endpoints),
        api=o["api"],
        verifier=o["verifier"],
        verifier_pattern=o["verifier_pattern"],
        answer_key=o["answer_key"],
        verify_url=o["verify_url"],
        verifier_fn=o["verifier_fn"],
        return_token_ids=o["return_token_ids"],
        group_requests=not o["one_request_per_rollout"],
        concurrency=o["concurrency"],
        fill_batch=o["fill_batch"],
        retry=RetryPolicy(
            timeout=o["timeout"],
            max_retries=o["max_retries"],
            base_delay=o["retry_base_delay"],
            max_response_bytes=o["max_response_mb"] * 2**20,
            follow_redirects=o["follow_redirects"],
        ),
        max_attempts=o["max_attempts"],
        abort_after=o["abort_after"],
        abort_after_same=o["abort_after_same"],
        api_key_env=o["api_key_env"],
        api_key=os.environ.get(o["api_key_env"]) or None,
        skip_preflight=o["skip_preflight"],
        resume=o["resume"],
        overwrite=o["overwrite"],
        progress=not o["as_json"] and sys.stderr.isatty(),
        progress_every=None if sys.stderr.isatty() else o["progress_every"],
    )


def _materialize_options(o, endpoints):
    """How --input is expanded. Rows without an agent_ref are routed to the model's name (none in Gym-only
    mode, `endpoints` None), so Gym's profiler writes agent metrics."""
    from ..artifacts.sampling import overrides_from_options
    from ..collect.materialize import MaterializeOptions

    default_agent = None if endpoints is None else (o["model"] or next((e.model for e in endpoints), None))
    return MaterializeOptions(
        num_repeats=o["num_repeats"],
        agent=o["agent"],
        default_agent=default_agent,
        seed_per_repeat=o["seed_per_repeat"],
        interleave=o["interleave"],
        limit=o["limit"],
        overrides=overrides_from_options(o["temperature"], o["top_p"], o["max_output_tokens"], o["sets"]),
    )


def _adaptive_settings(rule, first_round, pass_threshold, num_repeats, round_sizes=None):
    """The --adaptive settings, or None; the round options alone are a usage error."""
    if rule is None:
        if first_round is not None or pass_threshold is not None or round_sizes is not None:
            raise UsageError("--first-round, --rounds and --pass-threshold only apply with --adaptive RULE")
        return None
    from ..adaptive.rounds import AdaptiveSettings
    from ..artifacts.rounds_text import rounds_option
    from ..stats.adaptive import Schedule, parse_rule, parse_schedule

    if round_sizes is not None:
        if first_round is not None:
            raise UsageError(
                "--first-round and --rounds both give the rounds",
                hint="give one: --rounds R is --first-round R",
            )
        schedule = parse_schedule(round_sizes, num_repeats)
    else:
        schedule = Schedule(
            first_round=min(4, num_repeats) if first_round is None else first_round, num_repeats=num_repeats
        )
    threshold = 1.0 if pass_threshold is None else pass_threshold
    given = rounds_option(first_round, round_sizes)
    return AdaptiveSettings(parse_rule(rule), schedule, pass_threshold=threshold, rounds_option=given)


async def _collect(options, settings=None):
    """The run's HTTP session is made here, by the caller, and passed in. A Ctrl-C before the first row
    is an interrupt (exit 130, nothing sent); once rows run, it ends them with the usual summary."""
    from ..collect.http import open_session
    from ..collect.interrupt import Interrupt
    from ..collect.runner import collect

    interrupt = Interrupt()
    task = asyncio.current_task()
    assert task is not None
    try:
        with interrupt.on_sigint(asyncio.get_running_loop(), task):
            # --fill-batch may raise the limit past --concurrency: the run's own limit holds then
            async with open_session(None if options.fill_batch else options.concurrency) as session:
                if settings is not None:
                    from ..adaptive.rounds import collect_adaptive

                    return await collect_adaptive(options, settings, session, interrupt=interrupt)
                return await collect(options, session, interrupt=interrupt)
    except asyncio.CancelledError:
        if interrupt.fired:
            raise KeyboardInterrupt from None
        raise


def _bare_resume(output, source) -> None:
    """`--resume` without the run's servers or rows: when its manifest says what they were, refuse with
    the whole command (it is not guessed from the manifest silently: a server may have moved)."""
    from ..artifacts.jsonl import read_json
    from ..artifacts.names import manifest_path_for
    from ..artifacts.resume import resume_command
    from ..errors import NgrpError

    manifest = manifest_path_for(output)
    try:
        command = resume_command(read_json(manifest)) if manifest.is_file() else None
    except (NgrpError, OSError):
        command = None
    if command is None:
        return  # the usual messages name what is missing
    missing = "the run's rows (--input or --materialized)" if source is None else "the run's servers"
    raise UsageError(
        f"--resume needs the options the run started with; {missing} not given",
        hint=f"this run's command, from {manifest}: {command}",
    )


def _endpoints(base_urls, endpoint_files, model):
    from ..collect.routing import Endpoint, load_endpoint_files, normalize_base_url

    if base_urls and endpoint_files:
        raise UsageError("give --base-url or --endpoints, not both")
    if endpoint_files:
        return load_endpoint_files(endpoint_files, model)
    if not base_urls:  # CollectOptions refuses a run with no server; --model is asked for only with a URL
        return []
    if not model:
        raise UsageError("--model is required with --base-url (the served model name)")
    return [Endpoint(normalize_base_url(url), model) for url in base_urls]


def _mean_reward_words(result) -> str:
    """The mean reward with what it covers: this invocation's rollouts, which after a resume are not the
    file's (the whole run's mean is `ngrp profile`'s or `ngrp stats`')."""
    if result.mean_reward is None:
        return "mean reward - (no rollout written by this invocation)"
    words = f"mean reward {result.mean_reward:.4f} over the {result.succeeded} rollouts this invocation wrote"
    if result.skipped_completed:
        words += f" (not the {result.completed} in the file: ngrp profile or stats for the whole run)"
    return words


def _render(result) -> str:
    lines = [
        f"rollouts: {result.completed}/{result.expected} done, {result.missing} missing: {result.output}",
        f"this run: {result.succeeded} ok, {result.failed} failed attempts"
        + class_counts(result.failures_by_class)
        + f", {result.skipped_completed} already done, {result.exhausted} out of attempts",
        f"speed: {result.rollouts_per_s:.1f} rollouts/s, {result.output_tokens_per_s:,.0f} output tok/s"
        f" over {result.elapsed_s:.1f}s; {_mean_reward_words(result)}",
    ]
    lines += cost_lines(result.cost, result.grouping)
    lines += load_lines(result.load)
    if result.retries:
        causes = ", ".join(f"{cause} {n}" for cause, n in sorted(result.retries.items()))
        lines.append(f"retries: {sum(result.retries.values())} requests sent again ({causes})")
    lines += totals_lines(result.run_totals)
    lines += [f"left out: {c['problem']}" for c in result.preflight or [] if not c["ok"]]
    lines += failure_lines(result.top_failures)
    if result.repaired:
        lines.append(repaired_line(result.repaired))
    if result.stopped_early:
        lines.append(f"stopped early: {result.stopped_early}")
    if result.duplicates_found:
        lines.append(f"duplicates: {result.duplicates_found} rows repeat a completed key")
    return "\n".join(lines)


def _render_adaptive(result) -> str:
    from ..artifacts.rounds_text import NOT_RECORDED, rounds_words

    a = result.adaptive
    lines = [_render(result.collect), _passes_line(result)]
    if a:
        saved = 1 - a["rollouts_assigned"] / a["rollouts_fixed_n"] if a["rollouts_fixed_n"] else 0.0
        reasons = ", ".join(f"{k} {v}" for k, v in a["tasks_by_reason"].items())
        lines += [
            f"adaptive {a['rule']} ({rounds_words(a['rounds'], a.get('rounds_option', NOT_RECORDED))}):"
            f" {a['rounds_done']} of at most"
            f" {a['max_rounds']} rounds done over"
            f" {result.runner_calls} runner calls; tasks: {reasons}",
            f"rollouts: {a['rollouts_assigned']:,} of fixed N's {a['rollouts_fixed_n']:,}"
            f" ({saved:.0%} saved);"
            " settled per round: " + ", ".join(f"{r}: {n}" for r, n in a["settled_per_round"].items()),
        ]
    return "\n".join(lines)


def _passes_line(result) -> str:
    """What the figures above cover. Every round runs in one runner call (a task's next round starts as its
    own round ends), so they are every round's; a later call (a pass for the tasks a failed attempt held
    back) makes them the last pass's, and the line adds up every pass of this invocation."""
    if result.runner_calls <= 1:
        return "figures above: every round of this invocation (the rounds run in one pass)"
    cost = result.cost
    return (
        f"figures above: the last of {result.runner_calls} passes (a later pass retries the tasks a failed"
        f" attempt held back); every pass of this invocation: {result.succeeded} ok, {result.failed} failed"
        f" attempts over {result.elapsed_s:.1f}s"
        + (
            f", {cost['requests']} requests for {cost['rollouts']} rollouts"
            if "requests" in cost and "rollouts" in cost
            else ""
        )
    )


def load_lines(load) -> list[str]:
    """`load: sequences in flight mean 61.2, peak 64 of limit 64 (--concurrency); requests mean 4.1`."""
    if not load:
        return []
    line = (
        f"load: sequences in flight mean {load['sequences_mean']:g}, peak {load['sequences_peak']} of limit"
        f" {load['limit']} ({load['limit_source']}); requests in flight mean {load['requests_mean']:g},"
        f" peak {load['requests_peak']}"
    )
    if load.get("sequences_mean_waiting") is not None:
        line += (
            f"; while work waited for room ({load['waiting_s']:g}s): sequences mean"
            f" {load['sequences_mean_waiting']:g}"
        )
    fill = load.get("fill_batch")
    if fill:
        line += (
            f"; --fill-batch: limit raised {fill['raised']}x, lowered {fill['lowered']}x, peak"
            f" {fill['peak_limit']}, final {fill['final_limit']}"
        )
    return [line]


def totals_lines(totals) -> list[str]:
    """The whole run's cost when it took more than one invocation, a killed one's share and what the
    kills lost in flight (regenerated after them)."""
    from ..artifacts.usage import tokens_text

    if not totals or totals["invocations"] < 2:
        return []
    line = (
        f"whole run: {totals['invocations']} invocations ({totals['killed']} killed):"
        f" {totals['requests']} requests, {totals['rollouts']} rollouts written,"
        f" {tokens_text(totals['input_tokens'])} input (each rollout's prompt) and"
        f" {tokens_text(totals['output_tokens'])} output tokens"
    )
    if not totals["killed"]:
        return [line]
    share, lost = totals["killed_share"], totals["lost_in_flight"]
    return [
        line,
        f"  killed invocations: {share['rollouts']} rollouts written,"
        f" {tokens_text(share['output_tokens'])} output tokens;"
        f" lost in flight and regenerated after the kill: {_lost(lost['output_tokens'])} output,"
        f" {_lost(lost['input_tokens'])} input tokens (the server's /metrics, prompts counted per rollout"
        " as above)",
    ]


def _lost(value) -> str:
    return value if isinstance(value, str) else f"{value:,}"


def cost_lines(cost, grouping) -> list[str]:
    """`cost: 16 requests for 128 rollouts ...`, `tokens: ...`, and how rows became requests."""
    from ..artifacts.usage import GROUPING_SAVES, tokens_text

    if not cost:
        return []
    rate = cost["prefix_cache_hit_rate"]
    per_s = cost["tokens_per_s"]
    lines = [
        f"cost: {cost['requests']} requests for {cost['rollouts']} rollouts; prefix-cache hit rate "
        + ("not reported" if rate is None else f"{rate:.1%}"),
        f"tokens: input {tokens_text(cost['input_tokens'])} (each rollout's prompt; cached"
        f" {tokens_text(cost['cached_tokens'])}),"
        f" output {tokens_text(cost['output_tokens'])}, "
        + ("not reported" if per_s is None else f"{per_s:,.0f} tok/s")
        + (f"; {cost['rows_without_usage']} rows reported no usage" if cost["rows_without_usage"] else ""),
    ]
    if cost.get("prefix_cache_note"):
        lines.append(f"  prefix cache: {cost['prefix_cache_note']}")
    single = cost.get("one_request_per_rollout")
    if single and grouping.get("grouped") and single["extra_requests"]:
        lines.append(
            f"one request per rollout would have sent {single['requests']:,} requests"
            f" ({single['extra_requests']:,} more) and the same tokens: {GROUPING_SAVES}"
        )
    if grouping.get("fallback"):
        lines.append(f"requests: one per rollout ({grouping['fallback']})")
    elif grouping.get("grouped"):
        alone = "; ".join(f"{rows} rows alone: {why}" for why, rows in grouping["alone"].items())
        lines.append(
            f"requests: one per task group (n <= {grouping['cap']})" + (f"; {alone}" if alone else "")
        )
    return lines
