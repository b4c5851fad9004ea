"""``eagle3lab inspect DRAFT``: what a draft checkpoint is and what each engine makes of it."""

from __future__ import annotations

import json

from eagle3lab.app.cli import add_platform_argument


def add_arguments(parser):
    parser.add_argument("draft", help="draft checkpoint folder (or just its config.json)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--target", help="target folder or its config.json (layer count, hidden size, arch)")
    group.add_argument("--num-target-layers", type=int, metavar="N", help="the target's number of decoder layers")
    parser.add_argument("--engine", choices=("vllm", "sglang"), default=None,
                        help="whose build --engine-version / --engine-platform name (its profiles are shown as that "
                             "build runs them)")
    parser.add_argument("--engine-version", metavar="V", default=None,
                        help="that engine's release (e.g. 0.32.0), build date YYYY-MM-DD or pre-#PR / post-#PR")
    add_platform_argument(parser, ", and so where it reads aux ids")
    parser.add_argument("--json", action="store_true", help="print one JSON object (see docs/cli/inspect.md)")


def run(args) -> int:
    from eagle3lab.engines.profiles import engine_builds
    from eagle3lab.engines.versions import parse_engine_version
    from eagle3lab.errors import bad_input
    from eagle3lab.models.checkpoint import inspect_checkpoint

    parse_engine_version(args.engine_version, "--engine-version")
    if args.engine is None and (args.engine_version or args.engine_platform):
        raise bad_input("--engine-version / --engine-platform", None, "--engine vllm or --engine sglang with them "
                        "(a release number names one engine's build)", "no --engine")
    if args.engine_platform and args.engine != "vllm":
        raise bad_input("--engine-platform", None, "--engine vllm (the platform decides vLLM's model runner)",
                        args.engine)
    builds = engine_builds(args.engine, args.engine_version, args.engine_platform)
    report = inspect_checkpoint(args.draft, target=args.target, num_target_layers=args.num_target_layers,
                                builds=builds)
    if report.aux_ids is not None:   # the builds asked read the ids as that build does
        report.aux_ids.with_builds(builds)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(render(report))
    return 1 if report.errors else 0


def render(r) -> str:
    """The human-readable report of an ``Inspection``."""
    from eagle3lab.models.checkpoint import EMBEDDING_SOURCE

    lines = [f"{r.config_file}", f"  kind: {r.kind} ({r.format_reason})"]
    if not r.is_eagle3_draft:
        lines.append(f"  not an EAGLE-3 draft; geometry: {r.target_like.to_dict() if r.target_like else None}")
    if r.family is not None:
        f = r.family
        lines.append(f"  family: {f.family} ({f.attention} attention), rope {f.rope_type}, "
                     f"fc reads {f.num_aux} aux states ({f.num_aux_from})")
    if r.sizes is not None:
        s = r.sizes
        lines.append(f"  sizes: hidden {s.hidden_size} (target {s.target_hidden_size}), "
                     f"{s.num_hidden_layers} layer(s), heads {s.num_attention_heads}/{s.num_key_value_heads} "
                     f"x {s.head_dim}, mlp {s.intermediate_size}, fc reads {s.num_aux} aux states")
        lines.append(f"  vocab: target {s.vocab_size}, draft {s.draft_vocab_size}; rope theta {s.rope_theta} "
                     f"scaling {s.rope_scaling}; max positions {s.max_position_embeddings}")
    if r.weights is not None:
        w = r.weights
        lines.append(f"  weights: {', '.join(w.files) or 'none (config only)'}"
                     + (f"; {EMBEDDING_SOURCE[w.embedding]}, {w.dtype}, {w.num_parameters:,} parameters"
                        if w.checked else ""))
    if r.aux_ids is not None:
        lines += _aux_lines(r.aux_ids)
    if r.serving is not None:
        cannot = {name: row for name, row in r.serving.items() if row.problems}
        lines.append(f"  runs in: {', '.join(n for n in r.serving if n not in cannot) or 'no engine modelled'}")
        for name, row in cannot.items():
            lines += [f"    {name:<14} cannot: {p}" for p in row.problems]
    if r.norm_flags is not None:
        lines.append("  flags (written -> what each engine runs):")
        for flag, info in r.norm_flags.items():
            values = ", ".join(f"{e}={d.value}" for e, d in info.by_engine.items())
            written = "-" if flag in ("recycle", "embedding") else info.written
            lines.append(f"    {flag:<20} written {written!s:<5} -> {values}")
    for d in r.defaulted or []:
        lines.append(f"  defaulted {d.field}" + (f" = {d.value}" if d.value is not None else "") + f": {d.rule}")
    for f in r.findings or []:
        lines.append(f"  {f.severity} {f.code} [{f.engine}]: {f.title}")
        lines += [f"    {f.text}", f"    fix: {f.fix}"]
    for f in r.vocab.findings if r.vocab is not None else []:
        lines.append(f"  vocab {f.severity}: {f.where}: {f.text}")
    lines += [f"  warning: {w.text}" for w in r.warnings]
    lines += [f"  ERROR: {e.text}" for e in r.errors]
    lines += [f"  not checked: {n.text}" for n in r.not_checked]
    return "\n".join(lines)


def _aux_lines(a) -> list[str]:
    """The aux ids as written and, per profile, the resid points it captures, its build and its notes."""
    lines = [f"  aux ids as written: {a.as_written} at {a.key or '(none: engine defaults)'}; "
             f"N = {a.num_target_layers or '?'}" + (f", target arch {a.target_arch}" if a.target_arch else "")]
    for name, row in a.by_engine.items():
        got = row.label or f"? ({(row.error or '').split(':')[-1].strip()})"
        build = " ".join(str(v) for v in (row.engine_version, row.engine_platform) if v)
        lines.append(f"    {name:<14} captures {got}" + (" [defaults]" if row.defaulted else "")
                     + (" [BREAKS]" if row.fatal else "")
                     + (f" (build {build}" + (f", {row.runner} model runner" if row.runner else "")
                        + ")" if build else ""))
        for note in ([row.note] if row.note else []) + row.warnings:
            lines.append(f"    {'':<14} - {note}")
    return lines
