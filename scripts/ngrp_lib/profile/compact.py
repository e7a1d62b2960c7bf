"""Append-only numeric columns kept in the smallest type that holds them exactly: a 0/1 reward or a token
count fits float16 (2 bytes a value), most others float32 or float64. A block is stored once ~4k values
have arrived; reading gives float64 (or int64) back, bit for bit."""

from __future__ import annotations

from typing import Any

BLOCK = 4096
_FLOATS = ("float16", "float32", "float64")
_INTS = ("uint8", "uint16", "uint32", "int64")


class _Compact:
    kinds: tuple[str, ...] = ()
    wide = "float64"

    def __init__(self) -> None:
        self._pending: list[Any] = []
        self._pending_n = 0
        self._blocks: list[Any] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, values: Any) -> None:
        self._pending.append(values)
        self._pending_n += len(values)
        self._n += len(values)
        if self._pending_n >= BLOCK:
            self._flush()

    @property
    def nbytes(self) -> int:
        """Bytes held by the stored blocks (after storing what is pending)."""
        self._flush()
        return sum(block.nbytes for block in self._blocks)

    def values(self) -> Any:
        import numpy as np

        self._flush()
        if not self._blocks:
            return np.zeros(0, dtype=self.wide)
        return np.concatenate([block.astype(self.wide) for block in self._blocks])

    def _flush(self) -> None:
        import numpy as np

        if not self._pending:
            return
        block = np.concatenate(self._pending).astype(self.wide)
        self._pending, self._pending_n = [], 0
        self._seen(block)
        self._blocks.append(self._smallest(block))

    def _seen(self, block: Any) -> None:
        pass

    def _smallest(self, block: Any) -> Any:
        import numpy as np

        for kind in self.kinds[:-1]:
            with np.errstate(all="ignore"):
                small = block.astype(kind)
            if np.array_equal(small.astype(self.wide), block, equal_nan=True) and _same_signs(small, block):
                return small
        return block


def _same_signs(small: Any, block: Any) -> bool:
    import numpy as np

    if small.dtype.kind != "f":
        return True
    return bool((np.signbit(small) == np.signbit(block)).all())


class CompactFloats(_Compact):
    kinds = _FLOATS
    wide = "float64"

    def __init__(self) -> None:
        super().__init__()
        self._nan = False

    @property
    def has_nan(self) -> bool:
        self._flush()
        return self._nan

    def _seen(self, block: Any) -> None:
        import numpy as np

        self._nan = self._nan or bool(np.isnan(block).any())


class CompactInts(_Compact):
    kinds = _INTS
    wide = "int64"
