"""The op contract: schemas, argument checks, fake kernels and torch-ops implementations, one
module per op family (the families of ops/_registry.py). Importing it defines every
``torch.ops.fastprep`` schema; the backends (the C++ library, ``fastprep.numba_kernels``) import
this package to register kernels, never the other way round.
"""

import importlib

import fastprep.ops._registry as _registry

__all__: list[str] = []
for _family in _registry.FAMILIES:
    _module = importlib.import_module(f"fastprep.ops._{_family}")
    for _name in _module.__all__:
        globals()[_name] = getattr(_module, _name)
        __all__.append(_name)
del _family, _module, _name
