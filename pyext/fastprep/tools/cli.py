"""Command-line entry points: `python -m fastprep {demo,bench,diagnose}`."""

from __future__ import annotations

import argparse
import sys
import time


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
        import fastprep.tools.plotting  # noqa: PLC0415

        getattr(fastprep.tools.plotting, plot)(*plot_args, args.plot)


def bench(args: argparse.Namespace) -> int:
    """The target workload the usual way and the fastprep way."""
    from fastprep.tools import bench as b  # noqa: PLC0415

    ints = lambda text: [int(x) for x in text.split(",")] if text else None  # noqa: E731
    result = b.run(quick=args.quick, generate_per_item=args.generate_per_item, gpu_rate=args.gpu_rate,
                   batch_size=args.batch_size, workers=ints(args.workers), threads=ints(args.threads),
                   sources=args.sources.split(",") if args.sources else None, seconds=args.seconds,
                   peers=not args.no_peers, with_ray=args.ray or args.ray_address is not None,
                   ray_address=args.ray_address)
    print(b.table(result))
    if args.markdown:
        from fastprep.tools.bench_table import markdown  # noqa: PLC0415

        print("\n" + markdown(result))
    _write_outputs(args, result, "plot_bench", result)
    return 0


def diagnose(args: argparse.Namespace) -> int:
    """Run the caching method (and optionally the loader sweep) on a pipeline."""
    import importlib  # noqa: PLC0415

    from torch.utils.data import DataLoader  # noqa: PLC0415

    from fastprep.tools import diagnose as dg  # noqa: PLC0415

    if args.demo:
        from fastprep.tools.demo_model import demo_factory as factory  # noqa: PLC0415
    elif args.target:
        module, _, name = args.target.partition(":")
        if not name:
            raise SystemExit(f"diagnose: expected MODULE:FACTORY, got {args.target!r}")
        factory = getattr(importlib.import_module(module), name)
    else:
        raise SystemExit("diagnose: give MODULE:FACTORY or --demo")
    made = factory()
    dataset, step_fn, batch_size = made[:3]
    collate_fn = made[3] if len(made) > 3 else None

    def loader_factory(dataset=dataset):
        return DataLoader(dataset, batch_size=batch_size, num_workers=args.workers,
                          collate_fn=collate_fn, shuffle=False)

    say = lambda msg: print(f"  .. {msg}", file=sys.stderr, flush=True)  # noqa: E731
    report = dg.find_bottleneck(loader_factory, step_fn, device=args.device, steps=args.steps,
                                warmup=3, progress=say)
    print(report.table())
    out = {"bottleneck": report.as_dict()}
    if args.sweep:
        sweep = dg.sweep_loader(dataset, batch_size, step_fn, device=args.device,
                                collate_fn=collate_fn, steps=args.steps, warmup=1, progress=say)
        print(sweep.table())
        out["sweep"] = {"rows": sweep.rows, "best": sweep.best}
    _write_outputs(args, out, "plot_report", report)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastprep", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help=demo.__doc__).set_defaults(func=demo)

    bench_p = sub.add_parser("bench", help="the target workload, the usual way vs fastprep")
    bench_p.add_argument("--quick", action="store_true", help="fewer repeats and batches (about a minute on 2 cores)")
    bench_p.add_argument("--generate-per-item", action="store_true",
                       help="generate every source image instead of drawing from a pool")
    bench_p.add_argument("--gpu-rate", type=float, default=5000.0,
                       help="samples/s the GPU consumes, for the '1 core feeds' column")
    bench_p.add_argument("--batch-size", type=int, default=256)
    bench_p.add_argument("--workers", help="comma-separated DataLoader num_workers to try (default 0..cores)")
    bench_p.add_argument("--threads", help="comma-separated threads for fastprep.Loader and the thread-based peers "
                         "(default 1..cores)")
    bench_p.add_argument("--sources", help="comma-separated source kinds: pil,numpy (default both)")
    bench_p.add_argument("--seconds", type=float,
                         help="least seconds timed per row after warm-up (default 0.5 with --quick, else 4)")
    bench_p.add_argument("--no-peers", action="store_true", help="skip the torchdata.nodes and SPDL rows")
    bench_p.add_argument("--ray", action="store_true",
                         help="add a row through Ray Data on a local instance (pip install 'fastprep[ray]')")
    bench_p.add_argument("--ray-address", help="run the Ray row on this cluster (ray.init(address=...))")
    bench_p.add_argument("--markdown", action="store_true",
                         help="also print the README's table (best setting per row and source kind)")
    bench_p.add_argument("--json", help="write the results here")
    bench_p.add_argument("--plot", help="draw delivered samples/s per workers / threads to this PNG (matplotlib)")
    bench_p.set_defaults(func=bench)

    diag_p = sub.add_parser("diagnose", help="find the stage that starves the device")
    diag_p.add_argument("target", nargs="?",
                        help="MODULE:FACTORY returning (dataset, step_fn, batch_size[, collate_fn])")
    diag_p.add_argument("--demo", action="store_true", help="a small CPU model on the target pipeline")
    diag_p.add_argument("--device", default="cpu")
    diag_p.add_argument("--workers", type=int, default=0, help="num_workers of the DataLoader")
    diag_p.add_argument("--steps", type=int, default=10)
    diag_p.add_argument("--sweep", action="store_true", help="also sweep DataLoader settings")
    diag_p.add_argument("--json")
    diag_p.add_argument("--plot")
    diag_p.set_defaults(func=diagnose)

    args = parser.parse_args(argv)
    return args.func(args)
