"""resized_crop_batch of whole windows on any device in a few batched torch ops: what the GPU decode
split's device does with a batch of decoded windows (transforms/_fused.py's resized-crop row).

The definition (ops/_resize.py's torch-ops form) runs the op one sample at a time and computes each
axis's weights with numpy on the host (_resize_weights.py, ~110 us an axis): at a batch of 256 that
is ~55 ms of the consumer's thread per batch. Here every sample's weight tables are computed at
once on the windows' device, with the same float64 operations in the same order (each a separate
IEEE-rounded torch op, so the same bits on a CPU and a GPU: tested equal to resample_axis), and
each pass is one gather per tap over the batch padded to its largest window (uint8), summed in
int32 (exact: a tap's weight is < 2^15, a value <= 255 and the weights sum to <= 2^22, so a sum
stays < 2^31).
The output is the kernel's bits (tested on the CPU against torch.ops.fastprep.resized_crop_batch).
"""

from __future__ import annotations

import torch

from fastprep.ops._checks import ImageView
from fastprep.ops._output_checks import check_output
from fastprep.ops._resize_checks import check_geometry, check_row

__all__ = ["resized_crop_windows", "axis_tables"]


def _triangle(x: torch.Tensor) -> torch.Tensor:
    x = x.abs()
    return torch.where(x < 1.0, 1.0 - x, 0.0)


def _weights(size: torch.Tensor, out: torch.Tensor, antialias: bool) -> tuple[torch.Tensor, ...]:
    """(start, count, float64 weights, zero past count) of every output of every sample's table, resample_axis's
    arithmetic; rows at or past a sample's `out` are padding."""
    n_out = int(out.max())
    i = torch.arange(n_out, dtype=torch.float64, device=size.device).expand(len(size), n_out)
    size2 = size[:, None]
    scale = size2.double() / out[:, None].double()
    if antialias:
        support = torch.where(scale >= 1.0, scale, 1.0)
        taps = torch.ceil(support).long() * 2 + 1
        invscale = torch.where(scale >= 1.0, 1.0 / scale, 1.0)
        center = scale * (i + 0.5)
        start = torch.trunc(center - support + 0.5).long().clamp(min=0)
        count = torch.minimum(torch.minimum(torch.trunc(center + support + 0.5).long(), size2) - start, taps).clamp(0)
        columns, total = [], torch.zeros_like(center)
        for j in range(int(taps.max())):
            x = ((j + start).double() - center + 0.5) * invscale
            columns.append(torch.where(j < count, _triangle(x), 0.0))
            total = total + columns[-1]  # in tap order, as torch sums
        w = torch.stack(columns, -1)
        nonzero = total != 0.0
        w = torch.where(nonzero[..., None], w / torch.where(nonzero, total, 1.0)[..., None], w)
    else:  # two taps at the source position (its float32 floor); an edge tap's weight moves inward
        real = (scale * (i + 0.5) - 0.5).clamp(min=0.0)
        start = torch.minimum(torch.floor(real.float()).long(), size2 - 1)
        lam = (real - start.double()).clamp(0.0, 1.0)
        count = (torch.minimum(start + 2, size2) - start).clamp(0, 2)
        w0, w1 = _triangle(0.0 - lam), _triangle(1.0 - lam)
        w = torch.stack([torch.where(count == 2, w0, w0 + w1), torch.where(count == 2, w1, 0.0)], -1)
    return start, count, w


def axis_tables(size: torch.Tensor, out: torch.Tensor, antialias: bool, reverse: torch.Tensor, first: torch.Tensor,
                n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """resample_axis for a batch of axes (int64 / bool tensors, one element per sample, on one
    device): `size` inputs resized to `out` outputs, of which outputs [first, first + n), reversed
    where `reverse`. Returns (start [N, n], int weights [N, n, taps] (zero past each row's count),
    precision [N]), resample_axis's values."""
    start, _, w = _weights(size, out, antialias)
    valid = torch.arange(w.shape[1], device=w.device)[None, :] < out[:, None]
    wt_max = torch.where(valid[..., None], w, 0.0).amax((1, 2))
    precision, growing = torch.zeros_like(size), torch.ones_like(size, dtype=torch.bool)
    for p in range(22):  # the largest precision whose biggest weight stays < 2^15 (a prefix of 0..21)
        growing &= torch.trunc(0.5 + wt_max * float(1 << (p + 1))) < (1 << 15)
        precision += growing
    powers = torch.tensor([float(1 << p) for p in range(23)], dtype=torch.float64, device=w.device)  # exact
    v = w * powers[precision][:, None, None]
    wi = torch.where(v < 0, torch.trunc(-0.5 + v), torch.trunc(0.5 + v)).long()
    same = size == out  # torch skips the axis: one tap of 2^14 is the identity
    arange = torch.arange(w.shape[1], device=w.device).expand_as(start)
    start = torch.where(same[:, None], arange, start)
    ident = torch.zeros_like(wi)
    ident[..., 0] = 1 << 14
    wi = torch.where(same[:, None, None], ident, wi)
    precision = torch.where(same, 14, precision)
    k = torch.arange(n, device=w.device)
    rows = first[:, None] + torch.where(reverse[:, None], n - 1 - k, k)
    return start.gather(1, rows), wi.gather(1, rows[..., None].expand(-1, -1, wi.shape[2])), precision


def _resample(x: torch.Tensor, start: torch.Tensor, w: torch.Tensor, precision: torch.Tensor, sizes: torch.Tensor,
              dim: int) -> torch.Tensor:
    """One pass along `dim` (3: columns, 2: rows) of uint8 [N, C, H, W] x: each output the taps'
    sum from 2^(precision - 1), shifted, saturated (ops/_resize.py's _resample, batched); uint8."""
    n, c, h, wd = x.shape
    shape = [n, c, h, start.shape[1]] if dim == 3 else [n, c, start.shape[1], wd]
    view = (lambda t: t[:, None, None, :]) if dim == 3 else (lambda t: t[:, None, :, None])
    acc = torch.zeros(shape, dtype=torch.int32, device=x.device)
    last = (sizes - 1)[:, None]
    for t in range(w.shape[2]):
        index = view(torch.minimum(start + t, last)).expand(shape)
        acc += x.gather(dim, index).int() * view(w[..., t].int())
    shift = precision.int().view(-1, 1, 1, 1)
    return ((acc + (torch.ones_like(shift) << (shift - 1))) >> shift).clamp_(0, 255).to(torch.uint8)


def _resized(windows: list[torch.Tensor], rows: list, oh: int, ow: int, antialias: bool,
             dev: torch.device) -> torch.Tensor:
    """Each whole window resized, placed and flipped as its checked row says, into uint8 [n, 3, oh, ow]."""
    n = len(windows)
    hs, ws = [r.height for r in rows], [r.width for r in rows]
    info = torch.tensor([hs, ws, *zip(*((r.place.height, r.place.width, r.place.top, r.place.left, int(r.hflip),
                                         int(r.place.vflip)) for r in rows))], dtype=torch.int64).to(dev)
    height, width, rh, rw, top, left, hflip, vflip = info
    x = torch.zeros(n, 3, max(hs), max(ws), dtype=torch.uint8, device=dev)  # the batch padded to its largest window
    for i, win in enumerate(windows):
        x[i, :, :hs[i], :ws[i]] = win
    y = _resample(x, *axis_tables(width, rw, antialias, hflip.bool(), left, ow), width, 3)
    y = _resample(y, *axis_tables(height, rh, antialias, torch.zeros_like(vflip, dtype=torch.bool), top, oh), height, 2)
    return torch.where(vflip.bool().view(-1, 1, 1, 1), y.flip(2), y)


def resized_crop_windows(windows: list[torch.Tensor], geometry: torch.Tensor, out: torch.Tensor,
                         antialias: bool = True, scale: float = 1.0, mean: list[float] | None = None,
                         std: list[float] | None = None) -> torch.Tensor:
    """``resized_crop_batch(windows, geometry, out, "CHW", antialias, scale, mean, std)`` on out's
    device, batched, each uint8 CHW window read whole (the table's top and left 0, its height and
    width the window's): resized into out[i], flipped and placed as its row says, with the op's bits.

    Args:
        windows: uint8 ``[3, h_i, w_i]`` tensors on out's device (views are fine).
        geometry: the op's int64 table ``[N, len(GEOMETRY_COLUMNS)]`` (on the CPU; _resize_checks.py).
        out: ``[N, 3, H, W]`` uint8 / float32 / float16 / bfloat16, written and returned.
        antialias, scale, mean, std: as the op's.

    Example:
        >>> wins = [torch.randint(0, 256, (3, 50, 70), dtype=torch.uint8), torch.zeros(3, 40, 40, dtype=torch.uint8)]
        >>> table = geometry_table(2, height=[50, 40], width=[70, 40], hflip=[True, False])
        >>> resized_crop_windows(wins, table, torch.empty(2, 3, 32, 32), scale=1 / 255).shape
        torch.Size([2, 3, 32, 32])
    """
    op = "resized_crop_windows"
    if out.dim() != 4 or out.shape[1] != 3:
        raise ValueError(f"{op}: expected out to be [N, 3, H, W], got {tuple(out.shape)}")
    a = check_output(op, out.dtype, scale, mean, std, 3)
    n = out.shape[0]
    dev = out.device
    if len(windows) != n:
        raise ValueError(f"{op}: expected {n} windows (out has {n} images), got {len(windows)}")
    for i, win in enumerate(windows):
        if win.dtype != torch.uint8 or win.dim() != 3 or win.shape[0] != 3 or win.device != dev or 0 in win.shape:
            raise ValueError(f"{op}: expected windows[{i}] to be a non-empty uint8 [3, h, w] tensor on {dev}, got "
                             f"{win.dtype} {tuple(win.shape)} on {win.device}")
    # Before any memory is touched: an out-of-range row is a device-side assert on CUDA. The op's
    # checks (a RuntimeError, as csrc's), each window read whole, for an argument of this function.
    try:
        table = check_geometry(op, geometry, n)
        views = [ImageView(1, 3, int(w.shape[-2]), int(w.shape[-1]), 0, 0, 0, 0, False) for w in windows]
        rows = [check_row(op, i, row, v, out.shape[2], out.shape[3], f"windows[{i}]")
                for i, (row, v) in enumerate(zip(table, views))]
    except RuntimeError as e:
        raise ValueError(str(e)) from None
    if any(r.top or r.left or (r.height, r.width) != tuple(w.shape[1:]) for r, w in zip(rows, windows)):
        raise ValueError(f"{op}: expected each geometry row to read its window whole (top=0, left=0, its height and "
                         f"width), got {[r[:4] for r in rows]} for windows of {[tuple(w.shape[1:]) for w in windows]}")
    if n == 0:
        return out
    _, _, oh, ow = out.shape
    turned = [i for i, r in enumerate(rows) if r.transpose]
    if not turned:
        y = _resized(windows, rows, oh, ow, antialias, dev)
    else:  # the transposed windows resized to ow x oh, then turned into out's rows
        y = torch.empty(n, 3, oh, ow, dtype=torch.uint8, device=dev)
        for part, turn in (([i for i, r in enumerate(rows) if not r.transpose], False), (turned, True)):
            if part:
                made = _resized([windows[i] for i in part], [rows[i] for i in part], *((ow, oh) if turn else (oh, ow)),
                                antialias, dev)
                y[torch.tensor(part, device=dev)] = made.transpose(-2, -1) if turn else made
    if a.dtype == torch.uint8:
        return out.copy_(y)
    f = y.to(torch.float32) * torch.tensor(scale, dtype=torch.float32, device=dev)  # the kernels' float32 steps
    if a.mean is not None:
        stat = lambda s: torch.tensor(s, dtype=torch.float32, device=dev).view(-1, 1, 1)  # noqa: E731
        f = (f - stat(a.mean)) / stat(a.std)
    return out.copy_(f)
