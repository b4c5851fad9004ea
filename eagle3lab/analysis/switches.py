"""The draft's switches: the settings a wiring hypothesis sets besides the wiring (``Eagle3Draft.rewired``
keywords, the keys of ``Eagle3Draft.variants()``; a family may add its own, e.g. Qwen3's ``qk_norm``), the
config key that states each, and which of them an engine cannot apply. The one home doctor, the wiring
search and the written checkpoint read them from."""

from __future__ import annotations

from eagle3lab.engines.profiles import FLAGS, get_profile

# norm_output states which state is recycled into the next step; every other flag is its own switch
_SWITCH_OF_FLAG = {"norm_output": "recycle_postnorm"}
_FLAG_OF_SWITCH = {switch: flag for flag, switch in _SWITCH_OF_FLAG.items()}
# in the draft's data-flow order, as engines.profiles.FLAGS lists the config flags: fc's input norms, the first
# layer's residual rule, the recycled state
SWITCHES = tuple(_SWITCH_OF_FLAG.get(flag, flag) for flag in FLAGS)


def config_key(switch: str) -> str:
    """The config key that states ``switch``."""
    return _FLAG_OF_SWITCH.get(switch, switch)


def ignores(profile, switch: str) -> bool:
    """Whether the engine runs ``switch`` off whatever the checkpoint states: it ignores the flag, or (the
    recycled state) its norm_output only means the norm before lm_head."""
    profile = get_profile(profile)
    if config_key(switch) not in profile.honours:
        return True
    return switch == "recycle_postnorm" and not profile.norm_output_recycles_postnorm


def cannot_apply(profile, variant: dict, switches=SWITCHES) -> list[str]:
    """The ``switches`` that ``variant`` turns on and the engine cannot run (an engine runs an ignored switch
    off, so a switch off is always applied)."""
    return [k for k in switches if variant.get(k) and ignores(profile, k)]
