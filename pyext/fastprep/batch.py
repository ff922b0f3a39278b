"""CompactBatch: a batch in compact dtypes that crosses to the device cheaply and decodes there.

Images stay uint8, binary masks travel as bits, labels in the smallest integer dtype. decode()
turns it into what a model eats using torch ops only, so it runs on the GPU after the copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fastprep._tree import leaves, tree_map


@dataclass(frozen=True)
class Leaf:
    """How a collated field was stored: `kind` is "image", "mask", "label", "float" or "other";
    `width` is a packed mask's unpacked last-dim size; `dtype` the dtype before narrowing."""
    kind: str
    width: int = 0
    dtype: torch.dtype | None = None


_EXPANDED_ITEMSIZE = {"image": 4, "mask": 1, "label": 8}  # float32 / bool / int64


class CompactBatch:
    """A collated batch: `data` has the samples' structure (tuple, list, dict, namedtuple) with
    compact tensors at the leaves; `layout` has the same structure with a Leaf per field."""

    def __init__(self, data: Any, layout: Any, pool: Any = None):
        self.data = data
        self.layout = layout
        self._pool = pool  # the BufferPool of a reusing CompactCollate, if any

    def release(self) -> None:
        """Hand this batch's buffers back to its CompactCollate(reuse=True) for the next batch.
        The batch must not be used afterwards; without a pool this only drops the references."""
        if self._pool is not None:
            for t in self.tensors():
                self._pool.give(t)
        self.data = None

    def _map(self, fn) -> CompactBatch:
        # The result owns new tensors (pinned or on another device): they never return to the pool.
        return CompactBatch(tree_map(lambda x: fn(x) if isinstance(x, torch.Tensor) else x, self.data),
                            self.layout)

    def pin_memory(self, device: Any = None) -> CompactBatch:
        """DataLoader's pin_memory protocol: the pin thread calls this on each batch."""
        del device  # pinned host memory serves every accelerator in torch >= 2.3
        pinned = self._map(lambda t: t.pin_memory())
        if getattr(self._pool, "release_after_copy", False):
            self.release()  # a worker's shared slot: the pinned copy is all the consumer sees
        return pinned

    def clone(self) -> CompactBatch:
        """A copy that owns its tensors: keeps a batch past the buffer reuse of a reusing collate
        or a fastprep.Loader slot."""
        return self._map(lambda t: t.clone())

    def to(self, device: Any, non_blocking: bool = False) -> CompactBatch:
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def tensors(self) -> list[torch.Tensor]:
        if self.data is None:
            raise RuntimeError("CompactBatch: this batch was released")
        return [x for x in leaves(self.data) if isinstance(x, torch.Tensor)]

    @property
    def nbytes(self) -> int:
        """Bytes that cross to the device."""
        return sum(t.numel() * t.element_size() for t in self.tensors())

    @property
    def nbytes_expanded(self) -> int:
        """Bytes of the same batch the usual way: float32 images, bool masks, int64 labels."""
        total = 0

        def add(x, leaf):
            nonlocal total
            if not isinstance(x, torch.Tensor):
                return
            if leaf.kind == "mask":
                total += x[..., :1].numel() * leaf.width
            elif leaf.kind == "float":
                total += x.numel() * torch.empty((), dtype=leaf.dtype).element_size()
            else:
                total += x.numel() * _EXPANDED_ITEMSIZE.get(leaf.kind, x.element_size())

        tree_map(add, self.data, self.layout)
        return total

    def decode(self, dtype: torch.dtype = torch.float32, scale: float = 1 / 255,
               mean: Any = None, std: Any = None, channels_last: bool = False,
               num_classes: int | None = None) -> Any:
        """The batch as a model eats it, on whatever device it is on (torch ops only).

        images: uint8 -> `dtype`, times `scale`, then (x - mean) / std per channel (dim 1) when
        given, optionally channels_last; masks: bits -> bool of the collated width; labels ->
        int64, or one-hot rows of `dtype` when num_classes is given; narrowed floats -> `dtype`.
        """
        if not dtype.is_floating_point:
            raise ValueError(f"decode: expected a floating dtype, got {dtype}")

        def one(x, leaf):
            if not isinstance(x, torch.Tensor):
                return x
            if leaf.kind == "image":
                return _decode_image(x, dtype, scale, mean, std, channels_last)
            if leaf.kind == "mask":
                return torch.ops.fastprep.unpack_bits(x, leaf.width, -1, "little")
            if leaf.kind == "label":
                labels = x.long()
                if num_classes is None:
                    return labels
                return torch.nn.functional.one_hot(labels, num_classes).to(dtype)
            if leaf.kind == "float":
                return x.to(dtype)
            return x

        return tree_map(one, self.data, self.layout)

    def __repr__(self) -> str:
        desc = tree_map(lambda x, leaf: f"{leaf.kind}{tuple(x.shape)}:{x.dtype}"
                        if isinstance(x, torch.Tensor) else type(x).__name__, self.data, self.layout)
        return f"CompactBatch({desc}, nbytes={self.nbytes})"


def _decode_image(x, dtype, scale, mean, std, channels_last):
    out = x.to(dtype)
    if scale != 1:
        out.mul_(scale)
    if mean is not None or std is not None:
        shape = [1, -1] + [1] * (out.dim() - 2)  # per channel, channels at dim 1
        if mean is not None:
            out.sub_(torch.as_tensor(mean, dtype=dtype, device=out.device).view(shape))
        if std is not None:
            out.div_(torch.as_tensor(std, dtype=dtype, device=out.device).view(shape))
    if channels_last and out.dim() == 4:
        out = out.contiguous(memory_format=torch.channels_last)
    return out
