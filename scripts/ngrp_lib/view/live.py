"""Watching a run while it collects: the viewer's indexes kept up with rollouts files that grow.

On each request the guard sees whether a file grew; if one did, `Live.catch_up` (on the viewer's one
worker thread, so never beside a query) indexes the appended rows of every growing rollouts file, forgets
the cached selections, and rebuilds compare mode's pairs. The files' identities are taken before reading,
so bytes appended during the read are seen as growth at the next request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .compare import Pairs
from .guard import Identity, identities
from .queries import Views


@dataclass
class Live:
    views: list[Views]
    pairs: Pairs | None = None
    files: tuple[Identity, ...] = field(default=())

    @classmethod
    def of(cls, views: Views, pairs: Pairs | None) -> Live:
        live = cls([views] + ([pairs.a, pairs.b] if pairs is not None else []), pairs)
        live.files = identities(live._paths())
        return live

    def _paths(self) -> list[tuple[Path | None, bool]]:
        out: list[tuple[Path | None, bool]] = []
        for v in self.views:
            out += [(v.index.paths.rollouts, True), (v.index.paths.inputs, False)]
        return out

    def current(self) -> tuple[Identity, ...]:
        return self.files

    def catch_up(self) -> str | None:
        """Index what the rollouts files gained; None when done, else what happened to a file instead."""
        fresh = identities(self._paths())
        grew = False
        for v in self.views:
            before = v.index.scan.size
            what = v.index.extend()
            if what is not None:
                return what
            if v.index.scan.size != before:
                grew = True
                v._matches.clear()
        if grew and self.pairs is not None:
            self.pairs.rebuild()
        self.files = fresh
        return None
