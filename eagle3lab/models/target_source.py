"""Where a notebook's target comes from: loaded here, a hidden-state dump a serving cluster wrote, or its config only.

A target too big for this machine still has a depth and an architecture (enough for every engine's reading
of the ids, notebook 02's tables, notebook 01's flag checks) and, when a cluster ran it with a capture
connector (vLLM ``extract_hidden_states``, ``dump_hidden_states``), states on disk (enough to score a draft
teacher-forced: ``bank_from_dump`` with the target's final norm and head, ``TargetHead.from_folder``, as
``eagle3lab doctor --dump --target-head`` does). ``open_target`` picks the mode from what is given, and a
cell that needs the loaded model asks ``source.skip(what)``, which says why it does not run.

    source = open_target(TARGET, dump_dir=DUMP_DIR, target_head=TARGET_HEAD, num_layers=NUM_LAYERS, arch=ARCH)
    source.mode, source.num_layers, source.arch      # "live" | "dump" | "config-only"
    if not source.skip("the capture paths"):
        ...                                          # source.target: the loaded Target
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab.errors import bad_input

LIVE, DUMP, CONFIG_ONLY = "live", "dump", "config-only"


@dataclass
class TargetSource:
    """The target as this notebook has it (see the module docstring)."""

    mode: str
    num_layers: int
    arch: str | None
    name: str                          # what the words call it: a path, or "a DeepseekV3ForCausalLM target, N = 61"
    target: object = None              # live: the loaded ``Target``
    dump: object = None                # dump: the ``HiddenDump``
    head_folder: str | None = None     # dump: the target's folder (config, final norm, LM head)
    why: str = ""                      # dump / config-only: why nothing is loaded, for the skip lines
    notes: list = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.target is not None

    def skip(self, what: str) -> bool:
        """True (and one line saying so) when ``what`` needs the loaded target and this source has none."""
        if self.live:
            return False
        print(f"{what}: needs the loaded target; skipped ({self.mode} mode: {self.why}).")
        return True

    def skip_states(self, what: str) -> bool:
        """True (and one line saying so) when ``what`` needs the target's states and this source has none
        (config-only: a live target or a dump has them)."""
        if self.live or self.dump is not None:
            return False
        print(f"{what}: needs the target's states; skipped ({self.mode} mode: {self.why}).")
        return True

    def describe(self) -> dict:
        if self.live:
            return {"mode": self.mode, **self.target.describe()}
        out = {"mode": self.mode, "arch": self.arch, "num_layers": self.num_layers, "source": self.name}
        if self.dump is not None:
            out.update(dump=str(self.dump.path), samples=len(self.dump), points=list(self.dump.resid))
        return out

    def load_draft(self, path, **kw):
        """A draft against this target: its embedding from the loaded target, or from the head's folder (dump
        mode), or none at all (config-only: the draft's config and fc weights, enough for what the ids mean)."""
        from eagle3lab.models.checkpoint import load_draft

        if self.live:
            return load_draft(path, target=self.target, **kw)
        if self.head_folder is not None:
            return load_draft(path, target=self.head_folder, check_vocab=False, **kw)
        return load_draft(path, num_target_layers=self.num_layers, require_embedding=False, **kw)

    def bank(self):
        """Dump mode: the dump's states with the target's head (``models.state_bank.bank_from_dump``)."""
        from eagle3lab.models.state_bank import TargetHead, bank_from_dump

        if self.dump is None:
            raise bad_input("TargetSource.bank", "dump", "a hidden-state dump (DUMP_DIR)", None,
                            "A live target's bank is captured from it: models.state_bank.capture_bank.")
        if self.head_folder is None:
            raise bad_input("TargetSource.bank", "TARGET_HEAD", "the target's folder (its final norm and LM head)",
                            None, "A dump holds the states only; the head scores them.")
        return bank_from_dump(self.dump, TargetHead.from_folder(self.head_folder), num_layers=self.num_layers)

    def dump_states(self):
        """Dump mode: ``(states, attention_mask)`` as ``capture_resid`` gives them, ``resid index -> [B, T, H]``
        over the dump's samples right-padded (only the points the dump holds)."""
        import torch

        samples = list(self.dump)
        lengths = [int(s.token_ids.shape[0]) for s in samples]
        width, hidden = max(lengths), samples[0].hidden_states.shape[-1]
        states = {k: torch.zeros(len(samples), width, hidden, dtype=samples[0].hidden_states.dtype)
                  for k in self.dump.resid}
        mask = torch.zeros(len(samples), width, dtype=torch.long)
        for i, s in enumerate(samples):
            mask[i, :lengths[i]] = 1
            for j, k in enumerate(self.dump.resid):
                states[k][i, :lengths[i]] = s.hidden_states[:, j]
        return states, mask


def _config_shape(folder) -> tuple[int | None, str | None]:
    """num_hidden_layers and the first architecture of a target folder's config.json (or a config file)."""
    from eagle3lab.engines.flags.configs import text_config
    from eagle3lab.models.checkpoint import read_config

    raw, _ = read_config(folder)
    layers = text_config(raw).get("num_hidden_layers")
    archs = raw.get("architectures") or text_config(raw).get("architectures") or [None]
    return (int(layers) if layers is not None else None), archs[0]


def open_target(target=None, *, dump_dir=None, target_head=None, dump_layer_ids=None, num_layers: int | None = None,
                arch: str | None = None, missing=None, **load) -> TargetSource:
    """The target from what the parameters give: ``dump_dir`` (with ``target_head``, the target's folder, or
    ``num_layers``) reads a dump and loads nothing; else ``num_layers`` (``arch`` optional) is config-only; else
    ``target`` is loaded (``load``: ``load_target``'s keywords). ``missing``: called for a stand-in when the
    target folder has no config.json (the notebooks' tiny random model before ``make data``)."""
    if dump_dir is not None:
        from eagle3lab.models.hidden_dump import HiddenDump

        head_layers, head_arch = _config_shape(target_head) if target_head is not None else (None, None)
        if num_layers is not None and head_layers is not None and int(num_layers) != head_layers:
            raise bad_input(Path(target_head) / "config.json", "num_hidden_layers",
                            f"the depth NUM_LAYERS states ({num_layers})", head_layers,
                            "Set NUM_LAYERS = None to take the head's, or point TARGET_HEAD at this target.")
        n = num_layers or head_layers
        dump = HiddenDump(dump_dir, vllm_layer_ids=dump_layer_ids, num_layers=n)
        n = n or dump.num_layers
        if n is None:
            raise bad_input(dump_dir, "num_layers", "the target's depth: TARGET_HEAD's config.json, the dump's "
                            "manifest, or NUM_LAYERS", None)
        manifest_arch = ((dump.manifest or {}).get("target") or {}).get("arch")
        name = f"the dump {Path(dump_dir).name} ({len(dump)} samples, resid{list(dump.resid)})"
        return TargetSource(DUMP, n, arch or head_arch or manifest_arch, name, dump=dump,
                            head_folder=None if target_head is None else str(target_head),
                            why=f"states from {dump_dir}, written by the serving cluster")
    if num_layers is not None:
        name = f"a {arch or 'target of unknown architecture'} (N = {num_layers}, config only)"
        return TargetSource(CONFIG_ONLY, int(num_layers), arch, name,
                            why=f"NUM_LAYERS = {num_layers}{f', ARCH = {arch}' if arch else ''}, no weights here")
    if target is None:
        raise bad_input("open_target", "TARGET", "a target folder, a dump (DUMP_DIR) or the config (NUM_LAYERS)", None)
    if missing is not None and not (Path(str(target)) / "config.json").exists():
        stand_in = missing()
        return TargetSource(LIVE, stand_in.num_layers, stand_in.arch, "a tiny random stand-in", target=stand_in,
                            notes=[f"{target} not found: a tiny RANDOM model built in memory stands in"])
    from eagle3lab.models.target import load_target

    loaded = load_target(target, **load)
    return TargetSource(LIVE, loaded.num_layers, loaded.arch, str(loaded.path), target=loaded)
