"""The seed team's 54.8 tok/s with ids [-1, 2, 30] set beside what SGLang's code does with them (issue 32)."""

from eagle3lab.engines.flags import SEED_TARGET_CONFIG
from eagle3lab.engines.flags.configs import first_arch
from eagle3lab.readings.seed_case import SEED_TEAM_TOK_S, measured_beside_code

KIMI_K25 = first_arch(SEED_TARGET_CONFIG)   # the seed's own target: KimiK25ForConditionalGeneration


def test_no_stock_build_serves_the_seed_fix_from_eagle_config():
    builds = ["0.5.4", "0.5.9", "0.5.11", "0.5.12", "0.5.13", "0.5.16", "0.5.17", "0.5.23"]
    seen = measured_beside_code("sglang", [-1, 2, 30], SEED_TEAM_TOK_S, 61, KIMI_K25, builds)
    assert KIMI_K25 == "KimiK25ForConditionalGeneration"
    assert seen.table.loc["0.5.4", "what"] == "stops at start-up"            # no kimi_k25.py before 0.5.9
    assert seen.table.loc["0.5.9", "what"] == "stops at start-up"            # no hook before PR #19689 (0.5.10)
    assert seen.table.loc["0.5.11", "what"] == "stops at the first forward"  # TypeError at loop index 0
    assert seen.table.loc["0.5.12", "what"] == "stops at the first forward"  # TypeError at loop index 0
    assert seen.table.loc["0.5.17", "what"] == "stops at the first forward"  # the count check
    # 0.5.13-0.5.16: -1 never reached and nothing counts, so two states reach the draft's three-slot fc, which fails
    assert seen.table.loc["0.5.13", "what"].startswith("stops at the draft's first forward")
    assert seen.runs_in == () and seen.table.loc["0.5.13", "why"].startswith("ids used as written")
    text = seen.words()
    assert "54.8 tok/s" in text and "fall back" not in text.split("What fits")[0]
    assert "resid[2, 30, 58]" in text and "patched build" in text and "another flag" in text
    # only a missing eagle_config (or one without ids) gives the default; one still holding ids gives those
    assert ("the default resid[2, 30, 58] where eagle_config is missing or holds no ids, the ids it held before (the "
            "wiring before the fix) where it still holds them") in text
    # no build runs them, so no explanation offers one
    assert len(seen.explanations) == 3 and "run as written" not in text
