"""An import shim for modules an engine imports at load time but whose code the rule under test never runs.

SGLang 0.5.23 imports ``torchvision`` unconditionally on the way to ``ServerArgs.resolve_once``
(``sglang.srt.configs`` -> ``nano_nemotron_vl`` -> ``multimodal/internvl_utils.py``: image transforms
for InternVL). PyPI's torchvision does not load beside the CPU torch the engine environment pins, and
image transforms have nothing to do with flag resolution. So, for the names in ``ABSENT`` only:

- the module is served only to an ``import`` statement written in one of ``importers`` (SGLang's
  own modules); ``importlib.util.find_spec`` (how transformers asks whether torchvision is
  installed) and every other importer still find nothing, so no optional code path switches on;
- every name imported from it is a stand-in that raises ``AbsentModuleUsed`` on any use
  (attribute, call, subclassing) and records the use in ``USED``; ``from torchvision.x import Name``
  at import time only binds a name, which is not a use.

The resolver reports ``SERVED`` and ``USED``; the parity tests assert ``USED`` is empty, i.e. the
rules SGLang ran never touched torchvision. Standard library only: the resolver loads this file by
path before SGLang, in the engine's interpreter.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

ABSENT = ("torchvision",)
SERVED: list[tuple[str, str]] = []   # (module, the module whose import statement asked for it)
USED: list[str] = []                 # "torchvision.transforms.Compose (call)": any use at all is a failure


class AbsentModuleUsed(RuntimeError):
    pass


class _StandIn:
    """A name imported from an absent module: binding it is fine, using it is recorded and raises."""

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def _use(self, how: str):
        USED.append(f"{self._name} ({how})")
        raise AbsentModuleUsed(f"{self._name} was used ({how}), but {self._name.split('.')[0]} is only an import "
                               "shim in this environment (eagle3lab/engines/oracle/absent_modules.py)")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._use(f".{attr}")

    def __call__(self, *args, **kwargs):
        self._use("call")

    def __mro_entries__(self, bases):
        self._use("subclassed")

    def __repr__(self):
        return f"<absent {self._name}>"


class _AbsentModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _StandIn(f"{self.__name__}.{attr}")


def _importer() -> str:
    """The module whose code is running the import (the first frame outside importlib's machinery)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, importers: tuple[str, ...]):
        self.importers = importers

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in ABSENT:
            return None
        who = _importer()
        if not (who.split(".")[0] in self.importers or who.split(".")[0] in ABSENT):
            return None
        SERVED.append((fullname, who))
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _AbsentModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def install(importers: tuple[str, ...]) -> None:
    """Serve ``ABSENT`` modules to import statements in packages ``importers`` (e.g. ``("sglang",)``)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(tuple(importers)))
