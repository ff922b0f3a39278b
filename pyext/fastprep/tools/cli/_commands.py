"""Command-line entry points: `python -m fastprep {demo,bench,diagnose,pack}`."""

from __future__ import annotations

import argparse
import sys
import time

from fastprep.tools.cli._arg_types import count, fraction, int_list, number, positive


def _best_time(fn, repeat: int = 50) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def demo(_args: argparse.Namespace) -> int:
    """Show the active backend and build, then pack/unpack binary maps and check them."""
    import numpy as np  # noqa: PLC0415 (the CLI starts fast: each command imports what it runs)
    import torch  # noqa: PLC0415

    import fastprep  # noqa: PLC0415

    print(f"fastprep {fastprep.__version__} on torch {torch.__version__}: backend = {fastprep.backend()}")
    try:
        for key, value in fastprep.build_info().items():
            print(f"  {key:<22} {value}")
    except RuntimeError as exc:
        print(f"  (no native build: {exc})")
    torch.manual_seed(0)
    masks = torch.rand(8, 256, 256) < 0.25
    for dim in (0, 2):
        packed = fastprep.pack_bits(masks, dim)
        same = np.array_equal(packed.numpy(), np.packbits(masks.numpy(), axis=dim, bitorder="little"))
        back = torch.equal(fastprep.unpack_bits(packed, masks.shape[dim], dim), masks)
        t_fp = _best_time(lambda dim=dim: fastprep.pack_bits(masks, dim))
        t_np = _best_time(lambda dim=dim: np.packbits(masks.numpy(), axis=dim, bitorder="little"))
        print(f"pack_bits 8x256x256 along dim {dim}: {masks.nbytes} -> {packed.nbytes} bytes, "
              f"equal to numpy: {same}, round trip: {back}, "
              f"{t_fp * 1e6:.1f} us vs numpy {t_np * 1e6:.1f} us ({t_np / t_fp:.1f}x)")
        if not (same and back):
            return 1
    return 0


def _write_outputs(args: argparse.Namespace, payload: dict, plot, *plot_args) -> None:
    """--json and --plot, shared by the subcommands that have them."""
    import json  # noqa: PLC0415

    if args.json:
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
    if args.plot:
        import fastprep.tools._plotting  # noqa: PLC0415

        getattr(fastprep.tools._plotting, plot)(*plot_args, args.plot)


# Options that only shape the --details table: giving one asks for the table.
TABLE_OPTIONS = ("generate_per_item", "gpu_rate", "workers", "threads", "sources", "no_peers", "ray", "ray_address",
                 "markdown", "plot")


def bench(args: argparse.Namespace) -> int:
    """The headline (the usual pipeline vs fastprep on ImageNet-style and the seed workloads), the
    --details table, or --data: the user's folder and transform both ways."""
    from fastprep.tools.diagnose._targets import check_plot, check_writable  # noqa: PLC0415
    from fastprep.tools.measuring._usage import UsageError  # noqa: PLC0415

    try:  # before the run, not after it
        if args.data is not None:
            _refuse_table_options(args)
        if args.json:
            check_writable("--json", args.json)
        if args.plot:
            check_plot(args.plot)
        if (args.data is None) != (args.transform is None):
            raise UsageError("--data DIR and --transform MODULE:ATTR go together (your folder and your transform), "
                             f"got only {'--data' if args.data is not None else '--transform'}")
        if args.data is not None:
            return _bench_data(args)
    except UsageError as exc:
        print(f"python -m fastprep bench: error: {exc}", file=sys.stderr)
        return 2
    import fastprep.tools.bench._compare as b  # noqa: PLC0415
    import fastprep.tools.bench._headline as bench_headline  # noqa: PLC0415
    import fastprep.tools.bench._headline_text as bench_headline_text  # noqa: PLC0415

    if args.sources:
        b.check_sources(args.sources.split(","))
    defaults = build_parser().parse_args(["bench"])
    details = args.details or any(getattr(args, k) != getattr(defaults, k) for k in TABLE_OPTIONS)
    headline = bench_headline.run(quick=args.quick, cores=args.cores, batch_size=args.batch_size or 64,
                                  seconds=args.seconds)
    print(bench_headline_text.text(headline), flush=True)
    payload: dict = {"headline": headline}
    if details:
        result = b.run(quick=args.quick, generate_per_item=args.generate_per_item, gpu_rate=args.gpu_rate,
                       batch_size=args.batch_size or 256, workers=args.workers, threads=args.threads,
                       sources=args.sources.split(",") if args.sources else None, seconds=args.seconds,
                       peers=not args.no_peers, with_ray=args.ray or args.ray_address is not None,
                       ray_address=args.ray_address)
        print("\n\nDETAILS: the seed workload, every loader and setting\n" + b.table(result))
        if args.markdown:
            from fastprep.tools.bench._table import markdown  # noqa: PLC0415

            print("\n" + bench_headline_text.markdown(headline) + "\n\n" + markdown(result))
        payload = {**result, "headline": headline}
    _write_outputs(args, payload, "plot_bench", payload)
    return 0


def _refuse_table_options(args: argparse.Namespace) -> None:
    """--data measures the user's folder and transform, not the --details table: an option that
    only shapes that table (or --details itself) would be silently ignored, so it is refused."""
    from fastprep.tools.measuring._usage import UsageError  # noqa: PLC0415

    defaults = build_parser().parse_args(["bench"])
    given = [k for k in ("details", *TABLE_OPTIONS) if getattr(args, k) != getattr(defaults, k)]
    if given:
        options = ", ".join("--" + k.replace("_", "-") for k in given)
        raise UsageError(f"{options}: only for the --details table, not with --data {args.data!r} (--data measures "
                         f"your folder and transform; it takes --cores, --batch-size, --seconds, --quick, --json)")


def _bench_data(args: argparse.Namespace) -> int:
    import fastprep.tools.bench._data as bench_data  # noqa: PLC0415
    from fastprep.tools.bench._bad_files import BadFileStop  # noqa: PLC0415
    from fastprep.tools.measuring._usage import UsageError  # noqa: PLC0415

    try:
        result = bench_data.run(args.data, args.transform, cores=args.cores, batch_size=args.batch_size or 64,
                                seconds=args.seconds, repeats=2 if args.quick else 3)
    except UsageError:
        raise
    except BadFileStop as exc:  # the file and the policy, not a DataLoader worker's traceback
        print(f"python -m fastprep bench: --data {args.data}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 (a later sample failing while measured: one line, exit 1)
        print(f"python -m fastprep bench: --data {args.data} --transform {args.transform}: measuring raised "
              f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return 1
    print(bench_data.text(result))
    if args.json:
        import json  # noqa: PLC0415

        with open(args.json, "w") as f:
            json.dump({k: v for k, v in result.items() if k != "port"} | {"port": result["port"].steps}, f, indent=2)
    return 0


def diagnose(args: argparse.Namespace) -> int:
    """Run the caching method (and optionally the loader sweep) on a pipeline."""
    from fastprep.tools.cli._diagnose import main as run  # noqa: PLC0415

    return run(args)


BENCH_HELP = """\
How many times the usual pipeline fastprep delivers, on this machine, measured side by side in
one run: samples/s delivered into a consumer that copies each batch once (as the host->device
copy would), the usual way (torchvision v2 in torchvision's ImageFolder and a DataLoader; a
stand-in of the same steps where torchvision is not installed) against fastprep's best way (its
Loader, or its transforms in a DataLoader), with as many workers as threads.

The first screen: torchvision's ImageNet training and validation pipelines on a folder of real
photos (scikit-image's), from the files and packed, and the seed workload. --details adds the
seed workload's full table and the aims. --data DIR --transform MODULE:ATTR runs your folder and
your torchvision transform both ways (needs torchvision).

examples:
  python -m fastprep bench --quick
  python -m fastprep bench --data ~/imagenet/val --transform mypkg.transforms:val_tf
  python -m fastprep bench --details --sources numpy,folder,packed-jpeg --markdown
"""


DIAGNOSE_HELP = """\
Find the stage that starves the training step, by the caching method: steps/s with
(1) one batch cached on the device, (2) one batch cached on the host and copied every step (not
on the CPU), (3) the dataset returning one processed sample, (4) one raw sample cached and the
transforms run every time, (5) nothing cached. The stage that adds the most time per step,
beyond the noise between repeats, is the verdict, with its margin; levels within noise of each
other give "inconclusive". Worker start-up and epoch restarts stay out of the timed steps.
Decoding is raw loading, wherever it happens (Pillow in the dataset, fastprep's load_raw, or the
window decode inside fastprep's crop of an ImageFolder(roi=True) file), and the advice names the
remedy the pipeline has not taken yet (roi=True, python -m fastprep pack, the GPU decode split).
While the verdict is within noise, more rounds run, up to --time-limit seconds in all.

MODULE:FACTORY names a function taking no arguments that returns one of
  (loader, step_fn)                               a torch DataLoader or a fastprep.Loader
  (dataset, step_fn, batch_size[, collate_fn])    diagnose builds a DataLoader (or --loader fastprep)
step_fn(batch) runs one training step. It receives the batch the loader yields, moved to --device
(tensors in tuples / lists / dicts one by one); a CompactBatch (compact_collate, fastprep.Loader)
is expanded there first with CompactBatch.expand(): float32 images / 255, int64 labels, bool masks
(--no-expand passes the CompactBatch itself). Raw loading is split from the transforms through the
dataset's load_raw(i) + apply_transform(raw), or its `transform` attribute, looking through
wrappers' `.dataset` (SeedByIndex, Subset); without either, levels 3-4 say why they are n/a.

examples:
  python -m fastprep diagnose --demo
  python -m fastprep diagnose mypkg.train:make_pipeline --device cuda --sweep --json out.json
"""


def _diagnose_parser(sub) -> None:
    p = sub.add_parser("diagnose", help="find the stage that starves the training step (the caching method)",
                       description=DIAGNOSE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", nargs="?", metavar="MODULE:FACTORY",
                   help="e.g. mypkg.train:make_pipeline (see above for what the factory returns)")
    p.add_argument("--demo", action="store_true",
                   help="TinyNet on an ImageFolder of JPEG photos, the usual pipeline and the fastprep one "
                        "side by side (under a minute on 2 cores)")
    p.add_argument("--device", help="where step_fn runs: cpu, cuda, cuda:1, ... (default: the fastprep.Loader's "
                                    "device, else cpu); on the CPU there is no copy, so level 2 is skipped")
    p.add_argument("--batch-size", type=positive(int),
                   help="samples per batch (default: the factory's; 8 for --demo)")
    p.add_argument("--loader", choices=("dataloader", "fastprep"), default="dataloader",
                   help="for a factory returning a dataset: build a torch DataLoader (default) or a fastprep.Loader")
    p.add_argument("--workers", type=count,
                   help="DataLoader num_workers (default: the loader's own; 0 for a dataset or --demo)")
    p.add_argument("--threads", type=positive(int),
                   help="fastprep.Loader threads (default: the loader's own; all cores for --loader fastprep; "
                        "1 for --demo)")
    p.add_argument("--steps", type=positive(int),
                   help="timed steps per level and repeat (default: as many as the 95%% confidence interval "
                        "of the mean step time needs to be within --precision)")
    p.add_argument("--precision", type=fraction, default=0.10,
                   help="with no --steps: the +- share of the mean step time to time for, at 95%% confidence "
                        "(default 0.10)")
    p.add_argument("--repeats", type=positive(int), default=3,
                   help="measurements per level, interleaved across levels; their min-max is shown (default 3)")
    p.add_argument("--time-limit", type=number(float, lambda v: v >= 0, "a number of seconds >= 0"), default=120.0,
                   help="seconds the caching method may measure in all: after --repeats rounds, more run while "
                        "the verdict is within noise and can settle in the time left; if it cannot, the verdict "
                        "says about how long it would need (default 120; 0: --repeats rounds only; not with --steps; "
                        "--demo's two pipelines share it; --sweep times its settings apart, outside this limit)")
    p.add_argument("--warmup", type=count,
                   help="untimed steps before each measurement (default: until the step time is steady)")
    p.add_argument("--no-expand", action="store_true",
                   help="give step_fn CompactBatch es as they are (moved to the device), not expanded")
    p.add_argument("--sweep", action="store_true",
                   help="also sweep the loader's settings: a DataLoader's num_workers x prefetch_factor x "
                        "pin_memory x persistent_workers, or a fastprep.Loader's threads x depth")
    p.add_argument("--json", metavar="PATH", help="write the levels, verdict (and sweep) here as JSON")
    p.add_argument("--plot", metavar="PATH",
                   help="draw the levels with their spread to this image (matplotlib; the format from the "
                        "extension: .png, .svg, .pdf, ...)")
    p.add_argument("--progress", choices=("auto", "bar", "line", "off"), default="auto",
                   help="progress with a time estimate on stderr: tqdm's bar when installed (auto), tqdm (bar), "
                        "a plain line (line), or none (off)")
    p.add_argument("--traceback", action="store_true",
                   help="when the pipeline raises while it is measured, print the whole traceback (by default: "
                        "one line naming the stage, the item and the error; exit status 1)")
    p.set_defaults(func=diagnose)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fastprep", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help=demo.__doc__).set_defaults(func=demo)

    bench_p = sub.add_parser("bench", help="how many times the usual pipeline fastprep delivers (ImageNet-style "
                             "and the seed workload; --data: your folder and transform)", description=BENCH_HELP,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_p.add_argument("--quick", action="store_true", help="fewer photos, repeats and batches (about a minute "
                         "on 2 cores; two with --details)")
    bench_p.add_argument("--details", action="store_true",
                         help="after the headline, the seed workload's full table (every loader, source kind and "
                         "setting, the peers) and the Loader's aims, each saying whether it matters for you")
    bench_p.add_argument("--data", metavar="DIR", help="your images: a folder of class folders (torchvision's "
                         "ImageFolder layout) or a fastprep pack; with --transform")
    bench_p.add_argument("--transform", metavar="MODULE:ATTR",
                         help="your torchvision transform: a Compose (v2 or v1) or a function / class returning "
                         "one when called with no arguments, e.g. mypkg.transforms:train_tf; with --data")
    bench_p.add_argument("--cores", type=positive(int),
                         help="DataLoader workers and fastprep threads for the headline and --data (default: "
                         "every core)")
    bench_p.add_argument("--generate-per-item", action="store_true",
                         help="the --details table: generate every source image instead of drawing from a pool")
    bench_p.add_argument("--gpu-rate", type=positive(float), default=5000.0,
                         help="the --details table: samples/s the GPU consumes, for the '1 core feeds' column")
    bench_p.add_argument("--batch-size", type=positive(int),
                         help="samples per batch (default 64 for the headline and --data, 256 for the --details "
                         "table)")
    bench_p.add_argument("--workers", type=int_list(0),
                         help="the --details table: comma-separated DataLoader num_workers to try (default 0..cores)")
    bench_p.add_argument("--threads", type=int_list(1),
                         help="the --details table: comma-separated threads for fastprep.Loader and the thread-based "
                         "peers (default 1..cores)")
    bench_p.add_argument("--sources", help="the --details table: comma-separated source kinds: pil,numpy (default "
                         "both), and image files: folder (decoded whole), roi (by window), packed-jpeg, packed-raw "
                         "(fastprep.io.pack)")
    bench_p.add_argument("--seconds", type=number(float, lambda v: v >= 0, "a value >= 0"),
                         help="least seconds timed per row after warm-up (the headline: 0.8 with --quick, else 2; "
                         "--data: 1; the --details table: 0.5 with --quick, else 4); 0: a smoke run, one round")
    bench_p.add_argument("--no-peers", action="store_true",
                         help="the --details table: skip the torchdata.nodes and SPDL rows")
    bench_p.add_argument("--ray", action="store_true", help="the --details table: add a row through Ray Data on a "
                         "local instance (pip install 'fastprep[ray]')")
    bench_p.add_argument("--ray-address", help="run the Ray row on this cluster (ray.init(address=...))")
    bench_p.add_argument("--markdown", action="store_true", help="also print the README's tables: the headline's, "
                         "and the --details table's best setting per row and source kind")
    bench_p.add_argument("--json", help="write the results here (the headline under 'headline')")
    bench_p.add_argument("--plot", help="the --details table: draw delivered samples/s per workers / threads to "
                         "this PNG (matplotlib)")
    bench_p.set_defaults(func=bench)

    _diagnose_parser(sub)
    from fastprep.tools.cli._pack_command import add_parser as add_pack_parser  # noqa: PLC0415 (the pack command)

    add_pack_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
