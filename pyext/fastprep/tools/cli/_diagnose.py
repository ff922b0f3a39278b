"""`python -m fastprep diagnose`: the run behind the command line (fastprep.tools.cli._commands parses it).

Everything the user gave is checked first (fastprep.tools.diagnose._targets): a UsageError is one line on
stderr and exit status 2. Then the caching method runs with a progress bar, prints its table and
verdict, optionally sweeps the loader's settings, and writes --json / --plot. An error the
pipeline raises while it is measured is one line too, naming the stage and the item
(fastprep.tools.diagnose._failures), exit status 1; --traceback prints the whole traceback before it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from typing import Any

import fastprep.tools.diagnose._targets as tg
from fastprep.tools.measuring._usage import UsageError


class PipelineError(Exception):
    """The measured pipeline raised (the cause): the message names the stage, the item and the error."""


def main(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except UsageError as exc:
        print(f"python -m fastprep diagnose: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # one line, as for a UsageError; --traceback for the rest
        from fastprep.tools.diagnose._failures import error_text  # noqa: PLC0415

        error = exc.__cause__ if isinstance(exc, PipelineError) else exc
        if getattr(args, "traceback", False):
            traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
        line = str(exc) if isinstance(exc, PipelineError) else error_text(exc)
        hint = "" if getattr(args, "traceback", False) else "; --traceback prints the whole traceback"
        print(f"python -m fastprep diagnose: error: {line}{hint}", file=sys.stderr)
        return 1


def _check_outputs(args: argparse.Namespace) -> Any:
    from fastprep.batch._device_prefetcher import check_device  # noqa: PLC0415

    if args.demo and args.target:
        raise UsageError(f"give MODULE:FACTORY or --demo, not both (got {args.target!r} and --demo)")
    if not args.demo and not args.target:
        raise UsageError(f"give MODULE:FACTORY (a function returning {tg.FORMS}) or --demo")
    try:
        device = check_device("--device", args.device) if args.device is not None else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        tg.check_writable("--json", args.json)
    if args.plot:
        tg.check_plot(args.plot)
        if args.json and os.path.abspath(args.json) == os.path.abspath(args.plot):
            raise UsageError(f"--json and --plot name the same file {args.plot!r}")
    return device


def _progress(args: argparse.Namespace, title: str) -> Any:
    from fastprep.tools.measuring._run_plan import Progress  # noqa: PLC0415

    return Progress(title, use_tqdm=None if args.progress == "auto" else args.progress == "bar") \
        if args.progress != "off" else None


def _measure(args: argparse.Namespace, loader: Any, step_fn: Any, device: Any, title: str, share: int = 1) -> Any:
    """find_bottleneck with the CLI's settings; `share`: how many measurements split --time-limit
    (the demo's two pipelines: the limit is the whole command's)."""
    from fastprep.tools.diagnose._bottleneck import find_bottleneck  # noqa: PLC0415

    progress = _progress(args, title)
    try:
        return find_bottleneck(loader, step_fn, device, expand=not args.no_expand, steps=args.steps,
                               repeats=args.repeats, warmup=args.warmup, precision=args.precision,
                               time_limit=args.time_limit / share, progress=progress)
    finally:
        if progress is not None:
            progress.close()


def _sweep(args: argparse.Namespace, loader: Any, step_fn: Any, device: Any, title: str) -> Any:
    from fastprep.tools.diagnose._bottleneck import sweep  # noqa: PLC0415

    progress = _progress(args, title)
    try:
        return sweep(loader, step_fn, device, expand=not args.no_expand, steps=args.steps, warmup=args.warmup,
                     precision=args.precision, progress=progress)
    finally:
        if progress is not None:
            progress.close()


def _build_loader(target: tg.Target, args: argparse.Namespace) -> Any:
    """The target's loader with --batch-size / --workers / --threads applied, or one built for its
    dataset (a DataLoader, or a fastprep.Loader with --loader fastprep)."""
    from torch.utils.data import DataLoader  # noqa: PLC0415

    import fastprep.tools.measuring._stand_ins as si  # noqa: PLC0415
    from fastprep.loader import Loader  # noqa: PLC0415

    if target.loader is not None:
        loader = target.loader
        if isinstance(loader, Loader):
            changes = {k: v for k, v in (("batch_size", args.batch_size), ("threads", args.threads)) if v}
            return si.rebuild_fastprep_loader(loader, loader.dataset, **changes) if changes else loader
        if args.batch_size or args.workers is not None:
            changes = {"batch_size": args.batch_size or loader.batch_size,
                       "num_workers": loader.num_workers if args.workers is None else args.workers}
            return si.rebuild_dataloader(loader, loader.dataset, **changes)
        return loader
    batch_size = args.batch_size or target.batch_size
    if args.loader == "fastprep":
        if target.collate_fn is not None:
            raise UsageError("a fastprep.Loader collates itself (CompactBatch): drop the factory's collate_fn "
                             "or use --loader dataloader")
        return Loader(target.dataset, batch_size, threads=args.threads, seed=0)
    return DataLoader(target.dataset, batch_size=batch_size, num_workers=args.workers or 0,
                      collate_fn=target.collate_fn)


def _run(args: argparse.Namespace) -> int:
    device = _check_outputs(args)
    if args.demo:
        return _demo(args, device)
    factory = tg.load_factory(args.target)
    target = tg.call_factory(factory, args.target)
    loader = _build_loader(target, args)
    from fastprep.tools.diagnose._failures import Stages  # noqa: PLC0415

    stages = Stages(loader, target.step_fn)
    try:
        report = _measure(args, loader, target.step_fn, device, "diagnose")
        print(f"caching method on {report.device}: {_how(args)}")
        print(report.table())
        out: dict[str, Any] = {"bottleneck": report.as_dict()}
        if args.sweep:
            swept = _sweep(args, loader, target.step_fn, device, "sweep")
            print(swept.table())
            out["sweep"] = swept.as_dict()
    except Exception as exc:
        raise PipelineError(stages.describe(exc)) from exc
    _write(args, out, report)
    return 0


def _how(args: argparse.Namespace) -> str:
    import torch  # noqa: PLC0415

    steps = f"{args.steps} timed steps" if args.steps else f"timed until +-{args.precision:.0%} at 95% confidence"
    warm = f"{args.warmup} warm-up steps" if args.warmup is not None else "warm-up until the step time is steady"
    more = f"; rounds planned within {args.time_limit:g} s (passed by one round at most), more while within " \
        f"noise" if args.time_limit and not args.steps else ""
    return f"{args.repeats} repeats per level, {warm}, {steps}; torch threads {torch.get_num_threads()}{more}"


def _demo(args: argparse.Namespace, device: Any) -> int:
    import torch  # noqa: PLC0415

    import fastprep.tools.diagnose._demo_model as demo_model  # noqa: PLC0415
    from fastprep.tools import photos  # noqa: PLC0415
    from fastprep.tools.diagnose._verdict import side_by_side  # noqa: PLC0415

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core for the model, steadier on a shared machine
    try:
        with tempfile.TemporaryDirectory(prefix="fastprep-demo-") as root:
            where = photos.write_photo_folder(root)
            batch_size = args.batch_size or 8
            dev = str(device or "cpu")
            pipes = {"usual": demo_model.usual_pipeline(root, batch_size, args.workers or 0, dev),
                     "fastprep": demo_model.fastprep_pipeline(root, batch_size, args.threads or 1, dev)}
            print(f"demo: TinyNet on {dev}, batch {batch_size}, {len(pipes['usual'][0].dataset)} JPEGs "
                  f"({where}) in an ImageFolder\n"
                  f"  usual:    DataLoader(num_workers={args.workers or 0}), PIL decode, PIL -> tensor + float crop / "
                  f"mask / YCbCr, default_collate (float32)\n"
                  f"  fastprep: fastprep.Loader(threads={args.threads or 1}) over fastprep.io.ImageFolder(roi=True), "
                  f"fused crop_mask_ycbcr decoding each crop's window into batch slots, CompactBatch expanded "
                  f"before the step\n"
                  f"caching method: {_how(args)}")
            reports = {name: _measure(args, loader, step, device, f"diagnose {name}", len(pipes))
                       for name, (loader, step) in pipes.items()}
            print(side_by_side(reports))
            out: dict[str, Any] = {"demo": {name: r.as_dict() for name, r in reports.items()}}
            if args.sweep:
                for name, (loader, step) in pipes.items():
                    swept = _sweep(args, loader, step, device, f"sweep {name}")
                    print(f"{name}:\n{swept.table()}")
                    out["demo"][name]["sweep"] = swept.as_dict()
            _write(args, out, reports)
    finally:
        torch.set_num_threads(threads)
    return 0


def _write(args: argparse.Namespace, payload: dict, report: Any) -> None:
    if args.json:
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
    if args.plot:
        from fastprep.tools._plotting import plot_report  # noqa: PLC0415

        plot_report(report, args.plot)
