"""Figures for `bench --plot` and `diagnose --plot` (matplotlib is an optional extra)."""

from __future__ import annotations

from typing import Any


def _pyplot():
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as exc:
        raise SystemExit(f"--plot needs matplotlib: pip install 'fastprep[bench]' ({exc})") from exc
    return plt


def plot_bench(result: dict, path: str) -> None:
    plt = _pyplot()
    ws = list(result["variants"][0]["loader"])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(result["variants"])
    for k, v in enumerate(result["variants"]):
        ax.bar([i + k * width for i in range(len(ws))], [v["loader"][w] for w in ws], width,
               label=v["name"])
    ax.axhline(result["gpu_rate"], color="k", ls="--", lw=1,
               label=f"GPU consumes {result['gpu_rate']:.0f}/s")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(ws))], ws)
    ax.set_yscale("log")
    ax.set_ylabel("samples/s through DataLoader")
    ax.set_title("Target pipeline: crop 256 + dilated mask + YCbCr, batch 256")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_report(report: Any, path: str) -> None:
    plt = _pyplot()
    names = [f"{i}. {lv.name}" for i, lv in enumerate(report.levels, 1)]
    rates = [lv.steps_per_s or 0.0 for lv in report.levels]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.barh(names[::-1], rates[::-1], color=["#bbb" if r == 0 else "#4c72b0" for r in rates[::-1]])
    ax.set_xlabel("steps/s")
    ax.set_title(f"caching method - verdict: {report.verdict}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
