"""The `fastprep` op namespace: every schema is defined here once, whatever backend runs it.

Callers in the package use each op's `.default` overload (``torch.ops.fastprep.dilate.default``):
every op has one schema, and calling the overload skips the packet's resolution, about 0.3 us of
a small op's ~2.5 us call."""

import torch
from torch.autograd.graph import increment_version

# Held for the life of the process: dropping a Library object deregisters what it defined.
LIB = torch.library.Library("fastprep", "DEF")


def define(schema: str) -> None:
    LIB.define(schema)


def impl_any_device(name: str, fn) -> None:
    """Register a pure-torch-ops implementation used on every device that has no kernel of its
    own (CUDA, MPS, ...). A backend's CPU kernel is more specific and wins on CPU."""
    LIB.impl(name, fn, "CompositeExplicitAutograd")


# Calls inside skip the Autograd dispatch key (and its Python kernels): for buffers that never take part in a graph.
BELOW_AUTOGRAD = torch._C._AutoDispatchBelowAutograd


def call_differentiable(op, img, *args):
    """``op(img, *args)`` for a functional op whose gradient is registered in Python
    (torch.library.register_autograd: crop, random_crop, rgb_to_ycbcr, ycbcr_to_rgb, mask_fill).
    That Autograd kernel is Python run on every call, gradient or not: ~4 us of a 7 us call on a
    small image. When `img` (the ops' one floating-point input) needs no gradient, the call goes
    straight below autograd, as that kernel's own no-grad branch does, with the same result.
    When it does, under torch.compile, or when img is not a tensor (the op then names the bad
    argument), the op is called as is."""
    if (isinstance(img, torch.Tensor) and not (img.requires_grad and torch.is_grad_enabled())
            and not torch.compiler.is_compiling()):
        with BELOW_AUTOGRAD():
            return op(img, *args)
    return op(img, *args)


def writes_buffers(name: str, buffers: tuple[str, ...], writes: str) -> None:
    """The Autograd kernel of an op that writes into caller-owned `buffers` (arguments by name) and
    has no gradient: a buffer that requires grad is refused (it would be overwritten untraced), and
    after the write each buffer's version is bumped, as torch's in-place ops bump it, so a graph
    that saved one refuses to backward through the new values. `writes` says what the op writes."""
    op = getattr(torch.ops.fastprep, name).default
    positions = {a.name: i for i, a in enumerate(op._schema.arguments)}

    def kernel(keyset, *args, **kwargs):
        found = [(b, args[positions[b]] if positions[b] < len(args) else kwargs.get(b)) for b in buffers]
        if torch.is_grad_enabled():
            for b, t in found:
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    raise RuntimeError(f"{name}: {b} requires grad, but the op is not differentiable (it writes "
                                       f"{writes}); pass a buffer that does not require grad, or run it under "
                                       f"torch.no_grad()")
        result = op.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)
        for _, t in found:
            if isinstance(t, torch.Tensor):
                increment_version(t)
        return result

    LIB.impl(name, kernel, "Autograd", with_keyset=True)
