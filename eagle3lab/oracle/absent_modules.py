"""An import shim for modules an engine imports at load time but whose code the rule under test never runs.

SGLang (the release the oracle runs, ``layer_ids.SGLANG_NEWEST_READ``) imports ``torchvision`` unconditionally on the way to ``ServerArgs.resolve_once``
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

``install(..., narrow={name: modules})`` serves a further absent module to import statements written in
exactly those modules, nowhere else, for engine code that imports it at construction where a whole-package
shim would switch optional paths on. The one use: that SGLang's ``RotaryEmbedding.__init__``
(``sglang.srt.layers.rotary_embedding.base``), on a platform that is none of CUDA, HIP, XPU, NPU, MUSA, MPS,
an out-of-tree plugin or SGLang's CPU engine (``SGLANG_USE_CPU_ENGINE=1``, which needs sgl-kernel's CPU
build), binds ``from vllm._custom_ops import rotary_embedding`` as its fallback kernel while the model is
built; only ``forward_cuda`` calls it, and the platform dispatcher (``sglang/kernels/fused_op.py``) runs
``forward_native`` on a plain CPU. Served to that module alone, so ``fused_moe.py``'s and ``layernorm.py``'s
``try: from vllm import _custom_ops`` still find no vLLM and keep their native paths. The layer-id oracle
(``tests/oracles/engine_scripts/sglang_layer_ids.py``) builds the models this way and asserts ``USED`` empty.
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
                               "shim in this environment (eagle3lab/oracle/absent_modules.py)")

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
    def __init__(self, importers: tuple[str, ...], narrow: dict[str, tuple[str, ...]] | None = None):
        self.importers = importers
        self.narrow = dict(narrow or {})   # absent top-level name -> the exact modules it is served to

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top not in ABSENT and top not in self.narrow:
            return None
        who = _importer()
        if who.split(".")[0] == top:   # a submodule asked for by the stand-in package itself
            pass
        elif top in ABSENT and who.split(".")[0] in self.importers:
            pass
        elif who not in self.narrow.get(top, ()):
            return None
        SERVED.append((fullname, who))
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _AbsentModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def install(importers: tuple[str, ...], narrow: dict[str, tuple[str, ...]] | None = None) -> None:
    """Serve ``ABSENT`` modules to import statements in packages ``importers`` (e.g. ``("sglang",)``), and
    each module named in ``narrow`` only to import statements in the exact modules listed for it."""
    finders = [f for f in sys.meta_path if isinstance(f, _Finder)]
    if finders:
        finders[0].narrow.update(narrow or {})
    else:
        sys.meta_path.insert(0, _Finder(tuple(importers), narrow))
