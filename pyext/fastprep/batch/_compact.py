"""CompactBatch: a batch in compact dtypes that crosses to the device cheaply and expands there.

Images stay uint8, binary masks travel as bits, labels in the smallest integer dtype, other
tensors as they are; every field's role is recorded. expand() turns it into what a model eats,
field by field by role, using torch ops only, so it runs on the GPU after the copy.
"""

from __future__ import annotations

import sys
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import torch

from fastprep.core._args import check_bool, check_int, check_real
from fastprep.core._roles import tv_module
from fastprep.core._tree import leaves, tree_map
from fastprep.transforms import to_dtype_image


@dataclass(frozen=True)
class Leaf:
    """How a collated field was stored. `role` is "image", "mask", "label", "tensor" or "other"
    (fastprep/core/_roles.py); a mask is `packed` into bits with `width` its unpacked last-dim size;
    `dtype` is a narrowed tensor's dtype before narrowing (None when it was not narrowed); `tv` the
    tv_tensors type of the samples' values ("Image", "Mask", "Video"), restored by expand()."""
    role: str
    width: int = 0
    packed: bool = False
    dtype: torch.dtype | None = None
    tv: str | None = None


_EXPANDED_ITEMSIZE = {"image": 4, "mask": 1, "label": 8}  # float32 / bool / int64


class TensorHolder(ABC):
    """A batch field that is not a tensor but holds some: the one protocol by which a CompactBatch
    lists, copies, counts and moves the tensors of such a field, so a batch of them (WindowBatch,
    whose image field is a WindowCuts: JPEG window cuts and their host tensors) keeps no tensor
    bookkeeping of its own.

    Example:
        >>> batch.tensors()          # a TensorHolder field contributes holder.tensors()
        >>> batch.pin_memory()       # ... and becomes holder.map(pin)
    """

    __slots__ = ()

    @abstractmethod
    def tensors(self) -> list[torch.Tensor]:
        """The tensors it holds (released, pooled and moved with the batch)."""

    @abstractmethod
    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> TensorHolder:
        """The same field with `fn` of its tensors (a pinned copy, a clone)."""

    @property
    @abstractmethod
    def nbytes(self) -> int:
        """Bytes that cross to a device."""

    @abstractmethod
    def to(self, device: Any, non_blocking: bool = False) -> Any:
        """What the field is on `device` (WindowCuts: its images, decoded there)."""


def _field_tensors(x: Any) -> list[torch.Tensor]:
    return [x] if isinstance(x, torch.Tensor) else x.tensors() if isinstance(x, TensorHolder) else []


class BatchPool(Protocol):
    """Where a released :class:`CompactBatch` hands its buffers back (its `pool`): a reusing
    CompactCollate's BufferPool, a Loader slot's return, a DataLoader worker's shared slot.
    ``give_batch`` is called once per batch, with all of its tensors (a slot is freed once: per
    tensor, a worker could claim it between two calls). ``release_after_copy``: the batch is
    released as soon as it is pinned (a worker's shared slot: the pinned copy is all the consumer
    sees)."""

    release_after_copy: ClassVar[bool]

    def give_batch(self, tensors: Sequence[torch.Tensor]) -> None: ...


class CompactBatch:
    """A collated batch: `data` has the samples' structure (tuple, list, dict, namedtuple) with
    compact tensors at the leaves; `spec` has the same structure with a Leaf per field (its
    role and how it is stored); `roles` is the same structure with the role names.

    After :meth:`release` the batch is gone: its buffers may already hold another batch, so every
    method and `data` raise a RuntimeError saying so (a second release() does nothing).
    """

    def __init__(self, data: Any, spec: Any, pool: BatchPool | None = None):
        self._data = data
        self.spec = spec
        self._pool = pool  # where release() hands the buffers back, if anywhere
        self._released = False
        # Batches made from this one that share its memory (to() the device it is on): released
        # with it, since its buffers may then hold another batch. Weak: a view dropped is gone.
        self._views: weakref.WeakSet[CompactBatch] = weakref.WeakSet()
        self._base: CompactBatch | None = None


    @property
    def reusable(self) -> bool:
        """Whether this batch's memory goes back to a pool for another batch once released (its
        own, or that of the batch it shares memory with)."""
        return self._pool is not None or (self._base is not None and self._base.reusable)

    @property
    def released(self) -> bool:
        return self._released

    def _check_alive(self, what: str) -> None:
        if self._released:
            raise RuntimeError(f"CompactBatch.{what}: this batch was released (by release(), by "
                               f"DevicePrefetcher(release=True) or by fastprep.Loader once the next batch "
                               f"was asked for), and its buffers may hold another batch now; keep a batch "
                               f"past that with batch.clone()")

    @property
    def data(self) -> Any:
        self._check_alive("data")
        return self._data

    def __iter__(self):
        """``images, labels = batch`` (and ``for images, labels in loader`` without expand): the
        fields of a batch of tuple (or list) samples, as collated (uint8 images, packed masks, small
        labels). A batch of dict samples is read by name: ``batch.data["image"]``."""
        data = self.data
        if isinstance(data, (tuple, list)):
            return iter(data)
        raise TypeError(f"a CompactBatch of {type(data).__name__} samples does not unpack; read its fields "
                        f"by name (batch[...] or batch.data[...]), or expand() it")

    def __getitem__(self, key: Any) -> Any:
        """``batch[1]`` or ``batch["label"]``: a field of the collated batch, as a DataLoader's batch of
        tuple or dict samples is indexed (``batch.data[key]``)."""
        return self.data[key]

    @property
    def roles(self) -> Any:
        """The role of every field ("image", "mask", "label", "tensor", "other"), in the batch's
        structure: what expand() does to it."""
        return tree_map(lambda leaf: leaf.role, self.spec)

    def release(self) -> None:
        """Hand this batch's buffers back to its CompactCollate(reuse=True) for the next batch.
        The batch must not be used afterwards; without a pool this only drops the references."""
        if self._released:
            return  # handing the buffers back twice would give two batches one buffer
        if self._pool is not None:
            # One call for the whole batch: a slot pool frees its slot once. Freeing it per tensor
            # let a worker claim the slot between two of the calls and then see it freed again
            # while its new batch was still in flight (two batches in one buffer).
            self._pool.give_batch(self.tensors())
        self._data, self._released = None, True
        for view in list(self._views):
            view.release()
        self._views.clear()

    def __getstate__(self) -> dict[str, Any]:
        # Across processes (a DataLoader worker's batch) a batch is its data, spec and pool:
        # views and bases are this process's objects.
        state = dict(self.__dict__)
        state["_views"], state["_base"] = None, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._views = weakref.WeakSet()

    def __del__(self) -> None:
        # A batch dropped unreleased (a DataLoader discarding the batches its workers made ahead
        # when a loop stops early, a consumer that never releases) hands its buffers back, so a
        # worker's slots are not lost for good; but only when nothing else holds its tensors or
        # views of them (then nobody can see the buffers change).
        try:
            if not self._released and self._pool is not None and self._data is not None \
                    and _only_held_here(self.tensors()):
                self.release()
        except Exception:  # noqa: S110 (never raise from a finaliser, at interpreter exit least of all)
            pass

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor], what: str,
             holder_fn: Callable[[TensorHolder], Any] | None = None) -> CompactBatch:
        """The batch with `fn` of every tensor and `holder_fn` (default: ``holder.map(fn)``) of every
        TensorHolder field; of this batch's class while such fields remain, else a CompactBatch."""
        self._check_alive(what)
        # The result's tensors are its own (pinned, on another device) and never return to the
        # pool; unless fn gave back this batch's memory (to() the device it is on): then it is a
        # view of this batch, released with it.
        mine = self.tensors()
        holder_fn = holder_fn or (lambda h: h.map(fn))
        data = tree_map(lambda x: fn(x) if isinstance(x, torch.Tensor) else holder_fn(x) if isinstance(x, TensorHolder)
                        else x, self._data)
        holders = any(isinstance(x, TensorHolder) for x in leaves(data))
        out = (type(self) if holders else CompactBatch)(data, self.spec)
        keys = {k for k in map(_storage_key, mine) if k is not None}
        if any(_storage_key(t) in keys for t in out.tensors()):
            out._base = self
            self._views.add(out)
        return out

    def pin_memory(self, device: Any = None) -> CompactBatch:
        """DataLoader's pin_memory protocol: the pin thread calls this on each batch."""
        del device  # pinned host memory serves every accelerator in torch >= 2.3
        pinned = self._map(lambda t: t.pin_memory(), "pin_memory")
        if self._pool is not None and self._pool.release_after_copy:
            self.release()  # a worker's shared slot: the pinned copy is all the consumer sees
        return pinned

    def clone(self) -> CompactBatch:
        """A copy that owns its tensors: keeps a batch past the buffer reuse of a reusing collate
        or a fastprep.Loader slot."""
        return self._map(lambda t: t.clone(), "clone")

    def to(self, device: Any, non_blocking: bool = False) -> CompactBatch:
        """The batch on `device` (a TensorHolder field becomes what its own to() gives there)."""
        non_blocking = check_bool(f"{type(self).__name__}.to", "non_blocking", non_blocking)
        return self._map(lambda t: t.to(device, non_blocking=non_blocking), "to",
                         lambda h: h.to(device, non_blocking))

    def tensors(self) -> list[torch.Tensor]:
        self._check_alive("tensors")
        return [t for x in leaves(self._data) for t in _field_tensors(x)]

    @property
    def nbytes(self) -> int:
        """Bytes that cross to the device (a TensorHolder field's own count)."""
        self._check_alive("nbytes")
        return sum(x.nbytes if isinstance(x, TensorHolder) else x.numel() * x.element_size()
                   for x in leaves(self._data) if isinstance(x, (TensorHolder, torch.Tensor)))

    @property
    def nbytes_expanded(self) -> int:
        """Bytes of the same batch the usual way: float32 images, bool masks, int64 labels."""
        self._check_alive("nbytes_expanded")
        total = 0

        def add(x, leaf):
            nonlocal total
            if not isinstance(x, torch.Tensor):
                return
            if leaf.role == "mask" and leaf.packed:
                total += x[..., :1].numel() * leaf.width
            elif leaf.dtype is not None:
                total += x.numel() * leaf.dtype.itemsize
            else:
                total += x.numel() * _EXPANDED_ITEMSIZE.get(leaf.role, x.element_size())

        tree_map(add, self._data, self.spec)
        return total

    def expand(self, dtype: torch.dtype = torch.float32, scale: float = 1 / 255,
               mean: Any = None, std: Any = None, channels_last: bool = False,
               num_classes: int | None = None) -> Any:
        """The batch as a model eats it, on whatever device it is on (torch ops only), field by
        field according to its role:

        - "image": uint8 -> `dtype` times `scale`; with the default scale 1/255 these are exactly
          the bits of torchvision v2's ``ToDtype(dtype, scale=True)`` (and fastprep's
          :class:`~fastprep.transforms.ToDtype`). Then (x - mean) / std per channel (dim 1)
          when given, optionally channels_last.
        - "mask": bits -> bool of the collated width, bit for bit.
        - "label": int64, or one-hot rows of `dtype` when num_classes is given.
        - "tensor": as collated, bit for bit; a field narrowed by ``float_dtype`` -> `dtype`.
        - "boxes": the list of the samples' BoundingBoxes / KeyPoints, as collated.
        - "other" (strings, ...): as collated.

        Fields whose samples were tv_tensors Images, Masks or Videos come back as those types
        when torchvision imports (the batched tensor wrapped, e.g. ``tv_tensors.Image`` of
        ``[N, C, H, W]``); plain tensors otherwise.
        """
        self._check_alive("expand")
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise ValueError(f"expand: expected a floating dtype, got {dtype}")
        scale = check_real("expand", "scale", scale)
        channels_last = check_bool("expand", "channels_last", channels_last)
        if num_classes is not None:
            num_classes = check_int("expand", "num_classes", num_classes, 1)

        reusable = self.reusable

        def one(x, leaf):
            out = expand_field(x, leaf)
            if reusable and isinstance(out, torch.Tensor) and _shares_memory(out, x):
                out = out.clone()  # this batch's buffers will hold another batch: never hand them out
            if leaf.tv is not None and isinstance(out, torch.Tensor):
                tv = tv_module()
                return out if tv is None else out.as_subclass(getattr(tv, leaf.tv))
            return out

        def expand_field(x, leaf):
            if not isinstance(x, torch.Tensor):
                return x
            if leaf.role == "image":
                return _expand_image(x, dtype, scale, mean, std, channels_last)
            if leaf.role == "mask":
                return torch.ops.fastprep.unpack_bits.default(x, leaf.width, -1, "little") if leaf.packed else x
            if leaf.role == "label":
                labels = x.long()
                if num_classes is None:
                    return labels
                return torch.nn.functional.one_hot(labels, num_classes).to(dtype)
            if leaf.role == "tensor" and leaf.dtype is not None:
                return x.to(dtype)
            return x

        return tree_map(one, self._data, self.spec)

    def __repr__(self) -> str:
        if self._released:
            return "CompactBatch(released)"
        desc = tree_map(lambda x, leaf: f"{leaf.role}{tuple(x.shape)}:{x.dtype}"
                        if isinstance(x, torch.Tensor) else type(x).__name__, self._data, self.spec)
        return f"CompactBatch({desc}, nbytes={self.nbytes})"


_storage_use_count = getattr(torch._C, "_storage_Use_Count", None)
_OWN_REFS = 4  # a batch tensor's references inside _only_held_here: the batch, the list, the loop, the call


def _only_held_here(tensors: list[torch.Tensor]) -> bool:
    """Whether `tensors` (a dying batch's) are referenced by nothing but the batch: no Python
    reference to a tensor besides the batch's own, and no other tensor (a view, a slice) on its
    storage. Not seen: references held only in C++ (an autograd graph's saved tensors). Without
    torch's use count (a private API), False: the buffers are then never handed back."""
    if _storage_use_count is None:
        return False
    per_storage: dict[int, int] = {}
    for t in tensors:
        key = t.untyped_storage()._cdata
        per_storage[key] = per_storage.get(key, 0) + 1
    for t in tensors:
        # A field that appears twice in the batch is one tensor held twice more.
        if sys.getrefcount(t) > _OWN_REFS + 2 * (sum(x is t for x in tensors) - 1):
            return False
    # Each of the batch's tensors holds its storage once, and so does the wrapper made here.
    return all(_storage_use_count(t.untyped_storage()._cdata) <= per_storage[t.untyped_storage()._cdata] + 1
               for t in tensors)


def _storage_key(t: torch.Tensor) -> tuple[torch.device, int] | None:
    """Where t's memory is (its device and storage), None for an empty storage (no memory to share)."""
    storage = t.untyped_storage()
    return (t.device, storage.data_ptr()) if storage.nbytes() > 0 else None


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    key = _storage_key(a)
    return key is not None and key == _storage_key(b)


def _expand_image(x, dtype, scale, mean, std, channels_last):
    if scale == 1 / 255:
        out = to_dtype_image(x, dtype, scale=True)  # torchvision's bits: x.to(dtype).mul_(1.0 / 255)
    else:
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
