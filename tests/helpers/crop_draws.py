"""The windows the crop ops draw from their seeds, as the batch ops take them."""

import fastprep


def drawn(imgs, height, width, seeds, hflips=None, layout="HWC"):
    """(tops, lefts) of the windows crop_mask_ycbcr draws from `seeds` (of the flipped image where
    hflips[i]: at the mirrored columns of the image itself), as the batch op takes them."""
    tops, lefts = [], []
    for i, img in enumerate(imgs):
        H, W = img.shape[:2] if layout == "HWC" else img.shape[1:]
        top, left = fastprep.random_crop_params(H, W, height, width, seeds[i])
        tops.append(top)
        lefts.append(W - left - width if hflips and hflips[i] else left)
    return tops, lefts
