"""``eagle3lab ids ENGINE [IDS...] --num-layers N``: what an engine's aux layer ids really capture."""

from __future__ import annotations

import json
import re

from eagle3lab.app.cli import add_platform_argument


def add_arguments(parser):
    from eagle3lab.engines.layer_ids import ID_CONVENTIONS

    parser.add_argument("engine", choices=ID_CONVENTIONS, help="whose convention IDS are written in")
    parser.add_argument("ids", nargs="*", metavar="IDS",
                        help="ids as written (e.g. 2 30 58, or 2,30,58; -1 allowed for SGLang; TransformerLens "
                             "hook names allowed); none = the engine's default")
    parser.add_argument("--num-layers", type=int, metavar="N", help="the target's num_hidden_layers")
    parser.add_argument("--arch", metavar="A",
                        help="target architecture (config.json architectures[0]), e.g. DeepseekV3ForCausalLM: "
                             "decides the DeepSeek-family rules and what SGLang does with id -1 (its model file)")
    parser.add_argument("--engine-version", metavar="V",
                        help="engine build date YYYY-MM-DD, pre-#PR / post-#PR (e.g. post-#25454), or a "
                             "release where its bounds are known (e.g. 0.5.12, or vLLM 0.32.0)")
    add_platform_argument(parser, ", and so where it reads the ids")
    parser.add_argument("--key", choices=("top", "nested"), default=None,
                        help="vLLM only: where the ids are written in the draft's config.json: top = "
                             "eagle_aux_hidden_state_layer_ids, nested = eagle_config.eagle_aux_hidden_state_layer_ids "
                             "(the build's model runner decides whether it reads them); default: ids vLLM reads")
    parser.add_argument("--to", metavar="ENGINE", choices=ID_CONVENTIONS,
                        help="also print the ids to write in ENGINE's convention for the same resid points")
    parser.add_argument("--json", action="store_true", help="print one JSON object (see docs/cli/ids.md)")


def _parse_ids(raw: list[str]):
    parts = [p for tok in raw for p in re.split(r"[,\s\[\]]+", tok) if p]
    if not parts:
        return None
    return [int(p) if re.fullmatch(r"-?\d+", p) else p for p in parts]


def run(args) -> int:
    from eagle3lab.engines.layer_ids import resid_label, resolve_aux_layers, to_engine_ids
    from eagle3lab.engines.versions import parse_engine_version
    from eagle3lab.engines.vllm_runner import IDS_NESTED, IDS_TOP
    from eagle3lab.errors import Eagle3LabError, bad_input

    parse_engine_version(args.engine_version, "--engine-version")  # bad input named as the user wrote it
    for flag, value in (("--engine-platform", args.engine_platform), ("--key", args.key)):
        if value is not None and args.engine != "vllm":
            raise bad_input(flag, None, "engine vllm (vLLM's model runner decides what it reads)", args.engine)
    key = {"top": IDS_TOP, "nested": IDS_NESTED}.get(args.key)
    res = resolve_aux_layers(args.engine, _parse_ids(args.ids), args.num_layers, arch=args.arch,
                             engine_version=args.engine_version, engine_platform=args.engine_platform, key=key)
    out = res.to_dict()
    out["breaks"] = bool(res.fatal)  # beside "fatal"; "confirmed" / "unconfirmed" come from to_dict
    if args.to:
        try:
            ids = to_engine_ids(args.to, res.resid, args.num_layers, arch=args.arch, engine_version=args.engine_version)
            out["to"] = {"engine": args.to, "ids": ids, "error": None}
        except Eagle3LabError as err:
            out["to"] = {"engine": args.to, "ids": None, "error": str(err)}
    if args.json:
        print(json.dumps(out, indent=2))
        return 1 if res.fatal else 0
    written = "default (no ids)" if res.ids_as_written is None else list(res.ids_as_written)
    print(f"{res.engine} ids {written} with N = {res.num_layers}"
          + (f", arch {res.arch}" if res.arch else "") + (f", version {res.engine_version}" if res.engine_version else "")
          + (f", platform {res.engine_platform}" if res.engine_platform else "")
          + (f", read by the {res.runner} model runner" if res.runner else ""))
    print("  fc input: " + resid_label(res.resid, res.num_layers))
    print(f"  rule: {res.rule}")
    for n in res.notes:
        print(f"  {'BREAKS' if n.kind == 'breaks' else 'warning'} ({n.kind}" + (f", {n.code}" if n.code else "")
              + ("" if n.confirmed else ", not confirmed") + f"): {n.text}")
    if args.to:
        to = out["to"]
        print(f"  in {to['engine']}: " + (f"write {to['ids']}" if to["ids"] is not None else f"cannot: {to['error']}"))
    return 1 if res.fatal else 0
