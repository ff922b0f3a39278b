"""`python -m fastprep COMMAND`: command-line entry points."""

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
    import numpy as np
    import torch

    import fastprep

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
        t_fp = _best_time(lambda: fastprep.pack_bits(masks, dim))
        t_np = _best_time(lambda: np.packbits(masks.numpy(), axis=dim, bitorder="little"))
        print(f"pack_bits 8x256x256 along dim {dim}: {masks.nbytes} -> {packed.nbytes} bytes, "
              f"equal to numpy: {same}, round trip: {back}, "
              f"{t_fp * 1e6:.1f} us vs numpy {t_np * 1e6:.1f} us ({t_np / t_fp:.1f}x)")
        if not (same and back):
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastprep", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help=demo.__doc__).set_defaults(func=demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
