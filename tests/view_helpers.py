"""Start `ngrp view` as a real process on a free port and stop it with Ctrl-C (SIGINT), as a user would."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from cli_helpers import ENTRY


class Viewer:
    def __init__(self, *args: object, cache: Path, cwd: Path) -> None:
        env = dict(os.environ, NGRP_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [*ENTRY, "view", *map(str, args), "--port", "0"],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url = self._wait_for_url()

    def _wait_for_url(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"ngrp view exited {self.process.returncode}: {self.process.stderr.read()}"
                    )
                continue
            found = re.search(r"ngrp view: (http://\S+/)", line)
            if found:
                return found.group(1)
        raise RuntimeError("ngrp view printed no URL")

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        try:
            with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=30) as reply:
                return reply.status, dict(reply.headers), reply.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def stop(self) -> tuple[int, str]:
        """Ctrl-C; (exit code, stderr)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return self.process.returncode, err

    def __enter__(self) -> Viewer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
