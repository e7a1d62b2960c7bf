"""What the viewer checks before it answers: who is asking, and whether the files it indexed are still the
ones on disk.

- The Host header. A page on another site can make a browser send requests to 127.0.0.1 under a name it
  controls (DNS rebinding); answering them would hand it the run. Only 127.0.0.1, localhost and [::1] on
  the viewer's own port are answered, plus the host it was told to bind (421 otherwise).
- The files. Each request first compares the rollouts (and inputs) file's identity, inode, modification
  time and size, with the one indexed. A file replaced, truncated, rewritten in place, deleted or swapped
  for a FIFO or symlink answers 409 "the file changed: reload" (the index's offsets would point into other
  bytes). A rollouts file that only grew (a run still being collected appends to it) keeps the indexed
  rows valid: the appended rows are indexed before the request is answered (`live`). An inputs file that
  grew was rewritten (inputs are materialized before a run). Should a file change between the check and
  the read, the error the read raises is answered the same way, never with a 500 and a traceback.
- Every other failure is one line on the terminal and a 500 page, never a traceback.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from ..artifacts.terminal import visible

LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")
CHANGED = "the file changed: reload (restart ngrp view to index it again)"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Reply = Callable[[web.Request, int, str], web.StreamResponse]
CatchUp = Callable[[web.Request], Awaitable[str | None]]


@dataclass(frozen=True)
class Identity:
    """A file as the viewer indexed it: (device, inode), modification time, size."""

    path: Path
    device: int
    inode: int
    mtime_ns: int
    size: int
    may_grow: bool = True

    @classmethod
    def of(cls, path: Path, may_grow: bool = True) -> Identity:
        st = os.stat(path)
        return cls(path, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, may_grow)

    def grew(self) -> bool:
        try:
            return os.stat(self.path).st_size > self.size
        except OSError:
            return False

    def change(self) -> str | None:
        """None when the file is as indexed or only grew; else what happened to it."""
        try:
            st = os.stat(self.path)
        except OSError:
            return f"{self.path} is gone"
        if not stat.S_ISREG(st.st_mode):
            return f"{self.path} is no longer a regular file"
        if (st.st_dev, st.st_ino) != (self.device, self.inode):
            return f"{self.path} was replaced by another file"
        if st.st_size < self.size:
            return f"{self.path} was truncated"
        if st.st_size > self.size and not self.may_grow:
            return f"{self.path} was rewritten (it grew; only a rollouts file may)"
        if st.st_size == self.size and st.st_mtime_ns != self.mtime_ns:
            return f"{self.path} was rewritten"
        return None


def identities(paths: Iterable[tuple[Path | None, bool]]) -> tuple[Identity, ...]:
    """The identities of (path, may it grow) pairs, paths that are None left out."""
    return tuple(Identity.of(p, grow) for p, grow in paths if p is not None)


def changed(files: tuple[Identity, ...]) -> str | None:
    for file in files:
        what = file.change()
        if what is not None:
            return what
    return None


def host_allowed(host_header: str | None, port: int, bind_host: str) -> bool:
    """Whether a request's Host header names this viewer: a local name or the bind host, on its port."""
    if not host_header:
        return False
    name, sep, given = host_header.rpartition(":")
    if not sep or name.endswith(":") or (host_header.startswith("[") and not name.endswith("]")):
        name, given = host_header, ""  # no port: `[::1]` alone, or a bare name
    if given and not given.isdigit():
        return False
    if (int(given) if given else 80) != port:
        return False
    shown_bind = f"[{bind_host}]" if ":" in bind_host else bind_host
    return name.lower() in {*LOCAL_NAMES, bind_host.lower(), shown_bind.lower()}


def middleware(
    files: Callable[[], tuple[Identity, ...]], bind_host: str, reply: Reply, catch_up: CatchUp
) -> Callable[..., Awaitable]:
    """The aiohttp middleware of these checks; `reply(request, status, message)` makes the error page,
    `catch_up(request)` indexes what grew (None, or what changed instead), `files()` are the files now."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        port = sockname[1] if sockname else 0
        if not host_allowed(request.headers.get("Host"), port, bind_host):
            return reply(request, 421, "unknown Host: open the viewer at the address ngrp view printed")
        what = changed(files())
        if what is None and any(file.grew() for file in files()):
            what = await catch_up(request)
        if what is not None:
            return reply(request, 409, f"{what}: {CHANGED}")
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except Exception as exc:  # a file changed mid-read, or a bug: one line, never a traceback
            what = changed(files())
            if what is not None:
                return reply(request, 409, f"{what}: {CHANGED}")
            print(f"ngrp view: {visible(request.path)}: {type(exc).__name__}: {visible(str(exc))}",
                  file=sys.stderr, flush=True)  # fmt: skip
            return reply(request, 500, "the viewer failed on this request (see its terminal)")

    return guard
