"""Import paths from before the re-filing (docs/design.md, "Moved in the re-filing") keep working:
each old module name loads the new module itself, and a package that took a module's name still
gives that module's names."""

import importlib
import subprocess
import sys

import pytest

import fastprep
from fastprep.core.moved import OLD_TO_NEW

pytestmark = pytest.mark.one_backend


@pytest.mark.parametrize("old", sorted(OLD_TO_NEW))
def test_an_old_module_path_is_the_new_module(old):
    if old.split(".")[1] in ("integrations", "ray", "ray_sources") or old.split(".")[-1].startswith("ray_"):
        pytest.importorskip("ray")
    assert importlib.import_module(old) is importlib.import_module(OLD_TO_NEW[old])


def test_no_old_path_shadows_a_public_name_of_its_package():
    """Importing a submodule sets it on its package: an old path that is also a function there
    (fastprep.io.pack) would replace the function."""
    for old in OLD_TO_NEW:
        parent, leaf = old.rsplit(".", 1)
        assert leaf not in getattr(importlib.import_module(parent), "__all__", ()), f"{old} is a public name of {parent}"


def test_the_old_paths_of_public_names():
    from fastprep.batch import CompactBatch  # fastprep.batch was a module
    from fastprep.io.packed import PackedDataset
    from fastprep.tools.diagnose import find_bottleneck

    assert CompactBatch is fastprep.CompactBatch and PackedDataset is fastprep.io.PackedDataset
    assert find_bottleneck.__module__ == "fastprep.tools.diagnose.bottleneck"
    with pytest.raises(AttributeError, match="fastprep.batch' has no attribute 'nothing'"):
        fastprep.batch.nothing  # noqa: B018


def test_a_fresh_process_imports_an_old_path_first():
    """`import fastprep.window_batch` as the first import (the finder is installed by fastprep's import)."""
    code = "import fastprep.window_batch as w, fastprep.batch.window_batch as n; print(w is n, w.WindowBatch.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "fastprep.batch.window_batch"]
