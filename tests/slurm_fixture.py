"""A real single-node Slurm cluster (Debian's slurm-wlm + munge) as a session fixture, for the `slurm` tier.

Recipe: `reference/slurm-on-one-node.md` (copied into this module, tests never read ../shared), with every
path, port and pid private to the fixture, so it never touches /etc/slurm or /run and several sessions on
one machine can each run their own cluster: munged on its own socket and key, slurmctld and slurmd in the
foreground (`-D`) on free ports, state, spool and logs under one temporary folder.

Needs root (the daemons switch users) and the packages (`apt-get install slurm-wlm munge`, done by
`.ci/run`); otherwise every test that uses `slurm_cluster` is skipped with the reason, unless
`NGRP_REQUIRE_SLURM=1` (set by `.ci/run` once the install worked), which turns the skip into a failure.

Usage (the whole interface):

    def test_array(slurm_cluster, tmp_path):
        job = slurm_cluster.sbatch("--array=0-2", "job.sh", cwd=tmp_path)        # sbatch --wait
        assert job.returncode == 0, job.stderr
        job_id = slurm_cluster.submit("--array=0-2", "job.sh", cwd=tmp_path)     # returns at once
        slurm_cluster.wait(job_id)                                                # every task ended
        slurm_cluster.run("scancel", f"{job_id}_1")                               # any Slurm command
        subprocess.run(["my-launcher", ...], env=slurm_cluster.env)              # tools that call sbatch

`SlurmCluster` fields: `partition` (the default partition, "debug"), `node` (its one node), `cpus`,
`conf` (the slurm.conf), `env` (os.environ plus `SLURM_CONF`: pass it to anything that runs a Slurm
command). Jobs run as root with the submitting environment (`--export=ALL`, Slurm's default), in the
`cwd` given. Accounting is off: use `state()` (its `JobState` is in `FINISHED` once a job is over),
`wait()`, the job's output files and `sbatch --wait`'s exit code, not `sacct`. At teardown every job
is cancelled and every daemon the fixture started is stopped.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DAEMONS = ("munged", "munge", "unmunge", "slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scontrol")
READY_TIMEOUT_S = 60.0
PARTITION = "debug"
# Slurm's job states once a job is over (squeue drops it; scontrol still shows it for MinJobAge).
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
            "DEADLINE", "PREEMPTED"}  # fmt: skip


@dataclass
class Job:
    """What `sbatch --wait` gave: the job id and its exit code (the highest exit code of its tasks)."""

    job_id: str
    returncode: int
    stdout: str
    stderr: str


@dataclass
class SlurmCluster:
    partition: str
    node: str
    cpus: int
    conf: Path
    root: Path
    env: dict[str, str] = field(repr=False)

    def run(self, *args: str, check: bool = True, timeout: float = 60, cwd: Path | None = None):
        """Run one Slurm command (`squeue`, `scancel`, `scontrol` ...) against this cluster."""
        proc = subprocess.run(
            list(args), env=self.env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def sbatch(self, *args: str, cwd: Path, timeout: float = 900) -> Job:
        """`sbatch --wait --parsable ARGS` in `cwd`: blocks until every task of the job has ended."""
        proc = self.run("sbatch", "--wait", "--parsable", *args, check=False, timeout=timeout, cwd=cwd)
        return Job(_job_id(proc.stdout), proc.returncode, proc.stdout, proc.stderr)

    def submit(self, *args: str, cwd: Path) -> str:
        """`sbatch --parsable ARGS` in `cwd`; returns the job id at once."""
        proc = self.run("sbatch", "--parsable", *args, cwd=cwd)
        return _job_id(proc.stdout)

    def state(self, job: str) -> dict[str, str]:
        """`scontrol show job JOB` as a dict (JobState, ExitCode, Restarts, ...); one array task per call."""
        text = self.run("scontrol", "-o", "show", "job", job).stdout.splitlines()[0]
        return dict(item.split("=", 1) for item in text.split() if "=" in item)

    def pending(self, job: str) -> list[str]:
        """Tasks of `job` still queued or running, as `JOBID_TASK` names."""
        proc = self.run("squeue", "-h", "-r", "-j", job, "-o", "%i", check=False)
        return proc.stdout.split() if proc.returncode == 0 else []

    def wait(self, job: str, timeout: float = 900) -> None:
        """Wait until no task of `job` is queued or running."""
        deadline = time.monotonic() + timeout
        while self.pending(job):
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job} still has tasks after {timeout:.0f} s: {self.pending(job)}")
            time.sleep(0.5)

    def requeue(self, task: str, timeout: float = 60) -> None:
        """`scontrol requeue` an array task (running, cancelled or finished), then make it eligible at
        once: Slurm holds a requeued job for about two minutes (its EligibleTime). A running task passes
        through REQUEUED first, and a begin time set before it is PENDING is overwritten, so wait."""
        self.run("scontrol", "requeue", task)
        deadline = time.monotonic() + timeout
        while self.state(task)["JobState"] != "PENDING":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{task} not PENDING {timeout:.0f} s after requeue: {self.state(task)}")
            time.sleep(0.2)
        self.run("scontrol", "update", f"jobid={task}", "StartTime=now")


def _job_id(stdout: str) -> str:
    match = re.search(r"^(\d+)", stdout.strip())
    return match.group(1) if match else ""


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the slurm tier starts munged, slurmctld and slurmd, which needs root"
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def slurm_conf(root: Path, node: str, cpus: int, memory_mb: int, ports: tuple[int, int]) -> str:
    """The reference's slurm.conf with private paths and ports; the node is reached at 127.0.0.1."""
    return f"""\
ClusterName=ngrptest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
JobAcctGatherType=jobacct_gather/none
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _memory_mb() -> int:
    with open("/proc/meminfo") as handle:
        total_kb = int(next(line for line in handle if line.startswith("MemTotal:")).split()[1])
    return max(total_kb // 1024 - 2048, 512)


class _Daemons:
    """The processes the fixture started, stopped in reverse order (SIGTERM, then SIGKILL)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, cmd: list[str], env: dict[str, str], user: str | None = None) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, user=user, start_new_session=True
        )
        log.close()
        self.procs.append((name, proc))

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.logs()}")

    def logs(self) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            with contextlib.suppress(OSError):
                parts.append(f"--- {path.name}\n" + "\n".join(path.read_text().splitlines()[-15:]))
        return "\n".join(parts)

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


def _start_munge(daemons: _Daemons, root: Path) -> Path:
    """munged as the munge user on a private socket and key; the folder must be traversable by it."""
    folder = root / "munge"
    folder.mkdir(mode=0o755)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    shutil.chown(key, "munge", "munge")
    shutil.chown(folder, "munge", "munge")
    socket_path = folder / "munge.socket"
    cmd = ["munged", "--foreground", f"--socket={socket_path}", f"--key-file={key}",
           f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
           f"--seed-file={folder}/seed"]  # fmt: skip
    daemons.start("munged", cmd, dict(os.environ), user="munge")
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not socket_path.exists():
        daemons.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"munged made no socket in {READY_TIMEOUT_S:.0f} s:\n{daemons.logs()}")
        time.sleep(0.1)
    cred = subprocess.run(["munge", "-S", str(socket_path), "-n"], capture_output=True, check=True)
    check = subprocess.run(["unmunge", "-S", str(socket_path)], input=cred.stdout, capture_output=True)
    if b"Success" not in check.stdout:
        raise RuntimeError(f"munge -n | unmunge failed: {check.stdout!r} {check.stderr!r}")
    return socket_path


def _wait_idle(cluster: SlurmCluster, daemons: _Daemons) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        daemons.check_alive()
        proc = cluster.run("sinfo", "-h", "-p", cluster.partition, "-o", "%t", check=False, timeout=10)
        if proc.returncode == 0 and proc.stdout.strip() == "idle":
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"sinfo not idle after {READY_TIMEOUT_S:.0f} s: {proc.stdout!r}\n{daemons.logs()}"
            )
        time.sleep(0.5)


@contextlib.contextmanager
def start_cluster() -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd; yield once `sinfo` says idle; stop them all afterwards."""
    # Short and world-traversable: munged checks every folder on its socket's path, which Unix caps at 108.
    root = Path(tempfile.mkdtemp(prefix="ngrp-slurm-", dir="/tmp"))
    root.chmod(0o755)
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir()
    daemons = _Daemons(root)
    try:
        _start_munge(daemons, root)
        node, cpus = socket.gethostname().split(".")[0], os.cpu_count() or 1
        conf = root / "slurm.conf"
        conf.write_text(slurm_conf(root, node, cpus, _memory_mb(), (free_port(), free_port())))
        env = {**os.environ, "SLURM_CONF": str(conf)}
        daemons.start("slurmctld", ["slurmctld", "-D", "-f", str(conf)], env)
        daemons.start("slurmd", ["slurmd", "-D", "-f", str(conf), "-N", node], env)
        cluster = SlurmCluster(PARTITION, node, cpus, conf, root, env)
        _wait_idle(cluster, daemons)
        try:
            yield cluster
        finally:
            cluster.run("scancel", "--full", "-u", "root", check=False)  # this cluster's jobs only
            with contextlib.suppress(subprocess.TimeoutExpired):
                _wait_no_jobs(cluster)
    finally:
        daemons.stop()
        shutil.rmtree(root, ignore_errors=True)


def _wait_no_jobs(cluster: SlurmCluster, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = cluster.run("squeue", "-h", "-o", "%i", check=False, timeout=10)
        if proc.returncode != 0 or not proc.stdout.strip():
            return
        time.sleep(0.5)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running one-node Slurm cluster for the session (see the module docstring for its interface)."""
    reason = _skip_reason()
    if reason is not None:
        if os.environ.get("NGRP_REQUIRE_SLURM") == "1":
            pytest.fail(f"NGRP_REQUIRE_SLURM=1 but {reason}")
        pytest.skip(reason)
    with start_cluster() as cluster:
        yield cluster
