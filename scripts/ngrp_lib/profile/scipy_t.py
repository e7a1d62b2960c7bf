"""scipy's `stdtrit` (the t quantile of Gym's intervals) without running `scipy.special`'s `__init__`.

Gym's `ci_*` values are `scipy.stats.t.interval`, whose quantiles are `scipy.special.stdtrit`; they are not
correctly rounded, so only scipy's own code gives their bits (see `kernels.gym_confidence_interval`).
`import scipy.special` costs ~0.13 s of CPU on scipy 1.17 (half of the parsing floor of 80,000 rollouts),
almost all of it in the package's `__init__` (its array-API layer, which imports numpy.testing, numpy.f2py
and numpy.ma), not in the extension module that holds the ufunc (`scipy.special._ufuncs`, ~0.01 s).

So `stdtrit()` makes the `scipy.special` package object from its real spec, imports `_ufuncs` into it, and
leaves the package's `__init__` to run on the first attribute anything asks of it that is not there yet
(`_Pending`): the same module object then becomes the full package, its submodule attributes included, for
any later `import scipy.special` or `scipy.stats`. `scipy.special.stdtrit` *is* `_ufuncs.stdtrit` (the
array-API wrapper only replaces it under SCIPY_ARRAY_API=1, where it calls this same ufunc for numpy
input), so the bits are the public function's. Anything unexpected on this path (a scipy that lays its
modules out otherwise) falls back to the plain `from scipy.special import stdtrit`.

Measured: 0.14 -> 0.02 s on scipy 1.17. scipy 1.18's `_ufuncs` itself imports scipy.linalg (through
`_ellip_harm_2`), so there it saves nothing; it costs nothing either.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

PACKAGE = "scipy.special"
UFUNCS = "scipy.special._ufuncs"  # the extension module that holds stdtrit
_found: list[Any] = []  # the ufunc, once `_from_ufuncs` has loaded it


class _Pending(types.ModuleType):
    """`scipy.special` holding only the submodules imported into it so far: the package's `__init__` runs on
    the first attribute (or `dir()`) asked of it that it lacks, then it is a plain module again."""

    def __getattr__(self, name: str) -> Any:
        _complete(self)
        return getattr(self, name)

    def __dir__(self) -> list[str]:
        _complete(self)
        return dir(self)


def _complete(module: types.ModuleType) -> None:
    if type(module) is not _Pending:  # completed by another caller meanwhile
        return
    plain: types.ModuleType = module
    plain.__class__ = types.ModuleType  # no more __getattr__ from here: the package's own code runs next
    spec = module.__spec__
    assert spec is not None and spec.loader is not None
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if sys.modules.get(module.__name__) is module:  # as a failed import: gone, so a retry starts anew
            del sys.modules[module.__name__]
        raise


def stdtrit() -> Any:
    """scipy's `stdtrit` ufunc; ImportError without scipy (or when `scipy.special` is blocked, as a test
    does by setting it to None in sys.modules)."""
    package = sys.modules.get(PACKAGE)
    if type(package) is _Pending:  # loaded by an earlier call, still without its __init__
        return _found[0]
    if PACKAGE not in sys.modules:
        try:
            _found[:] = [_from_ufuncs()]
            return _found[0]
        except Exception:  # not the layout this expects: the public import below
            pass
    from scipy.special import stdtrit as found

    return found


def _from_ufuncs() -> Any:
    import scipy  # the top package only: its submodules load on demand

    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        raise ImportError(PACKAGE)
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    try:
        ufuncs = importlib.import_module(UFUNCS)
    except BaseException:
        if sys.modules.get(PACKAGE) is package:
            del sys.modules[PACKAGE]
        raise
    package.__class__ = _Pending
    scipy.special = package  # as the import system binds a submodule to its package
    found = getattr(ufuncs, "stdtrit", None)
    return found if found is not None else package.stdtrit  # elsewhere in some release: the whole package
