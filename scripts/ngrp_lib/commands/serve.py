"""`ngrp serve`: start local vLLM servers and write an endpoints file; `serve stop` / `serve status`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..artifacts.terminal import say
from ..errors import UsageError
from ._common import DELAY, FOLDER, OUTPUT_FILE, FiniteFloat, count, emit, json_option

EXIT_CODES = """\b
Exit codes: 0 ok, 1 a server failed to start or is not healthy, 2 usage error or no vLLM found,
3 unreadable endpoints file or missing model directory."""


def _endpoints_option(help_text: str) -> Any:
    return click.option(
        "--endpoints-file",
        type=OUTPUT_FILE,
        default=Path("ngrp_endpoints.json"),
        show_default=True,
        help=help_text,
    )


endpoints_option = _endpoints_option(
    "Where the endpoints (base_url, model, pid, log) are written; `collect --endpoints` reads it."
)
endpoints_read_option = _endpoints_option(
    "The endpoints file to read: one `ngrp serve` wrote, or a hand-written one (base_url, model)."
)


class ServeGroup(click.Group):
    """`ngrp serve --model M ...` means `ngrp serve start --model M ...`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["start", *args]
        return super().parse_args(ctx, args)


@click.group(cls=ServeGroup, epilog=EXIT_CODES)
def command() -> None:
    """Start local vLLM servers (one per visible GPU, or one CPU server), wait until healthy, and write
    an endpoints file for `ngrp collect --endpoints`. `ngrp serve ...` is short for `ngrp serve start ...`.

    \b
    Example:
      ngrp serve --model ~/models/qwen3-8b --served-model-name policy --detach
      ngrp collect --input tasks.jsonl --output rollouts.jsonl --endpoints ngrp_endpoints.json ...
      ngrp serve stop
      ngrp serve --model ./m --dry-run -- --max-model-len 4096   # vLLM arguments go after --
    """


@command.command("start", epilog=EXIT_CODES, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--model", required=True, help="Model directory (or a hub id on GPU machines with network).")
@click.option("--served-model-name", help="Name clients use in requests. Default: the model directory name.")
@click.option("--num-servers", type=count(1, 1024), help="Default: one per visible GPU group; 1 on CPU.")
@click.option(
    "--tensor-parallel",
    type=count(1, 1024),
    default=1,
    show_default=True,
    help="GPUs per model replica.",
)
@click.option(
    "--data-parallel",
    type=count(1, 1024),
    default=1,
    show_default=True,
    help="vLLM data-parallel replicas inside each server.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "gpu", "cpu"]),
    default="auto",
    show_default=True,
    help="auto: GPUs if CUDA_VISIBLE_DEVICES or nvidia-smi -L shows any, else the CPU build.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Bind address (127.0.0.1 keeps servers local)."
)
@click.option(
    "--port", type=click.IntRange(1, 65535), help="First port (then port+1, ...). Default: free ports."
)
@click.option(
    "--vllm-python",
    help="Python with vllm. Default: $NGRP_VLLM_PYTHON, $NGRP_VLLM_VENV/bin/python, "
    "python3 if it has vllm, else the venv made by .ci/install_vllm.sh.",
)
@endpoints_option
@click.option(
    "--log-dir",
    type=FOLDER,
    help="Server logs. Default: <endpoints-file stem>_logs/ next to the endpoints file.",
)
@click.option(
    "--timeout",
    type=FiniteFloat(1.0),
    default=600,
    show_default=True,
    help="Seconds to wait for /health (at least 1).",
)
@click.option("--dry-run", is_flag=True, help="Print the exact commands and environment; start nothing.")
@click.option(
    "--detach",
    is_flag=True,
    help="Return once healthy and leave the servers running (stop: `ngrp serve stop`).",
)
@json_option
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED)
def start(
    vllm_args: tuple[str, ...], dry_run: bool, detach: bool, as_json: bool, timeout: float, **kw
) -> int:
    """Start vLLM servers; without --detach, serve until Ctrl-C/SIGTERM, then stop every one of them.

    Arguments after `--` go to every vLLM server unchanged. On CPU the defaults are the ones that start
    fast and survive seeded requests: --enforce-eager, --distributed-executor-backend uni,
    --no-enable-chunked-prefill, VLLM_ENABLE_V1_MULTIPROCESSING=0, VLLM_CPU_KVCACHE_SPACE=1 (GiB),
    HF_HUB_OFFLINE=1; any of them you pass yourself wins. --port, --host and --served-model-name belong
    before the `--` (ngrp polls and records them); --api-key and --hf-token go to vLLM through
    VLLM_API_KEY and HF_TOKEN, never its command line.

    \b
    Example:
      ngrp serve start --model ./smollm2 --served-model-name smollm2 --detach -- --max-model-len 2048
    """
    from ..serve import plan as serve_plan

    opts = serve_plan.ServeOptions(timeout=timeout, extra_args=list(vllm_args), **kw)
    if dry_run:
        plan = serve_plan.plan(opts, python=_python_for_dry_run(serve_plan, opts.vllm_python))
        emit(plan, as_json, _render_plan)
        return 0
    from ..serve import run as serve_run

    result = serve_run.serve(serve_plan.plan(opts), detach=detach, timeout=timeout, progress=_progress)
    emit(result, as_json, _render_result)
    return 0


def _python_for_dry_run(serve_plan, explicit: str | None) -> str:
    try:
        return serve_plan.find_vllm_python(explicit)
    except UsageError as exc:
        _progress(f"warning: {exc.message}; showing 'python3'")
        return explicit or "python3"


@command.command("stop", epilog=EXIT_CODES)
@endpoints_read_option
@click.option(
    "--grace",
    type=DELAY,
    default=15,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL (0 or more).",
)
@json_option
def stop(endpoints_file: Path, grace: float, as_json: bool) -> int:
    """Stop every server listed in an endpoints file (whole process groups), then delete the file.

    Only servers `ngrp serve` started are stopped (the file gives their pid and start time, and the process
    must still be vLLM's server on the entry's port, leading its own session); any other process, and a
    server of a hand-written entry, is left running and named, and a file ngrp serve did not write is kept.

    \b
    Example:
      ngrp serve stop --endpoints-file ngrp_endpoints.json
    """
    from ..serve import run as serve_run

    result = serve_run.stop(endpoints_file, grace=grace)
    emit(result, as_json, _render_stop)
    return 0


@command.command("status", epilog=EXIT_CODES)
@endpoints_read_option
@click.option(
    "--api-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    help="Environment variable holding the API key of servers started with --api-key.",
)
@json_option
def status(endpoints_file: Path, api_key_env: str, as_json: bool) -> int:
    """Show whether each listed server is running and healthy, and whether `ngrp collect` could use it:
    GET /v1/models answers with the key, lists the endpoint's model, and its context (max_model_len).
    A server of a hand-written entry (no pid) gets that check only. URLs are shown without credentials.
    Exit 1 if any server is not running, not healthy or fails that check.

    \b
    Example:
      ngrp serve status --endpoints-file ngrp_endpoints.json --json
    """
    import os

    from ..artifacts.redact import masked_errors, server_redactor
    from ..serve import run as serve_run

    key = os.environ.get(api_key_env) or None
    with masked_errors(server_redactor([], key)):  # the entries' URL passwords: masked by status itself
        rows = serve_run.status(endpoints_file, api_key=key, api_key_env=api_key_env)
    emit({"endpoints_file": str(endpoints_file), "endpoints": rows}, as_json, _render_status)
    return 0 if rows and all(r["healthy"] is not False and r["problem"] is None for r in rows) else 1


def _progress(message: str) -> None:
    say(message, err=True)


def _render_plan(plan) -> str:
    lines = [
        f"# {len(plan.servers)} {plan.device.upper()} server(s): {plan.model} as '{plan.served_model_name}'"
    ]
    for s in plan.servers:
        lines += [f"# server {s.index} -> {s.base_url}  (log {s.log})", s.shell_line()]
    lines.append(f"# endpoints file: {plan.endpoints_file}")
    return "\n".join(lines)


def _render_result(result) -> str:
    lines = [f"{e['base_url']}  model={e['model']}  pid={e['pid']}  log={e['log']}" for e in result.endpoints]
    lines.append(f"endpoints file: {result.endpoints_file} (ready in {result.ready_seconds:.1f}s)")
    if result.detached:
        lines.append(f"stop with: ngrp serve stop --endpoints-file {result.endpoints_file}")
    else:
        lines.append("stopped every server")
    return "\n".join(lines)


def _render_stop(result) -> str:
    parts = [
        f"stopped {len(result.stopped)}",
        f"killed {len(result.killed)}",
        f"already gone {len(result.already_gone)}",
    ]
    lines = [", ".join(parts) + (f"; removed {result.endpoints_file}" if result.removed else "")]
    if result.not_started:
        lines.append(
            f"left running {len(result.not_started)} server(s) ngrp serve did not start (the file gives"
            f" no pid and start time for them): {', '.join(result.not_started)}"
        )
    if not result.removed:
        lines.append(
            f"kept {result.endpoints_file}: ngrp serve did not write it (delete it yourself if done)"
        )
    return "\n".join(lines)


def _render_status(data: dict) -> str:
    lines = []
    for r in data["endpoints"]:
        if r["started_by_serve"]:
            line = f"{r['base_url']}  pid={r['pid']}  running={r['running']}  healthy={r['healthy']}"
        else:
            line = f"{r['base_url']}  not started by ngrp serve (no pid): probed only"
        if r["problem"] is None and r["models"] is not None:
            context = f" (context {r['max_model_len']} tokens)" if r["max_model_len"] else ""
            line += f"  serves {r['model']!r}{context}"
        lines.append(line + (f"\n  problem: {r['problem']}" if r["problem"] else ""))
    return "\n".join(lines) or "no endpoints listed"
