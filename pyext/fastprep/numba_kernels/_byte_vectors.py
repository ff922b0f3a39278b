"""16-byte vectors as LLVM vector IR: the Numba side of csrc/kernels/transpose.h (16 x 16 byte
transposes) and resize_simd.h (fixed-point weighted sums of 16 bytes at a time).

LLVM's loop vectoriser leaves a transpose as byte moves (a column read 16 rows apart), and keeps a
sum over taps in memory when its loop is outside the loop over the lanes. Written as vector IR,
the transpose is the shufflevector network of transpose.h's unpacks, which LLVM lowers to the same
punpck* instructions (SSE2 and up), and a sum is one register per 16 lanes: a zero-extending load,
a multiply and an add per tap. Both are copies or exact integer arithmetic, so the bytes are those
of the scalar loops on every CPU.

Rows are given as a 1-D int64 array of element offsets (as the C++ kernels' row pointers), so that
a block of rows need not be evenly spaced. Arrays are 1-D C-contiguous; the callers keep every
index in range (there is no bounds check, as in the C++).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_I8, _I32, _I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_BYTES = ir.VectorType(_I8, 16)
_LANES = ir.VectorType(_I32, 16)


def _array(a, dtype) -> bool:
    return isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C" and a.dtype == dtype


def _data(context, builder, array_type, array):
    return context.make_array(array_type)(context, builder, array).data


def _at(builder, data, index):
    """The 16 bytes from element `index` of a uint8 array's data, as a <16 x i8>*."""
    return builder.bitcast(builder.gep(data, [index]), _BYTES.as_pointer())


def _i64(builder, value, value_type):
    if value_type.bitwidth == 64:
        return value
    return builder.sext(value, _I64) if value_type.signed else builder.zext(value, _I64)


def _unpack(builder, a, b, bits, high):
    """punpck{l,h}{bw,wd,dq,qdq}: the low (high) halves of a and b interleaved in `bits`-bit units."""
    n = 128 // bits
    unit = ir.VectorType(ir.IntType(bits), n)
    first = n // 2 if high else 0
    order = [lane for i in range(n // 2) for lane in (first + i, n + first + i)]
    shuffled = builder.shuffle_vector(builder.bitcast(a, unit), builder.bitcast(b, unit),
                                      ir.Constant(ir.VectorType(_I32, n), order))
    return builder.bitcast(shuffled, _BYTES)


def _transpose16_typer(typingctx, src, src_rows, src_col, dst, dst_rows, dst_col):
    if not (_array(src, types.uint8) and _array(dst, types.uint8)):
        return None
    if not (_array(src_rows, types.int64) and _array(dst_rows, types.int64)):
        return None
    if not (isinstance(src_col, types.Integer) and isinstance(dst_col, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        src_t, rows_t, col_t, dst_t, drows_t, dcol_t = sig.args
        s, rows = _data(context, builder, src_t, args[0]), _data(context, builder, rows_t, args[1])
        d, drows = _data(context, builder, dst_t, args[3]), _data(context, builder, drows_t, args[4])
        col, dcol = _i64(builder, args[2], col_t), _i64(builder, args[5], dcol_t)

        def row(data, offsets, i, column):
            return _at(builder, data, builder.add(builder.load(builder.gep(offsets, [_I64(i)])), column))

        a = [builder.load(row(s, rows, r, col), align=1) for r in range(16)]
        # transpose.h's network: bytes of rows (2k, 2k + 1), then words, then dwords, then qwords.
        t = [None] * 16
        for k in range(8):
            t[k] = _unpack(builder, a[2 * k], a[2 * k + 1], 8, False)
            t[k + 8] = _unpack(builder, a[2 * k], a[2 * k + 1], 8, True)
        for h in range(2):
            for q in range(4):
                a[8 * h + q] = _unpack(builder, t[8 * h + 2 * q], t[8 * h + 2 * q + 1], 16, False)
                a[8 * h + q + 4] = _unpack(builder, t[8 * h + 2 * q], t[8 * h + 2 * q + 1], 16, True)
        for g in range(4):
            lo01 = _unpack(builder, a[4 * g], a[4 * g + 1], 32, False)
            hi01 = _unpack(builder, a[4 * g], a[4 * g + 1], 32, True)
            lo23 = _unpack(builder, a[4 * g + 2], a[4 * g + 3], 32, False)
            hi23 = _unpack(builder, a[4 * g + 2], a[4 * g + 3], 32, True)
            out = (_unpack(builder, lo01, lo23, 64, False), _unpack(builder, lo01, lo23, 64, True),
                   _unpack(builder, hi01, hi23, 64, False), _unpack(builder, hi01, hi23, 64, True))
            for i, v in enumerate(out):
                builder.store(v, row(d, drows, 4 * g + i, dcol), align=1)
        return context.get_dummy_value()

    return types.void(src, src_rows, src_col, dst, dst_rows, dst_col), codegen


def _splat(builder, value):
    one = builder.insert_element(ir.Constant(_LANES, ir.Undefined), value, _I32(0))
    return builder.shuffle_vector(one, ir.Constant(_LANES, ir.Undefined), ir.Constant(_LANES, [0] * 16))


def _weighted_sum16_typer(typingctx, src, taps, base, w, w_base, count, precision, out, o):
    if not (_array(src, types.uint8) and _array(out, types.uint8) and _array(taps, types.int64)):
        return None
    if not _array(w, types.int32):
        return None
    if not all(isinstance(v, types.Integer) for v in (base, w_base, count, precision, o)):
        return None

    def codegen(context, builder, sig, args):
        src_t, taps_t, base_t, w_t, wb_t, count_t, prec_t, out_t, o_t = sig.args
        s, offsets = _data(context, builder, src_t, args[0]), _data(context, builder, taps_t, args[1])
        weights, dst = _data(context, builder, w_t, args[3]), _data(context, builder, out_t, args[7])
        base, w_base = _i64(builder, args[2], base_t), _i64(builder, args[4], wb_t)
        precision = builder.trunc(_i64(builder, args[6], prec_t), _I32)
        acc = cgutils.alloca_once(builder, _LANES)  # a register once LLVM promotes it
        builder.store(_splat(builder, builder.shl(_I32(1), builder.sub(precision, _I32(1)))), acc)
        with cgutils.for_range(builder, _i64(builder, args[5], count_t)) as loop:
            k = loop.index
            at = builder.add(base, builder.load(builder.gep(offsets, [k])))
            pixels = builder.zext(builder.load(_at(builder, s, at), align=1), _LANES)
            wk = _splat(builder, builder.load(builder.gep(weights, [builder.add(w_base, k)])))
            builder.store(builder.add(builder.load(acc), builder.mul(pixels, wk)), acc)
        v = builder.ashr(builder.load(acc), _splat(builder, precision))
        zero, top = ir.Constant(_LANES, [0] * 16), ir.Constant(_LANES, [255] * 16)
        v = builder.select(builder.icmp_signed("<", v, zero), zero, v)
        v = builder.select(builder.icmp_signed(">", v, top), top, v)
        builder.store(builder.trunc(v, _BYTES), _at(builder, dst, _i64(builder, args[8], o_t)), align=1)
        return context.get_dummy_value()

    return types.void(src, taps, base, w, w_base, count, precision, out, o), codegen


# transpose16(src, src_rows, src_col, dst, dst_rows, dst_col):
# dst[dst_rows[i] + dst_col + r] = src[src_rows[r] + src_col + i] for i, r in [0, 16), i.e. bytes
# [src_col, src_col + 16) of the 16 rows at src_rows become the 16 rows at dst_rows (transpose.h).
transpose16 = intrinsic(_transpose16_typer)
# weighted_sum16(src, taps, base, w, w_base, count, precision, out, o): for i in [0, 16),
# out[o + i] = clamp((2^(precision - 1) + sum_k w[w_base + k] * src[base + taps[k] + i]) >> precision,
# 0, 255) over k < count, in int32 (resize_simd.h's saturate; count >= 0, 1 <= precision < 32).
weighted_sum16 = intrinsic(_weighted_sum16_typer)
