"""SGLang's overlap scheduler with EAGLE/EAGLE3/STANDALONE, era by era.

Four changes open five eras, numbered by how many of the changes a build has:

    0  before spec V2                   always off
    1  spec V2 opt-in         (#11398)  on only when opted in (forced for EAGLE only up to 0.5.6.post2,
                                       EAGLE/EAGLE3 in 0.5.7, all three from 0.5.8)
    2  spec V2 by default     (#21062)  on unless SGLANG_ENABLE_SPEC_V2=0, --disable-overlap-schedule or topk > 1
    3  spec V1 retired        (#25464)  on unless --disable-overlap-schedule (SGLANG_ENABLE_SPEC_V2=0 its alias)
    4  env var removed        (#27964)  on unless --disable-overlap-schedule or --device cpu

Read in sgl-project/sglang: ``python/sglang/srt/server_args.py`` ``_handle_speculative_decoding``
(2025) and ``arg_groups/speculative_hook.py`` ``_handle_eagle_family`` (2026). A build that
``engine_version`` cannot place among the changes (``versions.place_in_order``) gets the newest
era it may be in, one ``ENGINE_VERSION_UNPLACED`` per change it cannot be placed by, and the on/off
of every older era it may be in where that differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3lab.engines.flags.cmdline import env_bool
from eagle3lab.engines.flags.common import Inputs
from eagle3lab.engines.flags.result import flag_finding
from eagle3lab.engines.versions import Change, place_in_order
from eagle3lab.findings import Finding

RULE = "python/sglang/srt/server_args.py (2025) / arg_groups/speculative_hook.py (2026)"

CHANGES = {
    # "Beta spec-overlap for EAGLE", opened 2025-10-09. Merged, but no merge day was found (nor the 0.5.4
    # release day, the reviewer's proposed bound), so only bounds: PR #12113 (opened 2025-10-25) removes from
    # main's server_args.py the --enable-beta-spec flag this path read and adds SGLANG_ENABLE_SPEC_V2 in
    # its place, so #11398 was on main by 2025-10-25. Builds dated in between are not placed.
    "spec-v2-opt-in": Change("sglang", "spec V2 opt-in: the overlap scheduler runs with EAGLE/EAGLE3 only when "
                             "opted in; before it, always off", 11398, None, "0.5.3", "0.5.4",
                             opened="2025-10-09", on_main_by="2025-10-25"),
    # "Use spec v2 by default": 79dbfe4505 on main 2026-04-29. v0.5.10.post1 (2026-04-09) predates it; the
    # v0.5.11 release notes (2026-05-05) list Speculative Decoding V2 as enabled by default.
    "spec-v2-default": Change("sglang", "spec V2 by default: overlap on unless SGLANG_ENABLE_SPEC_V2=0, "
                              "--disable-overlap-schedule or topk > 1 select spec V1", 21062, "2026-04-29",
                              "0.5.10.post1", "0.5.11"),
    # "[Spec] Deprecate Spec V1": opened 2026-05-16, 28c1a3cb45 on main 2026-06-08. v0.5.12.post1 (2026-05-26)
    # predates it; the v0.5.13 notes (2026-06-13) say Spec V1 is deprecated, EAGLE/MTP on the V2 worker.
    "spec-v1-retired": Change("sglang", "spec V1 retired: the V2 worker always; overlap on unless "
                              "--disable-overlap-schedule (SGLANG_ENABLE_SPEC_V2=0 is its alias)", 25464,
                              "2026-06-08", "0.5.12.post1", "0.5.13"),
    # "[Spec] Retire Spec V1": c0480a88be on main 2026-06-11 drops the env var (a set one only logs a removal
    # warning). Read in the wheels: 0.5.13's speculative_hook.py still reads the variable (era 3), 0.5.14's
    # only warns that it was removed.
    "spec-v2-env-removed": Change("sglang", "SGLANG_ENABLE_SPEC_V2 removed: ignored, with one warning", 27964,
                                  "2026-06-11", "0.5.13", "0.5.14"),
    # Within the opt-in era, read in the wheels' server_args.py: 0.5.5 .. 0.5.6.post2 force the overlap
    # scheduler on for EAGLE only (as 0.5.4 did with --enable-beta-spec): for EAGLE3/STANDALONE the variable
    # only skips the forced switch-off, so --disable-overlap-schedule stays in force. 0.5.7 forces it for
    # EAGLE/EAGLE3 and adds the topk > 1 ValueError (STANDALONE takes the switch-off); 0.5.8 adds STANDALONE.
    # No PR traced: bounded by releases, and on main by the day the first release with it was built
    # (0.5.7: 2026-01-01, 0.5.8: 2026-01-23; SGLang tags its releases on main).
    "opt-in-eagle3": Change("sglang", "SGLANG_ENABLE_SPEC_V2=1 forces the overlap scheduler on for EAGLE3 too, and "
                            "stops at start-up for topk > 1", None, None, "0.5.6.post2", "0.5.7",
                            on_main_by="2026-01-01"),
    "opt-in-standalone": Change("sglang", "SGLANG_ENABLE_SPEC_V2=1 forces the overlap scheduler on for STANDALONE "
                                "too", None, None, "0.5.7", "0.5.8", on_main_by="2026-01-23"),
    # The removal notice ("Drop this check after one release") is in 0.5.14 .. 0.5.20 and gone in 0.5.21
    # (built 2026-10-01): from then on the variable is ignored without a word.
    "spec-v2-notice-dropped": Change("sglang", "the SGLANG_ENABLE_SPEC_V2 removal notice dropped: the variable is "
                                     "ignored silently", None, None, "0.5.20", "0.5.21", on_main_by="2026-10-01"),
}
# The eras, in the order their changes landed: a build with one has every earlier one.
OVERLAP_CHANGES = ("spec-v2-opt-in", "spec-v2-default", "spec-v1-retired", "spec-v2-env-removed")
OVERLAP_ERAS = ("before spec V2", "spec V2 opt-in", "spec V2 by default", "spec V1 retired",
                "SGLANG_ENABLE_SPEC_V2 removed")  # era k: the build has the first k changes

# The opt-in: PR #12113 (2025-10-25) replaced the --enable-beta-spec flag of the first opt-in builds by the env var.
OPT_IN = "SGLANG_ENABLE_SPEC_V2=1"
BETA_FLAG = "builds before PR #12113, late Oct 2025, read --enable-beta-spec instead"

# What SGLang logs about it, as read (and, for SGLANG_NEWEST_READ, run) in arg_groups/speculative_hook.py; era 4 only.
NON_OVERLAP_LOG = "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding."
CPU_LOG = "Overlap schedule is not implemented for speculative decoding on CPU."
ENV_REMOVED_LOG = ("SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker. Use "
                   "--disable-overlap-schedule to select the non-overlap (synchronous) path.")
FORCED_ALL = ("EAGLE", "EAGLE3", "STANDALONE")


def overlap_era(engine_version) -> tuple[int, int]:
    """``(era, sure)`` for this build (``versions.place_in_order``): the newest era it may be in, the oldest."""
    return place_in_order([CHANGES[k] for k in OVERLAP_CHANGES], engine_version)


def overlap_era_text(era: int) -> str:
    """The era in words, with the PRs (and merge dates) that bound it."""
    def pr(key):
        c = CHANGES[key]
        return f"PR #{c.pr}" + (f" merged {c.merged}" if c.merged else "")
    bounds = ([f"from {pr(OVERLAP_CHANGES[era - 1])}"] if era > 0 else []) + \
             ([f"until {pr(OVERLAP_CHANGES[era])}"] if era < len(OVERLAP_CHANGES) else [])
    return f"SGLang '{OVERLAP_ERAS[era]}' era ({', '.join(bounds)})"


def overlap_rule(era: int, disabled: bool, topk, spec_v2: bool | None, cpu: bool, algo: str = "EAGLE3",
                 forced=FORCED_ALL) -> tuple[bool, str]:
    """Overlap scheduler on/off with EAGLE/EAGLE3/STANDALONE in one era, and why.

    ``topk`` is the flag as given: SGLang decides before it auto-chooses (steps, topk, draft tokens).
    ``forced``: the algorithms the opt-in forces on in this build (era 1: ``opt_in_forced``).
    """
    if era == 0:
        return False, "EAGLE/EAGLE3 always set disable_overlap_schedule = True"
    if era == 1 and not spec_v2:
        return False, f"it runs only with {OPT_IN} ({BETA_FLAG})"
    if era == 1 and algo not in forced:
        if "EAGLE3" in forced:  # from opt-in-eagle3: EAGLE/EAGLE3 forced on, everything else takes the else branch
            return False, f"{OPT_IN} forces it on for EAGLE/EAGLE3 only; {algo} takes the forced switch-off"
        return (not disabled), (f"{OPT_IN} forces it on for EAGLE only (NEXTN runs as EAGLE); for {algo} it only "
                                "skips the forced switch-off, so " +
                                ("--disable-overlap-schedule stays in force" if disabled else
                                 "the default (on) stays") + f" ({BETA_FLAG})")
    if era >= 2 and disabled:
        return False, "--disable-overlap-schedule " + ("selects spec V1" if era == 2 else
                                                       "runs the V2 worker synchronously")
    if era == 2 and topk is not None and topk > 1:
        return False, f"topk {topk} > 1 falls back to spec V1 ('spec v2 currently only supports topk = 1')"
    if era in (2, 3) and spec_v2 is False:
        return False, "SGLANG_ENABLE_SPEC_V2=0 " + ("selects spec V1" if era == 2 else
                                                    "(still an alias of --disable-overlap-schedule)")
    if era == 4 and cpu:
        return False, "--device cpu: not implemented for speculative decoding on CPU"
    if era == 1:
        why = f"{OPT_IN} turns it on" + (" and overrides --disable-overlap-schedule" if disabled else "") + \
              f" ({BETA_FLAG})"
    else:
        why = "on by default" + (", the V2 worker always" if era >= 3 else "")
    if cpu:  # the CPU switch-off was read in the newest code only
        why += "; --device cpu: the newest code read turns it off on CPU, a rule not read for this era"
    return True, why


def _overlap_log(era: int, on: bool) -> str:
    """What SGLang logs about it (eras whose source was read with the message)."""
    if era == 2:
        return ("'Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.'" if on else
                "'Spec v1 is used for eagle/eagle3/standalone speculative decoding because ...'")
    if era >= 3 and not on:
        return "'Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.'"
    return ""


def opt_in_forced(inp: Inputs, algo: str) -> tuple[str, ...]:
    """The algorithms SGLANG_ENABLE_SPEC_V2=1 forces on in this build's opt-in era (placed only for EAGLE3/STANDALONE)."""
    forced = ["EAGLE"]
    for key, name in (("opt-in-eagle3", "EAGLE3"), ("opt-in-standalone", "STANDALONE")):
        if algo in forced or inp.place(CHANGES[key]) == "before":
            break
        forced.append(name)
    return tuple(forced)


# The opt-in era's findings, templates filled from the Changes that bound them (eagle3: CHANGES["opt-in-eagle3"],
# standalone: CHANGES["opt-in-standalone"]), so no release number is typed beside the row that holds it.
OVERRIDDEN_TEXT = ("--disable-overlap-schedule is overridden: with SGLANG_ENABLE_SPEC_V2=1 SGLang sets "
                   "disable_overlap_schedule = False for {algo} in this build (EAGLE only up to {eagle3.last_without}, "
                   "EAGLE/EAGLE3 from {eagle3.first_with}, STANDALONE too from {standalone.first_with}), so the overlap "
                   "scheduler runs.")
TOPK_STOPS_TEXT = ("SGLang stops at start-up with ValueError 'Spec v2 currently only supports topk = 1 for speculative "
                   "decoding.' (from {eagle3.first_with}; earlier builds started and then failed on a tensor shape, "
                   "issue #14077).")
TOPK_FAILS_TEXT = "this build (before {eagle3.first_with}) starts, then fails on a tensor shape (issue #14077)."
_OPT_IN_ROWS = ("opt-in-eagle3", "opt-in-standalone")
# the function SGL_OVERLAP_SCHEDULE cites, by era (others: _handle_eagle_family)
_READ_IN = {0: "_handle_speculative_decoding",
            1: "_handle_speculative_decoding (opt-in: --enable-beta-spec, then SGLANG_ENABLE_SPEC_V2 from PR #12113)",
            4: "_handle_eagle_family; CPU: _disable_overlap_schedule_for_cpu (newest code read)"}


@dataclass(frozen=True)
class OverlapLaunch:
    """What the overlap rule reads from one command, and the eras its build may be in (``sure`` .. ``era``)."""

    algo: str
    era: int
    sure: int
    disabled: bool          # --disable-overlap-schedule
    topk: object            # --speculative-eagle-topk as given
    raw_env: str | None     # SGLANG_ENABLE_SPEC_V2 as written
    spec_v2: bool | None    # ... as SGLang reads it (None: unset or not a boolean)
    cpu: bool               # --device cpu
    forced: tuple[str, ...]  # what the opt-in forces on in this build (opt_in_forced)

    def rule(self, era: int | None = None) -> tuple[bool, str]:
        """``overlap_rule`` in ``era`` (default: the newest the build may be in, which is shown)."""
        return overlap_rule(self.era if era is None else era, self.disabled, self.topk, self.spec_v2, self.cpu,
                            self.algo, self.forced)

    @property
    def opted_in(self) -> bool:
        """SGLANG_ENABLE_SPEC_V2=1 and the build may be in the opt-in era."""
        return self.sure <= 1 <= self.era and bool(self.spec_v2)

    @property
    def versions(self) -> str:
        return "; ".join(f"{k}: {CHANGES[k].span()}" for k in OVERLAP_CHANGES)


def overlap_findings(inp: Inputs, algo: str, eff: dict) -> list[Finding]:
    """SGL_OVERLAP_SCHEDULE and the era-specific findings; sets ``eff['overlap_schedule']``."""
    v, env = inp.parsed.values, inp.parsed.env
    era, sure = overlap_era(inp.engine_version)
    for key in OVERLAP_CHANGES[sure:era]:
        inp.place(CHANGES[key])  # records its ENGINE_VERSION_UNPLACED warning
    spec_v2 = env_bool(env, "SGLANG_ENABLE_SPEC_V2")
    launch = OverlapLaunch(algo, era, sure, bool(v.get("--disable-overlap-schedule")), v.get("--speculative-eagle-topk"),
                    env.get("SGLANG_ENABLE_SPEC_V2"), spec_v2, str(v.get("--device", "cuda")).strip().lower() == "cpu",
                    opt_in_forced(inp, algo) if (sure <= 1 <= era and spec_v2) else FORCED_ALL)
    eff["overlap_schedule"] = launch.rule()[0]
    out = [_schedule_finding(launch), *(_opt_in_findings(launch) if launch.opted_in else ())]
    if era == 4 and launch.raw_env is not None:
        out.append(_env_ignored_finding(inp, launch))
    return out


def _schedule_finding(launch: OverlapLaunch) -> Finding:
    """SGL_OVERLAP_SCHEDULE: on or off in the era shown, why, what SGLang logs, and the older eras that differ."""
    era, on, why = launch.era, *launch.rule()
    log = _overlap_log(era, on)
    msg = f"Overlap scheduler {'on' if on else 'off'} with {launch.algo}: {why}." + \
        (f" SGLang logs {log}" if log else "")
    if launch.raw_env is not None and launch.spec_v2 is None and 1 <= era <= 3:
        msg += (f" SGLANG_ENABLE_SPEC_V2={launch.raw_env} is not a boolean SGLang reads: it warns and uses its "
                f"default ({'on' if era >= 2 else 'off'}).")
    msg += _older_eras(launch, on)
    logs = (((CPU_LOG,) if launch.cpu and not launch.disabled else ()) + ((NON_OVERLAP_LOG,) if not on else ())
            if era == 4 else ())
    return flag_finding("SGL_OVERLAP_SCHEDULE", "info", msg,
                        f"{overlap_era_text(era)}: {RULE} {_READ_IN.get(era, '_handle_eagle_family')}",
                        launch.versions, setting="overlap_schedule", engine_logs=logs)


def _older_eras(launch: OverlapLaunch, on: bool) -> str:
    """For a build not placed (the newest era it may be in is shown): every older era where the answer differs."""
    era, sure = launch.era, launch.sure
    if sure == era:
        return ""
    older = []
    for e in range(era - 1, sure - 1, -1):
        old_on, old_why = launch.rule(e)
        if old_on != on:
            older.append(f"in the '{OVERLAP_ERAS[e]}' era (before PR #{CHANGES[OVERLAP_CHANGES[e]].pr}) "
                         f"{'on' if old_on else 'off'}, {old_why}")
    prs = ", ".join(f"#{CHANGES[k].pr}" for k in OVERLAP_CHANGES[sure:era])
    if older:
        return f" The build cannot be placed by PR {prs}; if it is older: " + "; ".join(older) + "."
    return (f" The build cannot be placed by PR {prs}, but every era it may be in "
            f"('{OVERLAP_ERAS[sure]}' .. '{OVERLAP_ERAS[era]}') gives the same.")


def _opt_in_findings(launch: OverlapLaunch) -> list[Finding]:
    """The opt-in era's findings: as they are when that era is shown, as warnings when the build only may be in it."""
    maybe = "" if launch.era == 1 else (f"If the build predates PR #{CHANGES[OVERLAP_CHANGES[1]].pr} (the "
                                        f"'{OVERLAP_ERAS[1]}' era, which it may be in): ")
    rule = f"{overlap_era_text(1)}: {RULE} spec V2 branch"
    versions = f"{launch.versions}; " + "; ".join(f"{k}: {CHANGES[k].span()}" for k in _OPT_IN_ROWS)
    rows = {"eagle3": CHANGES["opt-in-eagle3"], "standalone": CHANGES["opt-in-standalone"]}
    out = []
    if launch.disabled and launch.algo in launch.forced:
        out.append(flag_finding("SGL_OVERLAP_FLAG_OVERRIDDEN", "warning",
                                maybe + OVERRIDDEN_TEXT.format(algo=launch.algo, **rows), rule, versions,
                                "Drop SGLANG_ENABLE_SPEC_V2=1 to run without the overlap scheduler.",
                                "overlap_schedule"))
    topk = launch.topk
    if topk is not None and topk > 1 and launch.rule(1)[0]:
        # the ValueError came with opt-in-eagle3, for what the opt-in forces on
        checked = launch.algo in launch.forced and "EAGLE3" in launch.forced
        stops = launch.era == 1 and checked
        out.append(flag_finding("SGL_SPEC_V2_TOPK", "error" if stops else "warning",
                                maybe + f"SGLANG_ENABLE_SPEC_V2=1 with --speculative-eagle-topk {topk}: " +
                                (TOPK_STOPS_TEXT if checked else TOPK_FAILS_TEXT).format(**rows), rule, versions,
                                "Use --speculative-eagle-topk 1 (a chain), or drop SGLANG_ENABLE_SPEC_V2=1 for a tree.",
                                "topk", engine_error="ValueError" if stops else None))
    return out


def _env_ignored_finding(inp: Inputs, launch: OverlapLaunch) -> Finding:
    """SGL_SPEC_V2_ENV_IGNORED: the variable set in a build that removed it (era 4)."""
    meant_off, on = launch.spec_v2 is False, launch.rule()[0]
    dropped = CHANGES["spec-v2-notice-dropped"]
    notice = inp.place(dropped) == "before"
    said = (f"SGLang only logs '{ENV_REMOVED_LOG}'" if notice else "SGLang says nothing about it (the removal "
            f"notice was dropped after {dropped.last_without})")
    return flag_finding("SGL_SPEC_V2_ENV_IGNORED", "warning" if meant_off else "info",
                        f"SGLANG_ENABLE_SPEC_V2={launch.raw_env} is ignored: PR #{CHANGES[OVERLAP_CHANGES[3]].pr} "
                        f"removed it and {said}." + (" The overlap scheduler stays on." if meant_off and on else ""),
                        f"{overlap_era_text(launch.era)}: {RULE} handle_speculative_decoding" +
                        (" (removal notice)" if notice else ""),
                        f"{launch.versions}; spec-v2-notice-dropped: {dropped.span()}",
                        "Use --disable-overlap-schedule for the synchronous path." if meant_off else
                        "Drop SGLANG_ENABLE_SPEC_V2; it has no effect.", "overlap_schedule",
                        engine_logs=(ENV_REMOVED_LOG,) if notice else ())
