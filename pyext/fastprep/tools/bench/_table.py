"""The printed form of `python -m fastprep bench`'s result (fastprep.tools.bench._compare.run)."""

from __future__ import annotations

SOURCE_LABEL = {"pil": "PIL", "numpy": "numpy", "folder": "files", "roi": "roi", "packed-jpeg": "pk-jpeg",
                "packed-raw": "pk-raw"}


def _header(result: dict) -> list[str]:
    w, m, k = result["workload"], result["machine"], result["kernel"]
    return [
        "fastprep bench: samples/s DELIVERED into a consumer that copies each batch once into a preallocated "
        "buffer (as the host->device copy would)",
        f"  SYNTHETIC sources: {w['source']} images ({'generated per item' if w['generate_per_item'] else 'pool of '}"
        f"{'' if w['generate_per_item'] else w['pool']}), as PIL images and as numpy arrays; crop {w['crop']}, "
        f"Bernoulli({w['p']}) mask dilated ({w['structure']}), RGB->YCbCr; batch {w['batch_size']}; "
        f"{m['cores']} cores; backend {m['backend']}; torch {m['torch']}{'; --quick' if result.get('quick') else ''}",
        f"  fused kernel alone ({k['what']}): {k['us_per_sample']:.1f} us/sample = "
        f"{k['samples_per_s']:,.0f} samples/s = 100% in 'of kernel'",
        *_floor(k),
        *_files(w.get("files")),
        "",
    ]


def _files(files: dict | None) -> list[str]:
    if not files:
        return []
    sizes = ", ".join(f"{SOURCE_LABEL[k]} {v / files['bytes']['folder']:.3f}x" for k, v in files["bytes"].items()
                      if k != "folder")
    return [f"  IMAGE FILES: {files['what']}; read whole (files), by ROI window (roi), from restart-indexed JPEG "
            f"shards (pk-jpeg), from raw shards (pk-raw); packs vs the files: {sizes}"]


def _floor(k: dict) -> list[str]:
    if "memcpy_floor_us" not in k:
        return []
    return [f"  memcpy floor: copying its {k['floor_bytes']:,} B (the crop window's bytes in, as many out) takes "
            f"{k['memcpy_floor_us']:.1f} us; the kernel takes {k['us_per_sample'] / k['memcpy_floor_us']:.1f}x that"]


def _rows(result: dict) -> list[str]:
    # The name column fits the longest row name, so a long one never runs into its source.
    w = max([42, *(len(r["name"]) + 2 for r in result["rows"])])
    head = (f"{'row':<{w}}{'source':<8}{'setting':<9}{'samples/s':>10}{'of kernel':>11}{'per core':>10}"
            f"{'1 core feeds':>14}{'bytes/sample':>14}")
    lines = [head, "-" * len(head)]
    last_name = None
    for r in result["rows"]:
        name = r["name"] if r["name"] != last_name else ""
        last_name = r["name"]
        lines.append(f"{name:<{w}}{SOURCE_LABEL[r['source']]:<8}{r['setting']:<9}{r['samples_per_s']:>10,.0f}"
                     f"{r['share_of_kernel']:>10.1%} {r['delivered_per_core']:>9,.0f}{r['one_core_feeds']:>13.1%} "
                     f"{r['bytes_per_sample']:>13,}")
    ray = result.get("ray")
    if ray:
        where = f"cluster at {ray['address']}" if ray["address"] else f"local Ray, num_cpus={ray['num_cpus']}"
        lines.append(f"{'fused + CompactMap via Ray Data':<{w}}{'numpy':<8}{'cpus=' + str(ray['num_cpus']):<9}"
                     f"{ray['samples_per_s']:>10,.0f}{ray['share_of_kernel']:>10.1%} "
                     f"{ray['delivered_per_core']:>9,.0f}{ray['one_core_feeds']:>13.1%}   ({where})")
    for peer, why in result.get("not_installed", {}).items():
        lines.append(f"{peer:<{w}}not installed ({why.splitlines()[0][:70]})")
    return lines


def _per_sample(result: dict) -> list[str]:
    per = result["variants"]
    if not per:
        return []
    usual = per[0]["us_per_sample"]
    kinds = list(usual)
    head = "".join(f"{SOURCE_LABEL[k] + ' us':>11}" for k in kinds)
    lines = ["", f"{'per-sample transform alone, 1 thread':<42}{head}   speedup vs usual on the same source"]
    for v in per:
        us = v["us_per_sample"]
        speed = " / ".join(f"{usual[k] / us[k]:.1f}x {SOURCE_LABEL[k]}" for k in kinds)
        lines.append(f"{v['name']:<42}" + "".join(f"{us[k]:>11.1f}" for k in kinds) + f"   {speed}")
    return lines


def _aims(result: dict) -> list[str]:
    """Issue 26's figures (numpy sources) beside their aims, and the memory floor under them."""
    aims, floor = result.get("aims") or {}, result.get("floors")
    lines = ["", "the Loader's figures (numpy sources), this run:"] if aims else []
    for what, (value, aim) in aims.items():
        shown = f"{value:.1%}" if "share" in what else f"{value:.1f} us" if " us " in what else f"{value:.2f}x"
        met = aim_met(value, aim)
        verdict = "" if met is None else "   met" if met else f"   missed: {matters(what)}"
        lines.append(f"  {what:<58}{shown:>9}   aim {aim or '-'}{verdict}")
    if floor:
        alone = floor["alone"]
        lines.append(f"  floors: the fused batch op alone in 1 thread {alone:,.0f} samples/s; "
                     f"{floor['while copying']:,.0f} ({floor['while copying'] / alone:.0%}) while a 2nd thread "
                     f"copies batches as the consumer does; in 2 threads {floor['two threads']:,.0f} "
                     f"({floor['two threads'] / alone:.2f}x); the consumer alone absorbs {floor['consumer']:,.0f}")
        one = floor["per-sample op"]
        lines.append(f"          the per-sample op called a sample at a time from Python: {one:,.0f} samples/s in 1 "
                     f"thread, {floor['per-sample op, two threads']:,.0f} in 2 "
                     f"({floor['per-sample op, two threads'] / one:.2f}x: each call hands the GIL over)")
    return lines


# What a missed aim means for a user, by the start of the aim's name (bench_loader.aims).
MATTERS = {
    "Loader(fused Compose) t=1": "matters only if your step takes more samples/s than the Loader row above delivers "
                                 "(the Loader's overhead over the bare op)",
    "Loader(fused Compose) t=2": "matters only if one Loader thread does not keep your step fed (a second thread then "
                                 "adds less; on a busy or 2-core machine the consumer's copy shares the cores)",
    "the same, into a counting consumer: t=1": "matters only if your step takes more samples/s than this (the "
                                               "Loader's own overhead, no copy)",
    "  t=1, counting": "matters only if your step takes more samples/s than this (the Loader around the batch op)",
    "the same, into a counting consumer: t=2": "matters only if one thread does not keep your step fed",
    "one-batch epochs": "matters only if your epochs are one or two batches long (small datasets, set_epoch often)",
    "fused Compose: us of Python": "matters only for a Compose called a sample at a time (in a dataset's "
                                   "__getitem__) when the op itself takes a few us: the Loader calls the batch op",
    "fastprep.Loader, Compose in dataset[i]": "matters only if your dataset applies fastprep's Compose itself "
                                              "(give it to the Loader as transform= instead)",
    "Compose in dataset[i]": "matters only if your dataset applies fastprep's Compose itself (give it to the Loader "
                             "as transform= instead)",
    "fastprep.Loader, foreign transform": "matters only if you give the Loader a transform that is not fastprep's "
                                          "(threads share the GIL there: port it, or keep a DataLoader's workers)",
}


def matters(what: str) -> str:
    """Whom a missed aim concerns (MATTERS), or a plain note."""
    return next((note for start, note in MATTERS.items() if what.startswith(start)), "matters only for this figure")


def aim_met(value: float, aim: str) -> bool | None:
    """Whether `value` meets `aim` (">= 85%", ">= 1.8x", "<= 5 us", "not below 1x"); None without one."""
    words = aim.replace("not below", ">=").split()
    if len(words) < 2 or words[0] not in (">=", "<="):
        return None
    number = words[1].rstrip("%x")
    limit = float(number) / (100 if words[1].endswith("%") else 1)
    return value >= limit if words[0] == ">=" else value <= limit


def _legend(result: dict) -> list[str]:
    return [
        "",
        "w=N           torch DataLoader, num_workers=N worker processes (w=0: batches made in the main process; "
        "counted as 1 core); best prefetch_factor",
        "reuse=True    workers refill their shared-memory batch buffers once the consumer released the batch "
        "(after its copy, as DevicePrefetcher(release=True) or pin_memory=True)",
        "t=N           N threads in the training process: fastprep.Loader(threads=N); torchdata.nodes "
        "ParallelMapper(num_workers=N, method='thread') per sample;",
        "              SPDL build(num_threads=N) with pipe(concurrency=N) per sample (its docs' form) or per batch "
        "(indices aggregated first, a task makes a batch)",
        "of kernel     delivered samples/s divided by the fused kernel's own 1-thread rate above (same run, the "
        "same images as numpy arrays)",
        "per core      delivered samples/s divided by N (w=0 counts as 1 core); cores the consumer uses are not "
        "counted",
        f"1 core feeds  per core / {result['gpu_rate']:,.0f} samples/s (--gpu-rate): the share of such a GPU that "
        "one core of this row keeps fed",
        "PIL rows      the usual pipeline turns the whole PIL image into an array (a copy of 1024^2 x 3 bytes); "
        "fastprep's rows read only the crop window of it, as fastprep's Compose does",
        "foreign       the usual transform given to fastprep.Loader: code that is not fastprep's runs in parallel "
        "(torch's generator unseeded); deterministic=True runs it one sample at a time, seeded as SeedByIndex",
        "counting      a consumer that only counts each batch's samples (no copy): the Loader's own rate",
        "floors        measured in this run: when they fall short (another process on the cores), so do the figures",
    ]


def format_table(result: dict) -> str:
    return "\n".join(_header(result) + _rows(result) + _per_sample(result) + _aims(result) + _legend(result))


def markdown(result: dict) -> str:
    """The README's table: per row and source kind, its best setting's delivered rate."""
    k = result["kernel"]
    lines = [f"Fused kernel alone, 1 thread, numpy sources: {k['us_per_sample']:.0f} us/sample = "
             f"{k['samples_per_s']:,.0f} samples/s (100%)"
             + (f"; memcpy floor of its {k['floor_bytes']:,} B: {k['memcpy_floor_us']:.1f} us"
                if "memcpy_floor_us" in k else "")
             + f". Best setting per row; {result['machine']['cores']} cores, "
             f"batch {result['workload']['batch_size']}, synthetic sources.", "",
             "| row | source | samples/s delivered (setting) | of kernel | per core | 1 core feeds | bytes/sample |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    best: dict[tuple[str, str], dict] = {}
    for r in result["rows"]:
        key = (r["name"], r["source"])
        if key not in best or r["samples_per_s"] > best[key]["samples_per_s"]:
            best[key] = r
    for (name, source), r in best.items():
        lines.append(f"| {name} | {SOURCE_LABEL[source]} | {r['samples_per_s']:,.0f} ({r['setting']}) | "
                     f"{r['share_of_kernel']:.0%} | {r['delivered_per_core']:,.0f} | {r['one_core_feeds']:.0%} | "
                     f"{r['bytes_per_sample']:,} |")
    for peer in result.get("not_installed", {}):
        lines.append(f"| {peer} | | not installed | | | | |")
    return "\n".join(lines)
