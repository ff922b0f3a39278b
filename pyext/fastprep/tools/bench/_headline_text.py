"""The printed first screen of `python -m fastprep bench` (bench_headline.run's result)."""

from __future__ import annotations

from fastprep.tools.bench._usual import STEPS

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
    cores = f"{n} core{'s' if n > 1 else ''}"
    data = (f"  data: {p['count']} JPEG photos, {_px(p['smallest'])} to {_px(p['largest'])} px ({p['where']}; "
            f"{p['bytes'] / 1e6:.1f} MB; packed by fastprep.io.pack: {p['packed_bytes'] / 1e6:.1f} MB)" if p
            else f"  skipped {result.get('skipped')}")
    lines = [f"fastprep bench: how many times the usual pipeline fastprep delivers, on this machine"
             f"{' (--quick)' if result.get('quick') else ''}",
             data,
             f"  {cores}: {n} DataLoader worker{'s' if n > 1 else ''} vs {n} fastprep thread{'s' if n > 1 else ''}; "
             f"batch {result['batch_size']}; samples/s delivered into a loop copying each batch once (as to a GPU); "
             f"best of {result['repeats']} round{'s' if result['repeats'] > 1 else ''}",
             f"  usual: {result['usual']} + an ImageFolder (torchvision's, or its layout and Pillow loader "
             f"without it) + DataLoader",
             "  fastprep: the same steps in fastprep.transforms; the better of fastprep.Loader and them in a "
             "DataLoader",
             ""]
    for workload, (ratio, usual, mine, way) in ratios(result).items():
        name, source = LINES[workload]
        vs = ", usual from the files" if workload.endswith("packed") else ""
        lines.append(f"  {name + ', ' + source + ':':<34} fastprep delivers {ratio:>5.1f}x the usual pipeline  "
                     f"({usual:,.0f} -> {mine:,.0f} samples/s, {way}{vs})")
    lines += ["", f"  ImageNet training: {STEPS['train']}", f"  ImageNet validation: {STEPS['val']}",
              f"  seed workload: {SEED_STEPS}; usual: PIL -> tensor, scipy, float32"]
    lines += _where(result)
    lines += ["", "  more: --details (every loader and setting; the aims, and whether they matter for you)",
              "        --data DIR --transform MODULE:ATTR (your folder and your torchvision transform, both ways)"]
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
                     f"whole decode {c['decode']:.2f} + the transforms {c['transform']:.2f};  fastprep "
                     f"{c['fastprep files']:.2f} from the files ({usual / c['fastprep files']:.1f}x less), "
                     f"{c['fastprep packed']:.2f} packed ({usual / c['fastprep packed']:.1f}x less)")
    lines += ["    fastprep reads only the crop's window of each JPEG (from a pack: only its restart intervals) and "
              "resizes, flips, scales and normalises in one pass;",
              "    the rest of a ratio above is the loader: threads writing into reused batch slots vs worker "
              "processes handing float32 batches over"]
    return lines


def markdown(result: dict) -> str:
    """The headline as the README's table."""
    p = result["photos"]
    data = f"{p['count']} JPEG photos of {_px(p['smallest'])} to {_px(p['largest'])} px" if p else "no photos"
    lines = [f"{data}; {result['cores']} workers / threads; batch {result['batch_size']}; usual: {result['usual']}.",
             "",
             "| workload | source | usual pipeline | fastprep (its best way) | ratio |",
             "| --- | --- | ---: | ---: | ---: |"]
    for workload, (ratio, usual, mine, way) in ratios(result).items():
        name, source = LINES[workload]
        lines.append(f"| {name} | {source} | {usual:,.0f} | {mine:,.0f} ({way}) | {ratio:.1f}x |")
    return "\n".join(lines)
