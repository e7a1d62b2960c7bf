"""Issue 29, class "one redaction layer": everything ngrp writes or prints goes through the same masks. The
ledger scrubber catches `NAME VALUE` after any word; `ledger run` masks the values of every secret-named
environment variable (the rule collect applies to its key) in results.tsv, run.json, its own --json and
`status`/`handoff --json`; `serve` keeps keys off vLLM's command line and out of its dry-run JSON."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from ledger_helpers import make_repo

from ngrp_lib.artifacts.scrub import scrub

SPACED_AFTER_A_NAME = [
    ("run.sh aws_secret_access_key V3ryS3cretAWS", "V3ryS3cretAWS"),
    ("python train.py api_key V3ryS3cretAPI", "V3ryS3cretAPI"),
    ("cmd.sh db_password V3ryS3cretDB", "V3ryS3cretDB"),
    ("a.b c-d api-key 'quoted V3ry s3cret'", "quoted V3ry s3cret"),
]


@pytest.mark.parametrize(("text", "secret"), SPACED_AFTER_A_NAME)
def test_one_redaction_layer_scrubs_a_spaced_value_after_a_dotted_word(text, secret):
    out = scrub(text)
    assert secret not in out and "***" in out, out
    assert out.split()[0] == text.split()[0]  # the command stays readable


def test_one_redaction_layer_masks_secret_environment_values(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "plainsvc-ZZ9988")
    monkeypatch.setenv("NGRP_UNRELATED_FLAG", "plainvalue-keep")
    out = scrub("the service said plainsvc-ZZ9988 with plainvalue-keep")
    assert "plainsvc-ZZ9988" not in out and "plainvalue-keep" in out


PLANTED = {
    "MY_SERVICE_TOKEN": "plainsvc-ZZ9988",
    "DB_PASSWORD": "hunter2-db-pw77",
    "CUSTOM_API_KEY": "custom-key-4455",
    "AWS_SECRET_ACCESS_KEY": "awsish-secret-0099",
    "HF_TOKEN": "plain-hf-value-123",
    "WANDB_API_KEY": "wandbish-0011223344",
}


def test_one_redaction_layer_in_everything_ledger_run_stores_or_prints(tmp_path, run_ngrp):
    repo = make_repo(tmp_path / "repo")
    init = ["ledger", "init", "--campaign", "c1", "--metric", "score", "--direction", "max"]
    assert run_ngrp(*init, cwd=repo).returncode == 0
    env = {**os.environ, **PLANTED}
    code = "import os\nfor k in sorted(os.environ): print(k, os.environ[k])\nprint('no score here')"
    argv = ["ledger", "run", "--campaign", "c1", "--json", "--metric-regex", r"score=(?P<value>[0-9.]+)"]
    ran = run_ngrp(*argv, "--description", "run " + PLANTED["DB_PASSWORD"], "--", sys.executable, "-c", code,
                   PLANTED["MY_SERVICE_TOKEN"], cwd=repo, env=env)  # fmt: skip
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["log_tail"]  # no metric: the tail is printed
    printed = [ran.stdout]
    for command in ("status", "handoff"):
        shown = run_ngrp("ledger", command, "--campaign", "c1", "--json", cwd=repo, env=env)
        printed.append(shown.stdout + shown.stderr)
        text = run_ngrp("ledger", command, "--campaign", "c1", cwd=repo, env=env)
        printed.append(text.stdout + text.stderr)
    ledger = repo / "reports" / "auto_research" / "c1"
    stored = [p.read_text(errors="replace") for p in ledger.rglob("*") if p.is_file()]  # run.log too
    for value in PLANTED.values():
        for where, text in enumerate(printed + stored):
            assert value not in text, (value, where, text[:2000])


@pytest.fixture
def dying_vllm(tmp_path, monkeypatch) -> Path:
    """A model folder, and a `vllm` package on PYTHONPATH whose server prints its arguments and environment
    and dies before it is healthy, as a vLLM that fails at start-up can."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama", "torch_dtype": "float32"}')
    server = tmp_path / "site" / "vllm" / "entrypoints" / "openai"
    server.mkdir(parents=True)
    for folder in (server, server.parent, server.parent.parent):
        (folder / "__init__.py").write_text("")
    (server / "api_server.py").write_text(
        "import os, sys\nprint('argv', sys.argv)\nprint('env', dict(os.environ))\nsys.exit(3)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    return model


SERVE_KEYS = ("sk-serve-K1-0123456789", "hf-token-T-0123456789")


def test_one_redaction_layer_in_serve_dry_run_json(run_ngrp, dying_vllm):
    base = ["serve", "--model", dying_vllm, "--vllm-python", sys.executable, "--dry-run"]
    extra = ["--", "--api-key", SERVE_KEYS[0], "--hf-token", SERVE_KEYS[1]]
    for shown in (run_ngrp(*base, "--json", *extra), run_ngrp(*base, *extra)):
        assert shown.returncode == 0, shown.stderr
        assert not any(key in shown.stdout + shown.stderr for key in SERVE_KEYS), shown.stdout


@pytest.mark.parametrize(
    "extra", [["--api-key", "sk-one-0123456789", "sk-two-0123456789"],
              ["--api-key", "sk-one-0123456789", "--api-key=sk-two-0123456789"], ["--api-key"]],
)  # fmt: skip
def test_one_redaction_layer_keeps_several_keys_off_the_vllm_command_line(run_ngrp, dying_vllm, extra):
    proc = run_ngrp(
        "serve", "--model", dying_vllm, "--vllm-python", sys.executable, "--dry-run", "--", *extra
    )
    assert proc.returncode == 2 and "--api-key was given" in proc.stderr, proc.stdout + proc.stderr
    assert "sk-one" not in proc.stdout + proc.stderr


def test_one_redaction_layer_masks_the_log_tail_of_a_server_that_died(run_ngrp, dying_vllm, tmp_path):
    proc = run_ngrp("serve", "--model", dying_vllm, "--vllm-python", sys.executable, "--timeout", "60",
                    "--", "--api-key", SERVE_KEYS[0], "--hf-token", SERVE_KEYS[1])  # fmt: skip
    assert proc.returncode == 1 and "before becoming healthy" in proc.stderr, proc.stdout + proc.stderr
    assert "last lines of" in proc.stderr and "***" in proc.stderr
    assert not any(key in proc.stdout + proc.stderr for key in SERVE_KEYS), proc.stderr
