"""Import paths from before the re-filing (docs/design.md, "Layout"): `import
fastprep.window_batch` and the like still give the module, from its new home, as the same module
object (so attributes patched or read through the old path are the new module's)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

# Not here: fastprep.io.oriented, fastprep.io.pack and fastprep.warmup, which are also functions of
# their package (io.oriented, io.pack, fastprep.warmup): importing a module by that name would
# replace the function on the package.
OLD_TO_NEW = {
    "fastprep._backend": "fastprep.backends.choice",
    "fastprep._tree": "fastprep.core.tree",
    "fastprep._warnings": "fastprep.core.warning_types",
    "fastprep.args": "fastprep.core.args",
    "fastprep.bad_samples": "fastprep.core.bad_samples",
    "fastprep.collate": "fastprep.batch.collate",
    "fastprep.counter_rng": "fastprep.core.counter_rng",
    "fastprep.io.exif": "fastprep.io.jpeg.exif",
    "fastprep.io.folder": "fastprep.io.sources.folder",
    "fastprep.io.gpu": "fastprep.io.jpeg.gpu",
    "fastprep.io.hdf5": "fastprep.io.sources.hdf5",
    "fastprep.io.jpeg_file": "fastprep.io.jpeg.file",
    "fastprep.io.jpeg_scale": "fastprep.io.jpeg.scale",
    "fastprep.io.lmdb": "fastprep.io.sources.lmdb",
    "fastprep.io.pack_identity": "fastprep.io.packed.identity",
    "fastprep.io.pack_items": "fastprep.io.packed.pack_item",
    "fastprep.io.pack_lock": "fastprep.io.packed.lock",
    "fastprep.io.pack_sources": "fastprep.io.packed.pack_sources",
    "fastprep.io.pack_summary": "fastprep.io.packed.pack_summary",
    "fastprep.io.pack_writer": "fastprep.io.packed.writer",
    "fastprep.io.packed_items": "fastprep.io.packed.records",
    "fastprep.io.packed_shards": "fastprep.io.packed.shard_maps",
    "fastprep.io.shards": "fastprep.io.packed.format",
    "fastprep.io.tar_shards": "fastprep.io.sources.tar_shards",
    "fastprep.io.webdataset": "fastprep.io.sources.webdataset",
    "fastprep.io.webdataset_writer": "fastprep.io.sources.webdataset_writer",
    "fastprep.iterators": "fastprep.core.iterators",
    "fastprep.prefetch": "fastprep.batch.device_prefetcher",
    "fastprep.progress": "fastprep.core.progress",
    "fastprep.ray": "fastprep.integrations.ray",
    "fastprep.ray_sources": "fastprep.integrations.ray_sources",
    "fastprep.rng": "fastprep.core.rng",
    "fastprep.roles": "fastprep.core.roles",
    "fastprep.shared_slots": "fastprep.batch.shared_slots",
    "fastprep.slots": "fastprep.batch.slots",
    "fastprep.tools.bench_data": "fastprep.tools.bench.data",
    "fastprep.tools.bench_headline": "fastprep.tools.bench.headline",
    "fastprep.tools.bench_headline_text": "fastprep.tools.bench.headline_text",
    "fastprep.tools.bench_loader": "fastprep.tools.bench.loaders",
    "fastprep.tools.bench_port": "fastprep.tools.bench.port",
    "fastprep.tools.bench_table": "fastprep.tools.bench.table",
    "fastprep.tools.bench_usual": "fastprep.tools.bench.usual",
    "fastprep.tools.cli_types": "fastprep.tools.cli.arg_types",
    "fastprep.tools.demo_model": "fastprep.tools.diagnose.demo_model",
    "fastprep.tools.diagnose_cli": "fastprep.tools.cli.diagnose",
    "fastprep.tools.failures": "fastprep.tools.diagnose.failures",
    "fastprep.tools.feeds": "fastprep.tools.bench.feeds",
    "fastprep.tools.file_sources": "fastprep.tools.bench.file_sources",
    "fastprep.tools.measure": "fastprep.tools.diagnose.measure",
    "fastprep.tools.pack_cli": "fastprep.tools.cli.pack_command",
    "fastprep.tools.pipelines": "fastprep.tools.bench.pipelines",
    "fastprep.tools.profile_loader": "fastprep.tools.bench.profile_loader",
    "fastprep.tools.progress": "fastprep.tools.diagnose.run_plan",
    "fastprep.tools.ray_row": "fastprep.tools.bench.ray_row",
    "fastprep.tools.ray_synthetic": "fastprep.tools.bench.ray_synthetic",
    "fastprep.tools.remedies": "fastprep.tools.diagnose.raw_loading",
    "fastprep.tools.stand_ins": "fastprep.tools.diagnose.stand_ins",
    "fastprep.tools.step_input": "fastprep.tools.diagnose.step_input",
    "fastprep.tools.sweep": "fastprep.tools.bench.sweep",
    "fastprep.tools.targets": "fastprep.tools.diagnose.targets",
    "fastprep.tools.verdict": "fastprep.tools.diagnose.verdict",
    "fastprep.window_batch": "fastprep.batch.window_batch",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:  # the new module ran when it was imported
        pass


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds the old names of moved modules and loads them as their new modules."""

    def find_spec(self, fullname, path=None, target=None):
        new = OLD_TO_NEW.get(fullname)
        return None if new is None else importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())


def module_names(package: str, module: str, names: frozenset[str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of a package that replaced a module of its own name (fastprep.batch was
    a module, now fastprep.batch.compact): ``package.NAME`` for each of the module's public `names`,
    imported on first use (no import cycle through the package). Other names raise AttributeError,
    so ``from package import submodule`` still finds the submodule."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
