"""core/_type_names.py: the dotted name a pack's identity records for a class."""

import collections

import fastprep.io as fio
from fastprep.core._type_names import public_type_name


class Local:
    pass


def test_fastprep_classes_are_named_by_the_face_that_exports_them():
    assert public_type_name(fio.ImageFolder) == "fastprep.io.ImageFolder"  # defined in io/sources, a private module
    assert public_type_name(fio.PackedDataset) == "fastprep.io.PackedDataset"


def test_other_classes_keep_their_module_and_qualname():
    assert public_type_name(dict) == "builtins.dict"
    assert public_type_name(collections.OrderedDict) == "collections.OrderedDict"
    assert public_type_name(Local) == f"{__name__}.Local"
