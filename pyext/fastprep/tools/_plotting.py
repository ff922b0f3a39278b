"""Figures for `bench --plot` and `diagnose --plot` (matplotlib is an optional extra)."""

from __future__ import annotations

from typing import Any

from fastprep.tools.diagnose._verdict import ceiling_of


def _pyplot():
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as exc:
        raise SystemExit(f"--plot needs matplotlib: pip install 'fastprep[plot]' ({exc})") from exc
    return plt


def plot_bench(result: dict, path: str) -> None:
    """Delivered samples/s per workers (w=) or threads (t=), one panel per source kind, with the
    fused kernel's 1-thread rate times N as the ideal line."""
    plt = _pyplot()
    sources = list(dict.fromkeys(r["source"] for r in result["rows"]))
    fig, axes = plt.subplots(1, len(sources), figsize=(6.5 * len(sources), 4.5), squeeze=False, sharey=True)
    kernel = result["kernel"]["samples_per_s"]
    most = max(r["cores"] for r in result["rows"])
    for ax, source in zip(axes[0], sources):
        for name in dict.fromkeys(r["name"] for r in result["rows"]):
            rows = [r for r in result["rows"] if r["name"] == name and r["source"] == source]
            xs = [r.get("w", r.get("t")) for r in rows]
            ax.plot(xs, [r["samples_per_s"] for r in rows], marker="o", label=name)
        ideal = list(range(0, most + 1))
        ax.plot(ideal, [kernel * max(n, 1) for n in ideal], color="k", ls=":", lw=1,
                label="fused kernel's 1-thread rate x N")
        ax.axhline(result["gpu_rate"], color="k", ls="--", lw=1, label=f"GPU consumes {result['gpu_rate']:.0f}/s")
        ax.set_yscale("log")
        ax.set_xlabel("num_workers (DataLoader, w=0: main process) or threads")
        ax.set_xticks(ideal)
        ax.set_title(f"{'PIL' if source == 'pil' else source} sources (synthetic)")
    axes[0][0].set_ylabel("samples/s delivered into the consumer")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(f"crop {result['workload']['crop']} + dilated mask + YCbCr, batch {result['workload']['batch_size']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_report(report: Any, path: str) -> None:
    """The caching method's levels as bars (median steps/s) with the repeats' min-max as error bars,
    one panel per report when `report` is a dict of them (the demo: usual vs fastprep)."""
    plt = _pyplot()
    reports = report if isinstance(report, dict) else {"": report}
    fig, axes = plt.subplots(1, len(reports), figsize=(7 * len(reports), 4.2), squeeze=False)
    for ax, (title, rep) in zip(axes[0], reports.items()):
        top, best = ceiling_of(rep.levels)  # the verdict's ceiling: level 1, or a level that ran faster
        names = [f"{i}. {lv.name}" for i, lv in enumerate(rep.levels, 1)][::-1]
        levels = rep.levels[::-1]
        rates = [lv.stats.rate if lv.stats else 0.0 for lv in levels]
        low = [lv.stats.rate - lv.stats.lo if lv.stats else 0.0 for lv in levels]
        high = [lv.stats.hi - lv.stats.rate if lv.stats else 0.0 for lv in levels]
        above = [lv.stats is not None and lv.stats.lo > rep.levels[0].stats.hi for lv in levels]  # faster than 1
        colors = ["#bbb" if r == 0 else "#c44e52" if a else "#4c72b0" for r, a in zip(rates, above)]
        ax.barh(names, rates, xerr=[low, high], color=colors, capsize=3)
        ax.axvline(best.rate, color="k", ls=":", lw=1, label=f"ceiling (level {top})")
        for y, lv in enumerate(levels):
            if lv.stats is None:
                ax.text(0, y, f"  n/a: {lv.note}"[:70], va="center", fontsize=7)
        ax.set_xlabel("steps/s: median of repeats, whiskers: noise")
        head = f"{title}: " if title else ""
        ax.set_title(f"{head}verdict: {rep.verdict}", fontsize=10)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
