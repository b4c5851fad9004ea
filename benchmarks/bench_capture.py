"""Capture overhead and memory, measured side by side in one run.

    .venv/bin/python benchmarks/bench_capture.py [--target DIR] [--device auto] [--batch 4] [--seq-len 256]

Prints the time of a forward under ResidCapture (3 points; all N+1 points; HF output_hidden_states)
as a ratio to a plain forward of the same decoder stack, timed interleaved (best and median of --repeats),
and the memory the captured states hold (3 points vs all), plus the CUDA peak when on a GPU.
Goal: the 3-point capture costs at most 1.05x a plain forward.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from eagle3lab import bundled
from eagle3lab.engines.layer_ids import default_resid
from eagle3lab.models.capture import ResidCapture
from eagle3lab.models.target import load_target, tiny_target


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", help="target folder (default: data/models/target, else a random Llama)")
    p.add_argument("--device", default="auto")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--repeats", type=int, default=25)
    args = p.parse_args(argv)

    path = args.target or (str(bundled.TARGET) if bundled.available()["target"] else None)
    if path:
        target = load_target(path, device=args.device)
    else:  # big enough that a forward is not dominated by Python overhead
        target = tiny_target("llama", num_layers=8, hidden_size=256, vocab_size=1000)
        target.model.to(torch.device("cuda") if args.device != "cpu" and torch.cuda.is_available() else "cpu")
    dev, n = target.device, target.num_layers
    ids = torch.randint(0, target.vocab_size, (args.batch, args.seq_len), device=dev)
    three, every = default_resid(n), tuple(range(n + 1))
    print(f"target {target.path} ({target.arch}, N={n}, H={target.hidden_size}, {target.dtype}) on {dev}; "
          f"batch {args.batch} x {args.seq_len} tokens; points {list(three)} vs all {n + 1}")

    def plain():
        target.decoder(input_ids=ids, use_cache=False)

    def capture(points):
        def run():
            with ResidCapture(target, points) as cap:
                target.decoder(input_ids=ids, use_cache=False)
            return cap
        return run

    def hf_all():
        target.decoder(input_ids=ids, use_cache=False, output_hidden_states=True)

    cases = {"plain forward": plain, "capture 3 points": capture(three), "capture all points": capture(every),
             "HF output_hidden_states": hf_all}
    times = {name: [] for name in cases}
    with torch.no_grad():
        for fn in cases.values():  # warm up
            fn()
        for _ in range(args.repeats):
            for name, fn in cases.items():  # interleaved, so drift hits every case alike
                _sync(dev)
                t0 = time.perf_counter()
                fn()
                _sync(dev)
                times[name].append(time.perf_counter() - t0)
    # Best-of is the least noisy estimate on a shared machine; the median is shown too.
    base, base_med = min(times["plain forward"]), statistics.median(times["plain forward"])
    print(f"\n{'case':<26}{'best ms':>9}{'ratio':>8}{'median ms':>11}{'ratio':>8}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<26}{min(ts) * 1e3:>9.2f}{min(ts) / base:>7.3f}x{med * 1e3:>11.2f}{med / base_med:>7.3f}x")

    print(f"\n{'memory held by the states':<34}{'MiB':>10}")
    held = {}
    with torch.no_grad():
        for label, points in (("3 points", three), ("all points", every)):
            if dev.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(dev)
            cap = capture(points)()
            held[label] = sum(t.numel() * t.element_size() for t in cap.states.values())
            peak = f"  (CUDA peak {torch.cuda.max_memory_allocated(dev) / 2**20:.1f} MiB)" if dev.type == "cuda" else ""
            where = next(iter(cap.states.values())).device
            print(f"{label + ' (on ' + str(where) + ')':<34}{held[label] / 2**20:>10.2f}{peak}")
            del cap
    print(f"ratio all / 3 points: {held['all points'] / held['3 points']:.2f}x "
          f"(= {n + 1} / {len(three)} points: memory grows with what is asked for)")
    ratio = min(times["capture 3 points"]) / base
    print(f"\ngoal: capture 3 points <= 1.05x plain forward: {'met' if ratio <= 1.05 else 'NOT met'} ({ratio:.3f}x)")


if __name__ == "__main__":
    main()
