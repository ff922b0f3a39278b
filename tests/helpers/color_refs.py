"""The exact RGB <-> YCbCr reference on integers (the spec's 6-decimal constants scaled by 10^6):
what the colour ops and the fused ops that end in YCbCr are compared with."""

import numpy as np

M = 1_000_000  # the spec's constants have 6 decimals: scaled by 10^6 they are exact integers


def _round_half_up(num, den=M):
    """floor(num / den + 1/2) clamped to [0, 255], on exact integers."""
    return np.clip(np.floor_divide(2 * num + den, 2 * den), 0, 255).astype(np.uint8)


def ref_u8(a, b, c, forward):
    a, b, c = (np.asarray(t, dtype=np.int64) for t in (a, b, c))
    if forward:
        return (_round_half_up(299000 * a + 587000 * b + 114000 * c),
                _round_half_up(-168736 * a - 331264 * b + 500000 * c + 128 * M),
                _round_half_up(500000 * a - 418688 * b - 81312 * c + 128 * M))
    b, c = b - 128, c - 128
    return (_round_half_up(M * a + 1402000 * c),
            _round_half_up(M * a - 344136 * b - 714136 * c),
            _round_half_up(M * a + 1772000 * b))
