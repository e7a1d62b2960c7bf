"""The Slurm fixture's own rules that need no cluster: when it skips, and the slurm.conf it writes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import slurm_fixture


def test_skips_with_the_reason_without_root_or_packages(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in slurm_fixture._skip_reason()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: None if name in ("munged", "sbatch") else "/usr/bin/x")
    reason = slurm_fixture._skip_reason()
    assert "munged, sbatch missing" in reason and "apt-get install slurm-wlm munge" in reason


def test_conf_keeps_everything_private(tmp_path):
    conf = slurm_fixture.slurm_conf(tmp_path, "node1", 2, 4096, (40001, 40002))
    lines = dict(
        line.split("=", 1)
        for line in conf.splitlines()
        if line and not line.startswith(("NodeName", "Partition"))
    )
    assert lines["SlurmctldPort"] == "40001" and lines["SlurmdPort"] == "40002"
    assert lines["AuthInfo"] == f"socket={tmp_path}/munge/munge.socket"
    paths = [v for k, v in lines.items() if k.endswith(("Location", "Dir", "PidFile", "LogFile"))]
    assert len(paths) == 6 and all(Path(p).is_relative_to(tmp_path) for p in paths)
    assert "NodeName=node1 NodeAddr=127.0.0.1 CPUs=2 RealMemory=4096" in conf
    assert f"PartitionName={slurm_fixture.PARTITION} Nodes=node1 Default=YES" in conf
