"""What changes from a toy target to a real one? The same measurements on both tracks, side by side.

    python benchmarks/bench_tracks.py [--threads 2] [--prompts 6] [--tokens 64] [--repeats 3]
                                      [--out build/bench_tracks.json]

Tracks (``eagle3lab.bundled.TRACKS``): ``bundled`` (the 12-layer, hidden-192 target trained here and
its healthy draft) and ``smollm2`` (SmolLM2-135M-Instruct, 30 layers, the Q4_1 GGUF release
dequantized, and its healthy draft trained here). For each, in one run:

- real lossless decoding beside ``transformers`` ``generate``: tau with a bootstrap interval over
  prompts, conditional acceptance per position, and the end-to-end speed ratio over ``generate`` with its
  paired bootstrap interval over prompts (``--repeats`` interleaved repetitions pooled, each prompt one unit;
  recorded whole as ``vs_generate``: value, low, high, level, units, word), for chains of 2 and 4 and SGLang's
  Llama tree (5, 4, 8);
- the cost ratio c (a draft step over a target step) on this machine (``measure_costs``);
- how interchangeable adjacent layers are: ``search_wiring`` on the healthy draft, per slot the
  number of points within noise of the best, the tau lost one layer away and at the worst point.
The measurement is ``eagle3lab.analysis.tracks.measure_track`` (notebook 05 runs it small).
Only ratios and acceptance carry over between machines; the absolute rates are this machine's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from eagle3lab import bundled
from eagle3lab.analysis.benchmark import finite_json
from eagle3lab.analysis.tracks import measure_track, side_by_side
from eagle3lab.atomic import write_json
from eagle3lab.models.checkpoint import load_draft
from eagle3lab.models.target import load_target


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--prompts", type=int, default=6)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tracks", nargs="*", default=list(bundled.TRACK_MODELS), choices=list(bundled.TRACK_MODELS))
    p.add_argument("--out", default="build/bench_tracks.json")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    prompts = bundled.load_prompts(n=args.prompts)
    measures = {}
    for track in args.tracks:
        models = bundled.TRACK_MODELS[track]
        target = load_target(models["target"], device="cpu", dtype="float32")
        draft = load_draft(models["healthy"], target=target, device="cpu")
        measures[track] = measure_track(target, draft, prompts, max_new_tokens=args.tokens, repeats=args.repeats,
                                        progress=True)
    print(f"\n{args.prompts} held-out prompts x {args.tokens} tokens, {args.repeats} repetitions, "
          f"{torch.get_num_threads()} threads, CPU")
    print(side_by_side(measures).to_string())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, finite_json({"threads": torch.get_num_threads(), "prompts": args.prompts, "tokens": args.tokens,
                                 "repeats": args.repeats, "tracks": {t: m.to_json() for t, m in measures.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
