"""The printed first screen of `python -m fastprep bench` (bench_headline.run's result)."""

from __future__ import annotations

from fastprep.tools.bench_usual import STEPS

LINES = {"train files": ("ImageNet training", "JPEG files"), "train packed": ("ImageNet training", "packed"),
         "val files": ("ImageNet validation", "JPEG files"), "val packed": ("ImageNet validation", "packed"),
         "seed": ("seed workload", "in memory")}
SEED_STEPS = "RandomCrop(256) + RandomDilatedMask(0.25) + RGBToYCbCr on 1024² images decoded (PIL)"


def ratios(result: dict) -> dict[str, tuple[float, float, float, str]]:
    """workload -> (ratio, usual samples/s, fastprep samples/s, fastprep's better way)."""
    rates, out = result["rates"], {}
    for workload, by_way in rates.items():
        usual = by_way.get("usual") or rates.get(workload.replace("packed", "files"), {}).get("usual")
        mine = {k: v for k, v in by_way.items() if k != "usual"}
        if not usual or not mine:
            continue
        way = max(mine, key=mine.get)
        out[workload] = (mine[way] / usual, usual, mine[way], way)
    return out


def _px(dims: tuple[int, int]) -> str:
    return f"{dims[0]}x{dims[1]}"


def text(result: dict) -> str:
    """The headline block: what was measured, one line per workload, where the time goes."""
    p, n = result["photos"], result["cores"]
    lines = [f"fastprep bench: samples/s delivered into a training loop, the usual pipeline vs fastprep, on this "
             f"machine{' (--quick)' if result.get('quick') else ''}",
             f"  on {p['count']} JPEG photos of {_px(p['smallest'])} to {_px(p['largest'])} px ({p['where']}; "
             f"{p['bytes'] / 1e6:.1f} MB, packed {p['packed_bytes'] / 1e6:.1f} MB), {n} cores: "
             f"{n} DataLoader workers vs {n} fastprep threads, batch {result['batch_size']}, best of "
             f"{result['repeats']} rounds; each batch copied once as the host->device copy would",
             f"  the usual pipeline: {result['usual']} in torchvision's ImageFolder (Pillow decodes) + DataLoader; "
             f"fastprep: the same steps in fastprep.transforms, best of its Loader and its transforms in a DataLoader",
             ""]
    found = ratios(result)
    for workload, (ratio, usual, mine, way) in found.items():
        name, source = LINES[workload]
        vs = "" if workload.endswith("files") or workload == "seed" else " (usual from the files)"
        lines.append(f"  {name + ', ' + source + ':':<40} fastprep delivers {ratio:>5.1f}x the usual pipeline   "
                     f"{usual:>7,.0f} -> {mine:>7,.0f} samples/s ({way}){vs}")
    lines += ["", f"  ImageNet training: {STEPS['train']}; validation: {STEPS['val']}",
              f"  seed workload: {SEED_STEPS}; its usual pipeline: PIL -> tensor, scipy, float32 (pipelines.py)"]
    lines += _where(result)
    lines += ["", "  more: --details (every loader and setting, and the aims: which matter for you); "
              "--data DIR --transform MODULE:ATTR (your folder, your torchvision transform, both ways)"]
    return "\n".join(lines)


def _where(result: dict) -> list[str]:
    """Where one sample's time goes on one core, per ImageNet pipeline."""
    costs = result.get("costs") or {}
    if not costs:
        return []
    lines = ["", "  where the time goes (ms per sample, one core):"]
    for pipeline, c in costs.items():
        usual = c["decode"] + c["transform"]
        lines.append(f"    {'training' if pipeline == 'train' else 'validation':<11} usual {usual:.2f} = Pillow's "
                     f"whole decode {c['decode']:.2f} + the transforms {c['transform']:.2f}; fastprep "
                     f"{c['fastprep files']:.2f} from the files (only the crop's window decoded, one fused "
                     f"resize: {usual / c['fastprep files']:.1f}x less), {c['fastprep packed']:.2f} packed "
                     f"({usual / c['fastprep packed']:.1f}x less)")
    return lines


def markdown(result: dict) -> str:
    """The headline as the README's table."""
    p = result["photos"]
    lines = [f"{p['count']} JPEG photos of {_px(p['smallest'])} to {_px(p['largest'])} px; {result['cores']} "
             f"workers / threads; batch {result['batch_size']}; usual: {result['usual']}.", "",
             "| workload | source | usual pipeline | fastprep (its best way) | ratio |",
             "| --- | --- | ---: | ---: | ---: |"]
    for workload, (ratio, usual, mine, way) in ratios(result).items():
        name, source = LINES[workload]
        lines.append(f"| {name} | {source} | {usual:,.0f} | {mine:,.0f} ({way}) | {ratio:.1f}x |")
    return "\n".join(lines)
