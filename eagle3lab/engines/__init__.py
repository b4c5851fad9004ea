"""Engine knowledge: what SGLang, vLLM, speculators, SpecForge and the EAGLE repository do, as data.

The flag resolvers (``flags/``), the layer-id translation into ``resid[k]`` (``layer_ids``), engine
builds and the changes between them (``versions``), each engine's draft conventions (``profiles``),
SGLang's verify-width rule (``verify_width``) and each engine's definition of acceptance
(``acceptance``). Pure Python, no torch: a laptop without torch can resolve a launch command. May
import only the foundation (``eagle3lab.errors``, ``eagle3lab.atomic``, ``eagle3lab.bundled``) and
itself; every layer above may import it.
"""
