"""From the caching method's levels to a verdict with its margin, or "inconclusive".

Each level's steps/s becomes a time per step; the time a stage adds is the difference between
the level that runs it and the level before (a level that could not be measured merges its stage
into the next). The verdict is the stage that adds the most, when

- the pipeline starves: nothing cached runs under `threshold` of the ceiling, beyond noise;
- that stage adds more than every other beyond noise (their intervals do not overlap) and at
  least `dominance` times as much.

Otherwise it is "model-bound" (the input keeps up) or "inconclusive" (levels within noise of each
other), each saying why. Each level only adds work to the one before, so a level measured faster
than an earlier one beyond noise shows noise the intervals miss (a burst of load on one level's
repeats): every comparison is then widened by that much time per step (`disorder`), and a verdict
stands only if it holds beyond it.

The ceiling is level 1 unless a later level ran faster: the step alone cannot be slower than the
step with more work in front of it, so the fastest level is then the ceiling (`ceiling_of`) and no
share of it is above 100%. Level 1 measured slow that way is the step run back to back on cores
busy with other work, where torch's intra-op threads stall each other at every parallel op (with
torch's default threads on a loaded 2-core box: 19 steps/s alone against 157 behind a loader).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fastprep.monitoring._advice import COLLATE, COPY, GENERAL, RAW, TRANSFORMS
from fastprep.monitoring._advice import STAGES as STAGE_WORDS
from fastprep.tools.measuring._measure import Stats

LEVELS = ("device-cached batch", "host-cached batch", "cached processed sample",
          "cached raw sample", "nothing cached")
# The stage that the drop from level i-1 to level i is blamed on.
STAGES = {1: COPY, 2: COLLATE, 3: TRANSFORMS, 4: RAW}
WHAT = {stage: s.what for stage, s in STAGE_WORDS.items()}  # each stage in words, for the verdict's line
ADVICE = GENERAL  # each verdict's advice where the pipeline tells no more (fastprep.monitoring._advice)


@dataclass
class Level:
    """One level: `stats` (None when not measured, `note` says why); `absent` when its stage does
    not exist here (no host->device copy on the CPU), rather than merged into the next."""
    name: str
    stats: Stats | None
    note: str = ""
    absent: bool = False

    @property
    def steps_per_s(self) -> float | None:
        return self.stats.rate if self.stats else None


@dataclass
class Stage:
    name: str
    added: float  # seconds per step the stage adds, and its interval
    lo: float
    hi: float


CEILING_NOTE = ("measured slower than level {k}, which runs the same step with more work: noise (torch's "
                "intra-op threads stalled on busy cores?); the ceiling is level {k}'s rate")


def ceiling_of(levels: list[Level]) -> tuple[int, Stats]:
    """(level number, Stats) of the ceiling: level 1, or a later level that ran faster (see the
    module doc), so that every level's share of it is at most 100%."""
    k, best = 1, levels[0].stats
    for i, lv in enumerate(levels[1:], 2):
        if lv.stats is not None and lv.stats.rate > best.rate:
            k, best = i, lv.stats
    return k, best


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def stages_of(levels: list[Level]) -> list[Stage]:
    """The time each stage adds between consecutive measured levels."""
    out, span = [], []
    prev = levels[0].stats
    for i, lv in enumerate(levels[1:], 1):
        if lv.absent:
            continue
        span.append(STAGES[i])
        if lv.stats is None:
            continue  # the next measured level's drop spans this stage too
        s = lv.stats
        out.append(Stage(" + ".join(span), 1 / s.rate - 1 / prev.rate, 1 / s.hi - 1 / prev.lo, 1 / s.lo - 1 / prev.hi))
        prev, span = s, []
    return out


@dataclass
class Finding:
    """What the levels say: the verdict, its margin, whose advice applies, and `more`: how many
    times the data measured so far it needs to settle (1.0: settled, narrower intervals would not
    change it; inf: two estimates exactly equal, no length would)."""
    verdict: str
    margin: str
    advice: tuple[str, ...]
    more: float = 1.0


def assess(levels: list[Level], threshold: float = 0.8, dominance: float = 1.5) -> Finding:
    """The rules of the module doc on measured levels, the widening by out-of-order levels
    included (see disorder)."""
    last = levels[-1].stats
    ceiling = ceiling_of(levels)[1]
    bias, odd = disorder(levels)
    widened = f"{odd}: noise the intervals miss, so each was widened by {_ms(bias)}" if bias else ""
    ratio = last.rate / ceiling.rate
    # Model-bound only if it holds with the ceiling's time less the disorder: a ceiling measured too
    # slow (a burst of load on its rounds) must not make the input look as if it kept up.
    if ratio >= threshold and threshold / last.rate <= 1 / ceiling.rate - bias:
        return Finding("model-bound", f"nothing cached runs at {ratio:.0%} of the ceiling "
                       f"(the input keeps up from {threshold:.0%})", ("model-bound",))
    gap = 1 / last.rate - 1 / ceiling.rate
    spread = 1 / last.lo - 1 / last.hi + 1 / ceiling.lo - 1 / ceiling.hi
    if gap - bias <= spread / 2:
        return Finding("inconclusive", f"nothing cached runs at {ratio:.0%} of the ceiling, but the two overlap "
                       f"within noise ({last.lo:.3g}-{last.hi:.3g} vs {ceiling.lo:.3g}-{ceiling.hi:.3g} steps/s"
                       f"{'; ' + widened if widened else ''})", ("noise",), _shrink(spread, gap, bias))
    ranked = sorted(stages_of(levels), key=lambda s: -s.added)
    best = ranked[0]
    second = ranked[1] if len(ranked) > 1 else None
    added = sum(max(s.added, 0.0) for s in ranked)  # stages measured faster than the level before add 0
    share = f"{best.name} adds {_ms(best.added)} per step ({_ms(max(best.lo, 0))}-{_ms(best.hi)}), " \
            f"{best.added / added:.0%} of what the stages add (nothing cached runs at {ratio:.0%} of the " \
            f"ceiling, {_ms(gap)} more per step)"
    tail = f"; {widened}" if widened else ""
    if second is None:
        return Finding(best.name, share + tail, (best.name,))
    apart = best.lo - bias > second.hi + bias
    if apart and best.added >= dominance * max(second.added, 0.0):
        return Finding(best.name, f"{share}; next: {second.name} {_ms(second.added)} (95% intervals apart, "
                                  f"{dominance:g}x or more){tail}", (best.name,))
    why = f"less than {dominance:g}x apart" if apart else "within noise of each other"
    if best.hi + bias < dominance * max(second.lo - bias, 0.0):
        more = 1.0  # even the intervals' most favourable ends are less than `dominance` apart: settled
        why = f"less than {dominance:g}x apart{'' if apart else ' (and within noise of each other)'}"
    elif not apart:
        more = _shrink(best.hi - best.lo + second.hi - second.lo, best.added - second.added, 2 * bias)
    else:  # apart, the ratio below `dominance` but its interval reaching it
        more = _shrink(best.hi - best.lo + dominance * (second.hi - second.lo),
                       abs(dominance * second.added - best.added))
    return Finding("inconclusive",
                   f"{best.name} ({_ms(best.added)} per step) and {second.name} ({_ms(second.added)}) are {why}; "
                   f"nothing cached runs at {ratio:.0%} of the ceiling{tail}", (best.name, second.name), more)


def judge(levels: list[Level], threshold: float = 0.8, dominance: float = 1.5,
          advice: dict[str, str] | None = None) -> tuple[str, str, str]:
    """(verdict, margin, advice) for measured levels; see the module doc. `advice` is ADVICE made
    for the pipeline (fastprep.tools.diagnose._raw_loading.advice_table), default ADVICE itself."""
    table = ADVICE if advice is None else advice
    found = assess(levels, threshold, dominance)
    text = " ".join(_advice(stage, table) for stage in found.advice)
    if len(found.advice) > 1:
        text = "Both may need work. " + text
    if found.more > 1 and "noise" not in found.advice:  # more data would settle it: say how to get it
        text += " " + table["noise"]
    return found.verdict, found.margin, text


def more_data(levels: list[Level], threshold: float = 0.8, dominance: float = 1.5) -> float:
    """How many times the data measured so far the verdict needs to settle (Finding.more)."""
    return assess(levels, threshold, dominance).more


def disorder(levels: list[Level]) -> tuple[float, str]:
    """The most time per step by which a level measured faster than a level before it, beyond
    noise, and which levels: each level only adds work, so this is noise the intervals miss (a
    burst of load on one level's repeats, a cache one level enjoys) and every interval the
    verdict compares is widened by it. (0.0, "") when the levels are in order."""
    measured = [(k, lv) for k, lv in enumerate(levels, 1) if lv.stats]
    worst, text = 0.0, ""
    for n, (i, early) in enumerate(measured):
        for j, later in measured[n + 1:]:
            gap = 1 / early.stats.rate - 1 / later.stats.rate
            if later.stats.lo > early.stats.hi and gap > worst:
                share = early.stats.rate / later.stats.rate  # under 100%: the earlier level's of the later's
                what = "the ceiling (level 1)" if i == 1 else f"level {i} ({early.name})"
                worst, text = gap, f"{what} measured only {share:.0%} of level {j} ({later.name})"
    return worst, text


def _shrink(widths: float, gap: float, bias: float = 0.0) -> float:
    """The data two intervals (`widths`: their full widths summed) need to be `gap` apart beyond
    `bias`, as they narrow with 1/sqrt(data): 2.0 when the gap is within the bias (measure
    again: more rounds average out what caused it), inf when there is no gap."""
    if bias > 0 and gap <= bias:
        return 2.0
    if gap <= 0:
        return math.inf
    return max(1.0, (widths / 2 / (gap - bias)) ** 2)


def _advice(stage: str, table: dict[str, str]) -> str:
    return " ".join(table[s] for s in stage.split(" + "))


@dataclass
class BottleneckReport:
    levels: list[Level]
    verdict: str
    margin: str
    advice: str
    device: str = "cpu"
    settings: dict[str, Any] = field(default_factory=dict)
    raw_loading: str = ""  # what raw loading is in this pipeline (tools.diagnose.raw_loading.RawSource.describe)
    pipeline: str = ""  # its steps, source and loader (fastprep.monitoring._pipeline.PipelineFacts.describe)

    @property
    def drops(self) -> dict[str, float]:
        """Each stage's level as a fraction of the measured level before it."""
        out, prev, span = {}, self.levels[0].stats, []
        for i, lv in enumerate(self.levels[1:], 1):
            if lv.absent:
                continue
            span.append(STAGES[i])
            if lv.stats:
                out[" + ".join(span)] = lv.stats.rate / prev.rate
                prev, span = lv.stats, []
        return out

    def table(self) -> str:
        top, best = ceiling_of(self.levels)
        ceiling = best.rate
        n = max(len(lv.stats.rates) for lv in self.levels if lv.stats)
        rows = [f"{'level':<28}{'steps/s':>9}  {f'repeats ({n}) min-max':<22}{'+-95%':>6}"
                f"{'of ceiling':>11}{'ms/step':>9}  note"]
        for i, lv in enumerate(self.levels, 1):
            s = lv.stats
            if s is None:
                rows.append(f"{i}. {lv.name:<25}{'n/a':>9}  {'':<22}{'':>6}{'':>11}{'':>9}  {lv.note}")
                continue
            spread = f"{min(s.rates):.4g}-{max(s.rates):.4g}"
            note = lv.note or ("" if s.steady else "warm-up did not settle")
            if i == 1 and top != 1:
                note = "; ".join(filter(None, [note, CEILING_NOTE.format(k=top)]))
            rows.append(f"{i}. {lv.name:<25}{s.rate:>9.4g}  {spread:<22}{s.ci:>6.0%}{s.rate / ceiling:>11.0%}"
                        f"{1e3 / s.rate:>9.3g}  {note}")
        head = f"verdict: {self.verdict}"
        if self.verdict in WHAT:
            head += f" ({WHAT[self.verdict]})"
        rows.append(f"{head}: {self.margin}")
        if self.pipeline:
            rows += self.pipeline.splitlines()
        if self.raw_loading:
            rows.append(f"raw loading here: {self.raw_loading}")
        rows.append(f"next: {self.advice}")
        return "\n".join(rows)

    def as_dict(self) -> dict[str, Any]:
        return {"device": self.device, "settings": self.settings, "verdict": self.verdict,
                "margin": self.margin, "advice": self.advice, "raw_loading": self.raw_loading,
                "pipeline": self.pipeline, "drops": self.drops,
                "levels": [{"name": lv.name, "note": lv.note, "measured": lv.stats is not None,
                            **(lv.stats.as_dict() if lv.stats else {"steps_per_s": None})}
                           for lv in self.levels]}


def side_by_side(reports: dict[str, BottleneckReport]) -> str:
    """Several reports' levels in columns (the demo: usual vs fastprep), then each verdict."""
    names = list(reports)
    rows = [f"{'level':<28}" + "".join(f"{name:>14} steps/s {'of ceiling':>11}" for name in names)]
    for i, level in enumerate(LEVELS):
        cells = ""
        for name in names:
            lv, ceiling = reports[name].levels[i], ceiling_of(reports[name].levels)[1]
            if lv.stats is None:
                cells += f"{'n/a':>22}{'':>12}"
            else:
                cells += f"{lv.stats.rate:>22.4g}{lv.stats.rate / ceiling.rate:>12.0%}"
        rows.append(f"{i + 1}. {level:<25}{cells}")
    for name in names:
        r = reports[name]
        what = f" ({WHAT[r.verdict]})" if r.verdict in WHAT else ""
        rows.append(f"{name}: verdict {r.verdict}{what}: {r.margin}")
    for name in names:
        for line in reports[name].pipeline.splitlines():
            rows.append(f"{name}: {line}")
        if reports[name].raw_loading:
            rows.append(f"{name}: raw loading here: {reports[name].raw_loading}")
        rows.append(f"{name}: next: {reports[name].advice}")
    return "\n".join(rows)
