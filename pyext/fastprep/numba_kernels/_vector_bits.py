"""The 64 bytes <-> 64-bit word moves of the mask kernels, as LLVM vector IR: the Numba side of
the intrinsics in csrc/kernels/random_mask.cpp (vptestmb, vpmovm2b) and pack_bits.cpp.

Numba reaches no intrinsics, and LLVM's loop vectoriser does not turn a bit-at-a-time loop into a
mask-register move. It does lower these few IR instructions to one: a load of ``<64 x i8>``, an
``icmp ne 0`` giving ``<64 x i1>`` and a bitcast to ``i64`` is a byte test into a mask register on
AVX-512 (two compares and movemasks on AVX2, four on SSE2), and the reverse a masked move of ones.
The bits are those of the scalar loops they replace on every CPU: bit b of the word is byte b
(little-endian, as everywhere in fastprep), or byte 8k + 7 - b' for bit 8k + b' with the "big" bit
order of pack_bits.

Each function takes 1-D C-contiguous uint8 arrays and the index of the first of the 64 bytes;
the caller keeps ``start + 64 <= a.size`` (there is no bounds check, as in the C++). The two at the
end serve the packs across planes (pack_bits' dim != last): OR one plane's bits into 64 bytes as
bit `value`, and take bit `shift` of 64 bytes as 0/1 bytes.
"""

from __future__ import annotations

import sys

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

assert sys.byteorder == "little", "the words' bytes are taken little-endian"

_I8X64 = ir.VectorType(ir.IntType(8), 64)
_I1X64 = ir.VectorType(ir.IntType(1), 64)
# Byte 8k + b <-> byte 8k + 7 - b: "big" bit order is the little order of the octet-reversed bytes.
_REVERSE_OCTETS = ir.Constant(ir.VectorType(ir.IntType(32), 64), [8 * (i // 8) + 7 - i % 8 for i in range(64)])


def _is_byte_row(a) -> bool:
    return isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C" and a.dtype == types.uint8


def _pointer(context, builder, array_type, array, start):
    """An <64 x i8>* at element `start` of a 1-D C-contiguous uint8 array."""
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [start]), _I8X64.as_pointer())


def _splat_byte(builder, value, value_type):
    """An integer argument's low byte in all 64 lanes."""
    byte = builder.trunc(value, ir.IntType(8)) if value_type.bitwidth > 8 else value
    one = builder.insert_element(ir.Constant(_I8X64, ir.Undefined), byte, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(one, ir.Constant(_I8X64, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), 64), [0] * 64))


def _reverse_octets(builder, v):
    return builder.shuffle_vector(v, ir.Constant(_I8X64, None), _REVERSE_OCTETS)


def _bytes_to_word(big: bool):
    def typer(typingctx, a, start):
        if not _is_byte_row(a) or not isinstance(start, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            v = builder.load(_pointer(context, builder, sig.args[0], args[0], args[1]), align=1)
            if big:
                v = _reverse_octets(builder, v)
            nonzero = builder.icmp_unsigned("!=", v, ir.Constant(_I8X64, None))
            return builder.bitcast(nonzero, ir.IntType(64))

        return types.uint64(a, start), codegen

    return intrinsic(typer)


def _word_to_bytes(big: bool):
    def typer(typingctx, word, a, start):
        if not isinstance(word, types.Integer) or word.bitwidth != 64 or not _is_byte_row(a):
            return None
        if not isinstance(start, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            v = builder.zext(builder.bitcast(args[0], _I1X64), _I8X64)
            if big:
                v = _reverse_octets(builder, v)
            builder.store(v, _pointer(context, builder, sig.args[1], args[1], args[2]), align=1)
            return context.get_dummy_value()

        return types.void(word, a, start), codegen

    return intrinsic(typer)


# bools64_to_word(a, i): uint64 whose bit b is a[i + b] != 0.
bools64_to_word = _bytes_to_word(big=False)
# The same with each byte's bits in "big" order: bit 8k + b is a[i + 8k + 7 - b] != 0.
bools64_to_word_big = _bytes_to_word(big=True)
# word_to_bools64(w, a, i): a[i + b] = bit b of w, for b in 0..63.
word_to_bools64 = _word_to_bytes(big=False)
# The same in "big" order: a[i + 8k + 7 - b] = bit 8k + b of w.
word_to_bools64_big = _word_to_bytes(big=True)


def _or_bits_typer(typingctx, word, value, a, start):
    if not (isinstance(word, types.Integer) and word.bitwidth == 64 and isinstance(value, types.Integer)):
        return None
    if not _is_byte_row(a) or not isinstance(start, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        ptr = _pointer(context, builder, sig.args[2], args[2], args[3])
        splat = _splat_byte(builder, args[1], sig.args[1])
        picked = builder.select(builder.bitcast(args[0], _I1X64), splat, ir.Constant(_I8X64, None))
        builder.store(builder.or_(builder.load(ptr, align=1), picked), ptr, align=1)
        return context.get_dummy_value()

    return types.void(word, value, a, start), codegen


def _bit_plane_typer(typingctx, a, start, shift, out, ostart):
    if not (_is_byte_row(a) and _is_byte_row(out)):
        return None
    if not all(isinstance(t, types.Integer) for t in (start, shift, ostart)):
        return None

    def codegen(context, builder, sig, args):
        v = builder.load(_pointer(context, builder, sig.args[0], args[0], args[1]), align=1)
        bits = builder.and_(builder.lshr(v, _splat_byte(builder, args[2], sig.args[2])), ir.Constant(_I8X64, [1] * 64))
        builder.store(bits, _pointer(context, builder, sig.args[3], args[3], args[4]), align=1)
        return context.get_dummy_value()

    return types.void(a, start, shift, out, ostart), codegen


# or_bits64(w, value, a, i): a[i + b] |= value where bit b of w is set (value: one byte, 0..255).
or_bits64 = intrinsic(_or_bits_typer)
# bit_plane64(a, i, shift, out, o): out[o + b] = (a[i + b] >> shift) & 1 for b in 0..63 (shift < 8).
bit_plane64 = intrinsic(_bit_plane_typer)
