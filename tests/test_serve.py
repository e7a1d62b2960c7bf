"""`ngrp serve` without vLLM: planning (flags, env, GPU split, ports), finding the vLLM python, dry runs,
the endpoints schema, and process supervision (process groups, health wait, failure, signals).

The supervision tests run a stand-in process (Python's http.server serving a file named `health`) so
they take a second; the same paths against a real vLLM server are in test_serve_vllm.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jsonschema
import orjson
import pytest

from ngrp_lib.errors import InputError, UsageError
from ngrp_lib.serve import plan as lib
from ngrp_lib.serve import run as serve_run

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "schemas" / "endpoints.schema.json").read_text())
OUTPUT_SCHEMA = json.loads((REPO / "schemas" / "serve_output.schema.json").read_text())


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "llama", "torch_dtype": "float32"}')
    return d


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in [*lib.CPU_ENV, "CUDA_VISIBLE_DEVICES", "NGRP_VLLM_PYTHON", "NGRP_VLLM_VENV", "NGRP_CACHE_DIR"]:
        monkeypatch.delenv(key, raising=False)


def opts(model: Path, **kw) -> lib.ServeOptions:
    return lib.ServeOptions(model=str(model), **kw)


# ---------------------------------------------------------------- planning


@pytest.mark.parametrize(("value", "expected"), [("0,2", ["0", "2"]), ("", []), ("-1", []), (" 3 ", ["3"])])
def test_visible_gpus_reads_cuda_visible_devices(monkeypatch, value, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert lib.visible_gpus() == expected


def test_visible_gpus_counts_nvidia_smi_lines(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-a)'\necho 'GPU 1: NVIDIA H100 (UUID: GPU-b)'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert lib.visible_gpus() == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # the environment wins over nvidia-smi
    assert lib.visible_gpus() == ["1"]


def test_cpu_plan_has_reference_flags_and_env(model_dir):
    plan = lib.plan(opts(model_dir, served_model_name="tiny"), gpus=[], python="/py")
    (server,) = plan.servers
    assert plan.device == "cpu"
    assert server.argv[:3] == ["/py", "-m", "vllm.entrypoints.openai.api_server"]
    argv = server.argv
    assert argv[argv.index("--dtype") + 1] == "float32"  # the checkpoint's own dtype
    assert argv[argv.index("--distributed-executor-backend") + 1] == "uni"
    for flag in ["--enforce-eager", "--no-enable-chunked-prefill", "--served-model-name", "--host", "--port"]:
        assert argv.count(flag) == 1, flag
    assert server.env == {
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
    }
    assert server.host == "127.0.0.1" and server.base_url == f"http://127.0.0.1:{server.port}/v1"


def test_cpu_plan_user_flags_and_env_win(model_dir, monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
    extra = ["--dtype", "bfloat16", "--enable-chunked-prefill", "--distributed-executor-backend=mp"]
    (server,) = lib.plan(opts(model_dir, extra_args=extra), gpus=[], python="/py").servers
    assert server.argv.count("--dtype") == 1 and "float32" not in server.argv
    assert "--no-enable-chunked-prefill" not in server.argv and "uni" not in server.argv
    assert server.argv[-4:] == extra
    assert server.env["VLLM_CPU_KVCACHE_SPACE"] == "4"


@pytest.mark.parametrize(
    "extra",
    [
        ["--api-key", "sk-plan-secret"],
        ["--api-key=sk-plan-secret"],
        ["--max-model-len", "64", "--api-key", "sk-plan-secret"],
    ],
)
def test_a_vllm_api_key_goes_through_the_environment_and_is_masked_when_shown(model_dir, extra):
    (server,) = lib.plan(opts(model_dir, extra_args=extra), gpus=[], python="/py").servers
    assert "sk-plan-secret" not in server.argv and "--api-key" not in " ".join(server.argv)
    assert server.env["VLLM_API_KEY"] == "sk-plan-secret"
    assert "sk-plan-secret" not in server.shell_line() and "VLLM_API_KEY=***" in server.shell_line()


def test_secret_flags_leave_the_command_line_and_other_names_stay_masked_when_shown(model_dir):
    extra = ["--hf-token=hf_x", "--tokenizer", "tok", "--max-num-batched-tokens", "8", "--token-thing", "v9"]
    (server,) = lib.plan(opts(model_dir, extra_args=extra), gpus=[], python="/py").servers
    assert "hf_x" not in " ".join(server.argv) and server.env["HF_TOKEN"] == "hf_x"
    line = server.shell_line()
    assert "hf_x" not in line and "HF_TOKEN=***" in line and "v9" not in line.split()
    assert "--tokenizer tok" in line and "--max-num-batched-tokens 8" in line


def test_bf16_or_unknown_checkpoint_gets_bfloat16(tmp_path):
    (tmp_path / "config.json").write_text('{"dtype": "bfloat16"}')
    assert lib.model_dtype(str(tmp_path)) == "bfloat16"
    assert lib.model_dtype(str(tmp_path / "missing")) == "bfloat16"


def test_gpu_plan_splits_visible_gpus_between_servers(model_dir):
    plan = lib.plan(opts(model_dir, tensor_parallel=2), gpus=["0", "1", "4", "5"], python="/py")
    assert plan.device == "gpu"
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in plan.servers] == ["0,1", "4,5"]
    assert [s.gpus for s in plan.servers] == [["0", "1"], ["4", "5"]]
    for s in plan.servers:
        assert s.argv[1:4] == ["-m", "vllm.entrypoints.cli.main", "serve"]
        assert s.argv[s.argv.index("--tensor-parallel-size") + 1] == "2"
        assert "--enforce-eager" not in s.argv
    assert len({s.port for s in plan.servers}) == 2


def test_gpu_plan_data_parallel_and_explicit_ports(model_dir):
    plan = lib.plan(
        opts(model_dir, data_parallel=2, port=9100), gpus=["0", "1", "2", "3", "4", "5"], python="/py"
    )
    assert [s.port for s in plan.servers] == [9100, 9101, 9102]
    assert all(s.argv[s.argv.index("--data-parallel-size") + 1] == "2" for s in plan.servers)


@pytest.mark.parametrize(
    ("kw", "gpus", "needle"),
    [
        ({"num_servers": 3}, ["0", "1"], "visible GPU"),
        ({"tensor_parallel": 4}, ["0", "1"], "visible GPU"),
        ({"tensor_parallel": 2}, [], "need GPUs"),
        ({"device": "gpu"}, [], "no GPU is visible"),
    ],
)
def test_impossible_plans_are_usage_errors(model_dir, kw, gpus, needle):
    with pytest.raises(UsageError, match=needle):
        lib.plan(opts(model_dir, **kw), gpus=gpus, python="/py")


def test_missing_local_model_directory_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        lib.plan(opts(tmp_path / "nope"), gpus=[], python="/py")


def test_log_dir_defaults_next_to_endpoints_file(model_dir, tmp_path):
    plan = lib.plan(
        opts(model_dir, endpoints_file=tmp_path / "eps.json", num_servers=2), gpus=[], python="/py"
    )
    assert [s.log for s in plan.servers] == [
        tmp_path / "eps_logs" / "server-0.log",
        tmp_path / "eps_logs" / "server-1.log",
    ]


# ---------------------------------------------------------------- finding the vLLM python


@pytest.fixture
def fake_vllm_path(tmp_path, monkeypatch) -> Path:
    """A directory with an importable (empty) `vllm` package, put on PYTHONPATH for child pythons."""
    pkg = tmp_path / "site" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(pkg.parent))
    return pkg.parent


def test_find_vllm_python_order(tmp_path, fake_vllm_path, monkeypatch):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    assert lib.find_vllm_python() == sys.executable  # python3 that can import vllm
    monkeypatch.setenv("NGRP_VLLM_VENV", str(venv))
    assert lib.find_vllm_python() == str(venv / "bin" / "python")
    monkeypatch.setenv("NGRP_VLLM_PYTHON", sys.executable)
    assert lib.find_vllm_python() == sys.executable
    assert lib.find_vllm_python(str(venv / "bin" / "python")) == str(venv / "bin" / "python")


def test_find_vllm_python_names_the_installer(tmp_path, monkeypatch):
    monkeypatch.setenv("NGRP_VLLM_PYTHON", str(tmp_path / "no-python"))
    with pytest.raises(UsageError, match="cannot import vllm") as info:
        lib.find_vllm_python()
    assert ".ci/install_vllm.sh" in info.value.hint


# ---------------------------------------------------------------- CLI dry run


def test_dry_run_prints_exact_commands_and_starts_nothing(run_ngrp, model_dir, tmp_path, fake_vllm_path):
    res = run_ngrp(
        "serve",
        "--model",
        model_dir,
        "--served-model-name",
        "tiny",
        "--port",
        "9300",
        "--vllm-python",
        sys.executable,
        "--dry-run",
        "--",
        "--max-model-len",
        "512",
    )
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if "vllm.entrypoints.openai.api_server" in ln)
    assert line.startswith("HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 ")
    assert f"{sys.executable} -m vllm.entrypoints.openai.api_server --model {model_dir}" in line
    assert "--port 9300" in line and "--max-model-len 512" in line and "--enforce-eager" in line
    assert "http://127.0.0.1:9300/v1" in res.stdout
    assert not (tmp_path / "ngrp_endpoints.json").exists() and not (tmp_path / "ngrp_endpoints_logs").exists()


def test_dry_run_json_and_serve_start_alias(run_ngrp, model_dir, fake_vllm_path):
    args = [
        "--model",
        model_dir,
        "--num-servers",
        "2",
        "--vllm-python",
        sys.executable,
        "--dry-run",
        "--json",
    ]
    short, full = run_ngrp("serve", *args), run_ngrp("serve", "start", *args)
    assert short.returncode == full.returncode == 0, short.stderr + full.stderr
    for res in (short, full):
        plan = json.loads(res.stdout)
        jsonschema.validate(plan, OUTPUT_SCHEMA)
        assert plan["device"] == "cpu" and len(plan["servers"]) == 2
        assert plan["servers"][0]["argv"][0] == sys.executable and plan["servers"][0]["shell"]


def test_cli_exit_codes(run_ngrp, tmp_path, model_dir):
    missing = run_ngrp("serve", "--model", tmp_path / "nope", "--dry-run")
    assert missing.returncode == 3 and "does not exist" in missing.stderr
    cpu_tp = run_ngrp("serve", "--model", model_dir, "--tensor-parallel", "2", "--device", "cpu", "--dry-run")
    assert cpu_tp.returncode == 2 and "need GPUs" in cpu_tp.stderr
    no_file = run_ngrp("serve", "stop", "--endpoints-file", tmp_path / "none.json")
    assert no_file.returncode == 3 and "not found" in no_file.stderr
    assert "Example:" in run_ngrp("serve", "start", "--help").stdout


# ---------------------------------------------------------------- endpoints schema


def test_endpoints_schema_accepts_minimal_and_rejects_base_url_without_v1():
    validator = jsonschema.Draft202012Validator(SCHEMA)
    assert validator.is_valid({"endpoints": [{"base_url": "http://10.0.0.5:8000/v1", "model": "policy"}]})
    assert not validator.is_valid({"endpoints": [{"base_url": "http://10.0.0.5:8000"}]})
    assert not validator.is_valid({"endpoints": []})


# ---------------------------------------------------------------- supervision with a stand-in process

STANDIN_CHILD = (
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])"
)


def vllm_words(port: int) -> list[str]:
    """The words of vLLM's command line `serve stop` looks for before it signals a server (the stand-in's
    code ignores them): the stand-in is then what ngrp serve starts, as far as stop can tell."""
    return ["vllm.entrypoints.openai.api_server", "--port", str(port)]


def standin_plan(tmp_path: Path, code: str | None = None, count: int = 1) -> lib.ServePlan:
    """Servers that answer GET /health with 200 (a file named `health`) and GET /v1/models with the list
    vLLM would send for model `standin` (a file), each with one child process."""
    www = tmp_path / "www"
    (www / "v1").mkdir(parents=True, exist_ok=True)
    (www / "health").write_text("ok")
    (www / "v1" / "models").write_text(
        '{"object": "list", "data": [{"id": "standin", "max_model_len": 512}]}'
    )
    specs = []
    for i, port in enumerate(lib._free_ports("127.0.0.1", count)):
        argv = ["http.server", str(port), "--bind", "127.0.0.1", "--directory", str(www)]
        serve_http = (
            f"import runpy; sys.argv = {argv!r}; runpy.run_module('http.server', run_name='__main__')"
        )
        body = code or f"{STANDIN_CHILD}; {serve_http}"
        specs.append(
            lib.ServerSpec(
                i,
                "127.0.0.1",
                port,
                [],
                [sys.executable, "-c", body, *vllm_words(port)],
                {},
                tmp_path / "logs" / f"s{i}.log",
            )
        )
    return lib.ServePlan("cpu", "standin", "standin", str(tmp_path / "eps.json"), specs)


def members_of(pids: list[int]) -> list[int]:
    return [m for pid in pids for m in serve_run.group_members(pid)]


def test_detached_serve_writes_valid_endpoints_then_stop_leaves_nothing(tmp_path, run_ngrp):
    plan = standin_plan(tmp_path, count=2)
    result = serve_run.serve(plan, detach=True, timeout=30, progress=lambda m: None)
    doc = orjson.loads(Path(plan.endpoints_file).read_bytes())
    jsonschema.validate(doc, SCHEMA)
    pids = [e["pid"] for e in doc["endpoints"]]
    assert [e["base_url"] for e in doc["endpoints"]] == [s.base_url for s in plan.servers]
    assert result.detached and len(members_of(pids)) == 4  # two servers, each with its child
    status = run_ngrp("serve", "status", "--endpoints-file", plan.endpoints_file, "--json")
    assert status.returncode == 0 and jsonschema.validate(json.loads(status.stdout), OUTPUT_SCHEMA) is None
    rows = json.loads(status.stdout)["endpoints"]
    assert [(r["healthy"], r["problem"], r["models"], r["max_model_len"]) for r in rows] == [
        (True, None, ["standin"], 512)
    ] * 2
    doc["endpoints"][1]["model"] = "other"  # the pre-flight check of `collect`: the model must be served
    Path(plan.endpoints_file).write_text(json.dumps(doc))
    status = run_ngrp("serve", "status", "--endpoints-file", plan.endpoints_file)
    assert status.returncode == 1 and status.stdout.count("healthy=True") == 2
    assert (
        f"problem: model 'other' is not served at {plan.servers[1].base_url}; it serves: standin"
        in status.stdout
    )
    with pytest.raises(UsageError, match="still running"):
        serve_run.serve(standin_plan(tmp_path), detach=True, timeout=30, progress=lambda m: None)
    stopped = run_ngrp("serve", "stop", "--endpoints-file", plan.endpoints_file, "--grace", "5", "--json")
    assert stopped.returncode == 0 and jsonschema.validate(json.loads(stopped.stdout), OUTPUT_SCHEMA) is None
    assert sorted(json.loads(stopped.stdout)["stopped"]) == sorted(pids)
    assert members_of(pids) == [] and not Path(plan.endpoints_file).exists()


def _marked_child(tmp_path: Path) -> tuple[str, str]:
    """STANDIN_CHILD whose child's command line carries a mark of this test: the leftover check then
    cannot see another test's stand-ins (tests run two at a time)."""
    mark = f"ngrp-test-{tmp_path.name}-{os.getpid()}"
    return STANDIN_CHILD.replace("time.sleep(300)", f"time.sleep(300)  # {mark}"), mark


def test_server_that_exits_reports_log_tail_and_leaves_nothing(tmp_path):
    child, mark = _marked_child(tmp_path)
    code = f"{child}; print('model_type missing: boom', flush=True); sys.exit(7)"
    plan = standin_plan(tmp_path, code)
    with pytest.raises(lib.ServerStartError, match="exited with code 7") as info:
        serve_run.serve(plan, detach=True, timeout=30, progress=lambda m: None)
    assert "boom" in info.value.message and info.value.exit_code == 1
    _assert_no_process_mentions(mark)
    assert not Path(plan.endpoints_file).exists()


def test_server_never_healthy_times_out_and_its_children_die(tmp_path):
    child, mark = _marked_child(tmp_path)
    plan = standin_plan(tmp_path, f"{child}; print('loading...', flush=True); time.sleep(300)  # {mark}")
    start = time.monotonic()
    with pytest.raises(lib.ServerStartError, match="not healthy after 2s") as info:
        serve_run.serve(plan, detach=True, timeout=2, progress=lambda m: None)
    assert "loading..." in info.value.message and time.monotonic() - start < 20
    _assert_no_process_mentions(mark)


def test_foreground_serve_stops_everything_on_sigterm(tmp_path):
    plan = standin_plan(tmp_path)
    script = tmp_path / "fg.py"
    script.write_text(
        textwrap.dedent(f"""
        import pickle, sys
        sys.path.insert(0, {str(REPO / "scripts")!r})
        from ngrp_lib.serve import run as serve_run
        plan = pickle.loads({pickle_plan(plan)!r})
        serve_run.serve(plan, detach=False, timeout=30, progress=lambda m: print(m, flush=True))
        print("returned", flush=True)
    """)
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    eps = Path(plan.endpoints_file)
    deadline = time.monotonic() + 30
    while not eps.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    doc = orjson.loads(eps.read_bytes())
    pid = doc["endpoints"][0]["pid"]
    assert doc["supervisor_pid"] == proc.pid and len(serve_run.group_members(pid)) == 2
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "SIGTERM: stopping 1 server(s)" in out and "returned" in out
    assert serve_run.group_members(pid) == [] and not eps.exists()


def pickle_plan(plan: lib.ServePlan) -> bytes:
    import pickle

    return pickle.dumps(plan)


def _assert_no_process_mentions(needle: str) -> None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            assert needle not in cmdline or state == "Z", f"leftover process {entry.name}: {cmdline[:200]}"


def test_serve_never_replaces_or_deletes_an_endpoints_file_it_did_not_write(tmp_path):
    """A hand-written (or unreadable) file at --endpoints-file is refused before anything starts, and a
    failed start removes only a file this run wrote; a stale file of an earlier ngrp serve is replaced."""
    plan = standin_plan(tmp_path)
    path = Path(plan.endpoints_file)
    for content in ('{"endpoints": [{"base_url": "http://10.0.0.5:8000/v1"}]}', "{not json"):
        path.write_text(content)
        with pytest.raises(UsageError, match="refusing to replace"):
            serve_run.serve(plan, detach=True, timeout=30, progress=lambda m: None)
        assert path.read_text() == content
        assert not (tmp_path / "logs").exists()  # nothing was started
    stale = {"endpoints": [{"base_url": "http://127.0.0.1:9/v1", "pid": 2**22 + 7, "start_time": 1}]}
    path.write_text(json.dumps(stale))
    messages: list[str] = []
    serve_run.serve(plan, detach=True, timeout=30, progress=messages.append)
    doc = orjson.loads(path.read_bytes())
    assert (
        any(m.startswith("replacing") for m in messages)
        and doc["endpoints"][0]["pid"] != stale["endpoints"][0]["pid"]
    )
    assert serve_run.stop(path, grace=5).removed and not path.exists()
