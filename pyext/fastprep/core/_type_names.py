"""A class's dotted name as its users import it: what a pack's identity and error messages record.

fastprep's own classes live in private modules (``fastprep.io.sources._folder``) and are imported
from a package's face (``fastprep.io``): the name is the face's, so a pack's identity does not
change when an implementation module moves. Other classes keep ``module.qualname``.
"""

from __future__ import annotations

import sys


def public_type_name(kind: type) -> str:
    """``fastprep.io.ImageFolder`` for fastprep's ImageFolder (the nearest package up its module's
    path that exports it, among those imported), else ``kind.__module__ + "." + kind.__qualname__``.

    Example:
        >>> public_type_name(fastprep.io.ImageFolder), public_type_name(dict)
        ('fastprep.io.ImageFolder', 'builtins.dict')
    """
    module = kind.__module__ or ""
    parts = module.split(".")
    if parts[0] == "fastprep" and "." not in kind.__qualname__:
        for i in range(len(parts) - 1, 0, -1):
            face = sys.modules.get(".".join(parts[:i]))
            if kind.__qualname__ in getattr(face, "__all__", ()) and getattr(face, kind.__qualname__, None) is kind:
                return f"{face.__name__}.{kind.__qualname__}"
    return f"{module}.{kind.__qualname__}"
