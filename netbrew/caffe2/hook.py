"""The import hook that lets an unmodified Caffe2 script import netbrew.caffe2.

`import caffe2.python.core` loads `netbrew.caffe2.python.core` and registers it under
both names, so that `caffe2.python.core is netbrew.caffe2.python.core`: a script and
the modules it imports share one workspace. Only `caffe2` and its submodules are
redirected; a module the layer lacks raises ModuleNotFoundError naming it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

_PREFIX = "caffe2"
_TARGET = "netbrew.caffe2"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `caffe2[.x.y]` as `netbrew.caffe2[.x.y]`."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _PREFIX and not fullname.startswith(_PREFIX + "."):
            return None
        real = _TARGET + fullname[len(_PREFIX) :]
        if importlib.util.find_spec(real) is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: netbrew.caffe2 has no {real!r} "
                "(see netbrew.caffe2's docstring for what the layer covers)",
                name=fullname,
            )
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec) -> ModuleType:
        return importlib.import_module(_TARGET + spec.name[len(_PREFIX) :])

    def exec_module(self, module: ModuleType) -> None:
        """The netbrew module is already executed; nothing more to run."""


_FINDER = _Alias()


def install() -> None:
    """Makes `import caffe2...` load netbrew.caffe2 (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    """Removes the hook and the `caffe2` aliases it registered."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n in sys.modules if n == _PREFIX or n.startswith(_PREFIX + ".")]:
        del sys.modules[name]
