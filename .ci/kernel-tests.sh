# The kernels' tests (one file per op family: bits against a plain reference, both layouts, bad
# inputs), sourced by .ci/isa (run once per ISA level) and .ci/compat (with the rest of the op
# layer's tests, per torch release): a new op's test file is added here once.
kernel_tests=(tests/test_color.py tests/test_crop.py tests/test_crop_mask_ycbcr.py tests/test_dilate.py
              tests/test_mask_fill.py tests/test_pack_bits.py tests/test_random_mask.py tests/test_hflip.py
              tests/test_resize.py)
