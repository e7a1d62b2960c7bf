"""`ngrp ledger run --launcher slurm` on a real one-node Slurm cluster (the `slurm_cluster` fixture).

The job is submitted with `sbatch --wait`, its output goes to the run's log, and its ending is
classified from the job's state (scontrol) and that log. Also: a local run inside a Slurm job records
the job's SLURM_JOB_ID.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import schema
from ledger_helpers import ENTRY, LEDGER_RUN

from ngrp_lib.ledger import read_ledger

try:  # the fixture lives in tests/slurm_fixture.py (the slurm tier); conftest imports it
    import slurm_fixture  # noqa: F401
except ImportError:  # a checkout without the slurm tier: skip, do not error

    @pytest.fixture(scope="session")
    def slurm_cluster():
        pytest.skip("tests/slurm_fixture.py (the slurm tier's cluster fixture) is not in this checkout")


pytestmark = [
    pytest.mark.slurm,
    pytest.mark.ledger_campaign(
        "--metric", "score", "--direction", "max", "--max-experiments", "9", slurm=True
    ),
]

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"
LEDGER = Path("reports/auto_research/c1")
SCORE = r"score=(?P<value>[0-9.]+)"


def slurm_run(run_ngrp, cluster, repo: Path, script: str, *options: str) -> dict:
    argv = [
        *LEDGER_RUN,
        "--json",
        "--quiet",
        "--launcher",
        "slurm",
        "--metric-regex",
        SCORE,
        "--sbatch-arg=--cpus-per-task=1",
        *options,
        "--",
        "bash",
        "-c",
        script,
    ]
    result = run_ngrp(*argv, cwd=repo, env=cluster.env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    jsonschema.validate(data, schema("ledger_run_result"))
    assert data["outcome"]["launcher"] == "slurm" and data["outcome"]["job_id"].isdigit()
    assert data["record"]["row"]["launcher"] == "slurm"
    assert data["record"]["row"]["job_id"] == data["outcome"]["job_id"]
    return data


def test_slurm_job_that_prints_its_metric(run_ngrp, slurm_cluster, repo):
    data = slurm_run(
        run_ngrp, slurm_cluster, repo, 'echo "job $SLURM_JOB_ID index $NGRP_LEDGER_INDEX"; echo score=0.7'
    )
    assert (data["run_class"], data["status"], data["outcome"]["state"]) == ("ok", "keep", "COMPLETED")
    job = data["outcome"]["job_id"]
    assert (repo / data["log"]).read_text() == f"job {job} index 1\nscore=0.7\n"
    assert read_ledger(repo / LEDGER / "results.tsv")[0].fields["metric_value"] == "0.7"
    assert any("sacct" in note for note in data["outcome"]["notes"])  # no accounting: memory not measured


@pytest.mark.parametrize(
    ("script", "run_class", "state"),
    [
        ("echo working; exit 3", "exit:3", "FAILED"),
        ("echo 'RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB'; exit 1", "oom", "FAILED"),
        ("echo 'iter 7 loss=nan'; echo score=0.1", "nan", "COMPLETED"),
        ("echo nothing to see", "no_metric", "COMPLETED"),
    ],
)
def test_slurm_job_endings(run_ngrp, slurm_cluster, repo, script, run_class, state):
    data = slurm_run(run_ngrp, slurm_cluster, repo, script)
    assert (data["run_class"], data["status"], data["outcome"]["state"]) == (run_class, "crash", state)


def test_slurm_timeout_cancels_the_job(run_ngrp, slurm_cluster, repo):
    data = slurm_run(run_ngrp, slurm_cluster, repo, "echo started; sleep 300", "--timeout", "3s")
    assert data["run_class"] == "timeout" and data["outcome"]["timed_out"] is True
    assert data["outcome"]["state"] == "CANCELLED"
    assert slurm_cluster.pending(data["outcome"]["job_id"]) == []
    assert (repo / data["log"]).read_text().startswith("started\n")


def test_local_run_inside_a_slurm_job_records_its_job_id(run_ngrp, slurm_cluster, repo, tmp_path):
    inner = [*ENTRY, *LEDGER_RUN, "--quiet", "--metric-regex", SCORE, "--", "bash", "-c", "echo score=0.4"]
    job = slurm_cluster.sbatch(f"--output={tmp_path / 'job.out'}", f"--wrap={shlex.join(inner)}", cwd=repo)
    assert job.returncode == 0, (tmp_path / "job.out").read_text()
    row = read_ledger(repo / LEDGER / "results.tsv")[0]
    assert (row.fields["job_id"], row.fields["launcher"], row.fields["status"]) == (
        job.job_id,
        "slurm",
        "keep",
    )


def test_slurm_job_log_has_secret_environment_values_masked(run_ngrp, slurm_cluster, repo):
    """Issue 38, class 6: Slurm writes the job's log itself; a secret-named value the job prints is masked
    in it once the job is over."""
    env = {**slurm_cluster.env, "MY_SERVICE_TOKEN": "plainsvc-ZZ9988"}
    argv = [*LEDGER_RUN, "--json", "--quiet", "--launcher", "slurm", "--metric-regex", SCORE,
            "--", "bash", "-c", 'echo "tok $MY_SERVICE_TOKEN"; echo score=0.5']  # fmt: skip
    result = run_ngrp(*argv, cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (repo / data["log"]).read_text() == "tok ***\nscore=0.5\n"
    assert "plainsvc-ZZ9988" not in result.stdout + result.stderr
