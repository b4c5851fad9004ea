"""Write the draft doctor's fixes can carry, in the serving engine's format, and measure it as that engine
runs it (``eagle3lab doctor --write-fixed``)."""

from __future__ import annotations

import contextlib

import torch

from eagle3lab.analysis.wiring_search import wiring_text
from eagle3lab.doctor.fixes import ENGINE_FORMAT
from eagle3lab.doctor.run import DoctorReport
from eagle3lab.doctor.vocab_behaviour import t2d_of, vocab_map
from eagle3lab.engines.acceptance import bootstrap_ratio, bootstrap_ratio_difference
from eagle3lab.errors import bad_input
from eagle3lab.models.state_bank import FINAL_NORMED


@contextlib.contextmanager
def _fc_columns(draft, wiring):
    """fc (and the fc norms: ``input_norm``'s weight by blocks, ``fc_norm`` per chunk) reordered so that states
    concatenated in ascending order, as engines capture them, compute what ``wiring``'s order computed;
    yields the ascending wiring. Everything is restored on exit."""
    order = sorted(range(len(wiring)), key=lambda i: wiring[i])
    width = draft.fc.weight.shape[1] // len(wiring)

    def blocks(t):
        return torch.cat([t[..., i * width:(i + 1) * width] for i in order], dim=-1)

    old_fc = draft.fc.weight.data
    norm = getattr(draft, "input_norm", None)
    old_norm = norm.weight.data if norm is not None else None
    chunks = getattr(draft, "fc_norm", None)
    old_chunks = list(chunks) if chunks is not None else None
    try:
        draft.fc.weight.data = blocks(old_fc)
        if norm is not None:
            norm.weight.data = blocks(old_norm)
        if chunks is not None:
            for j, i in enumerate(order):
                chunks[j] = old_chunks[i]
        yield tuple(wiring[i] for i in order)
    finally:
        draft.fc.weight.data = old_fc
        if norm is not None:
            norm.weight.data = old_norm
        if chunks is not None:
            for j, m in enumerate(old_chunks):
                chunks[j] = m


def write_fixed(report: DoctorReport, out_dir, *, overwrite: bool = False) -> dict:
    """Write the draft with every fix a checkpoint can carry, in ``report.engine``'s format, then load it
    back, run it as that engine does and measure it on the same bank (all of it read from
    ``report.checkpoint``, doctor's last stage).

    Returns what was written, the measured tau, doctor's prediction for it (``report.written_fix``) and
    their paired difference; ``agrees`` = the difference's interval holds 0 and it is below 0.02 (both
    come from the same states, so they should match). ``remaining`` = the critical findings the written
    checkpoint does not fix (the checkpoint errors are re-read from OUT). The launch command's fixes are
    not in a checkpoint: the measurement assumes them (the printed flags). RoPE keys are left to the
    user: they change the draft's arithmetic, which doctor does not predict.
    """
    from dataclasses import replace

    from eagle3lab.analysis.wiring_search import served_views
    from eagle3lab.decoding.evaluate import evaluate_on_bank
    from eagle3lab.models.checkpoint import inspect_checkpoint, load_draft, save_draft
    from eagle3lab.models.vocab import check_vocab_map

    plan = report.checkpoint
    if plan is None:
        raise bad_input("write_fixed", "report", "a report from run_doctor in this process", "a loaded report")
    fix, draft, bank, engine = plan.predicted, plan.draft, plan.bank, plan.build.engine
    if not fix.wiring or FINAL_NORMED in fix.wiring:
        raise bad_input("--write-fixed", None, "a wiring of target layers an engine can capture",
                        "the final post-norm state", "No aux ids can ask an engine for it; retrain instead.")
    if fix.d2t is not None:
        t2d = t2d_of(fix.d2t, draft.config.vocab_size)
        broken = [f for f in check_vocab_map(fix.d2t, t2d, draft.config.vocab_size, draft.config.draft_vocab_size)
                  if f.severity.blocking]
        if broken:
            raise bad_input(out_dir, "d2t", "a valid map after re-pointing the slots read from behaviour",
                            f"{broken[0].where}: {broken[0].text}",
                            "Slots the draft used too rarely to be read are wrong too: restore the map the draft "
                            "was trained with (its training run's vocabulary) instead.")
    config_keys = dict(plan.config_keys)
    with _fc_columns(draft, fix.wiring) as ascending:
        # the config states the rule of the fixes kept (plan_checkpoint), even where this engine ignores it
        view = draft.rewired(aux_resid=ascending, **plan.stated_variant)
        view.config = replace(draft.config, **config_keys)
        with vocab_map(draft, fix.d2t) if fix.d2t is not None else contextlib.nullcontext():
            written = save_draft(view, out_dir, format=ENGINE_FORMAT[engine], overwrite=overwrite,
                                 include_embedding=False if engine == "sglang" else None,
                                 num_target_layers=bank.num_layers)
    # in the dtype the prediction was measured in (load_draft's "auto" is fp32 on a CPU, bf16 on CUDA)
    reloaded = load_draft(out_dir, target=plan.target_source, device=str(draft.fc.weight.device),
                          dtype=draft.fc.weight.dtype)
    # read back as the engine build doctor was told of reads the written ids (save_draft writes them for the
    # newest code read: a build that reads them otherwise measures, and is reported, as it runs them)
    views = served_views(reloaded, bank.num_layers, reloaded.target_arch,
                         engine_versions={engine: plan.build.version}, engine_platforms={engine: plan.build.platform})
    if engine not in views:
        raise bad_input(out_dir, "aux ids", f"ids {engine} can read", "none", "Report this as a doctor bug.")
    served = views[engine]
    score = evaluate_on_bank(bank, served, tuple(served.aux_resid), fix.num_steps)   # as the engine runs it
    tau = bootstrap_ratio(*score.tau_sums)
    difference = bootstrap_ratio_difference(*score.tau_sums, *fix.score.tau_sums)
    errors = [e.text for e in inspect_checkpoint(out_dir, target=plan.target_source).errors]
    remaining = [f for f in report.remaining_after_write() if f.code != "CHECKPOINT_ERROR" or errors]
    return {"path": str(out_dir), "written": written.to_dict(), "config_keys": config_keys,
            "served_wiring": wiring_text(served.aux_resid), "num_steps": fix.num_steps, "tau": tau,
            "predicted": fix.tau, "difference": difference, "checkpoint_errors": errors,
            "agrees": difference.sign() == 0 and abs(difference.value) < 0.02, "remaining": remaining}
