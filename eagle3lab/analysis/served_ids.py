"""What notebook 03 can still say from a target's config alone (config-only mode): which states the engine feeds
the draft, and what each build can serve instead, with nothing scored (no states to score on).

``served_ids_summary(...)`` returns (text, claims), every wiring in the text taken from the claims; with the
target loaded, or a hidden-state dump, ``fc_reading.fc_order_summary`` says what each wiring costs.
"""

from __future__ import annotations

from eagle3lab.engines.layer_ids import resid_label


def served_ids_summary(*, draft: str, engine: str, trained, served, builds: dict, num_layers: int,
                       arch: str | None) -> tuple[str, dict]:
    """``builds``: engine build -> (the nearest wiring it can serve, the ids to write for it)."""
    trained, served = tuple(trained), tuple(served)
    same = served == trained
    parts = [f"{engine} {v} " + ("feeds the trained wiring itself" if tuple(w) == trained else
                                 f"can serve at nearest {resid_label(w)}") + f" (ids {list(ids)})"
             for v, (w, ids) in builds.items()]
    text = (f"{draft} was trained on {resid_label(trained)}; its checkpoint ids make {engine} feed "
            f"{resid_label(served)}: {'the trained states' if same else 'other states than training fed'}. "
            f"From the config alone ({arch or 'architecture not given'}, N = {num_layers}) nothing was scored. "
            f"Per build: {'; '.join(parts)}. What each costs in acceptance needs states: the target loaded here, "
            "or a hidden-state dump of it (DUMP_DIR).")
    claims = dict(mode="config-only", trained=list(trained), served=list(served), served_as_trained=same,
                  builds={v: {"wiring": list(w), "ids": list(i)} for v, (w, i) in builds.items()})
    return text, claims
