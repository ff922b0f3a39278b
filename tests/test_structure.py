"""The package's architecture, checked: the op contract (fastprep.ops) never imports a backend, the
library never imports the tooling, no module imports another's private names, no import cycles,
and the op registry lists exactly the ops that exist, each with every piece an op must have."""

import ast
import functools
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

import fastprep
from fastprep.ops._registry import OPS

pytestmark = pytest.mark.one_backend

PACKAGE = Path(fastprep.__file__).parent
# What the contract may import: itself and core (which imports only core).
CONTRACT_MAY_IMPORT = ("fastprep.ops", "fastprep.core")
# The layers, bottom up: a module may import its own layer and those below (docs/design.md's
# picture). fastprep/__init__.py (the public names), ray.py (fastprep.ray: integrations.ray's public
# names) and __main__ sit above them all.
PUBLIC_FACES = ("fastprep", "fastprep.ray", "fastprep.__main__")
LAYERS = [
    ("fastprep.core", "fastprep.errors"),
    ("fastprep.ops",),
    ("fastprep.numba_kernels", "fastprep.backends"),
    ("fastprep.io",),
    ("fastprep.transforms",),
    ("fastprep.batch",),
    ("fastprep.loader",),
    ("fastprep.monitoring", "fastprep.integrations"),
    ("fastprep.tools",),
]



def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) for every fastprep import in the file, at any depth (lazy ones too)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("fastprep")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fastprep"):
            out.append((node.module, [a.name for a in node.names]))
    return out


@functools.cache
def _graph() -> dict[str, set[str]]:
    """Module -> the fastprep modules it imports (a `from pkg import sub` counts as pkg.sub)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for module, names in _imports(path):
            subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules]
            deps.update(subs or [module])
        graph[name] = deps - {name}
    return graph


def test_the_contract_never_imports_a_backend():
    for name, deps in _graph().items():
        if name == "fastprep.ops" or name.startswith("fastprep.ops."):
            bad = [d for d in deps if not d.startswith(CONTRACT_MAY_IMPORT)]
            assert not bad, f"{name} imports {bad}: the contract may import only {CONTRACT_MAY_IMPORT}"


def _layer(module: str, layers: list[tuple[str, ...]] = LAYERS) -> int | None:
    """The rank of `module`'s layer in `layers` (bottom up), None when it is in none."""
    for rank, packages in enumerate(layers):
        if any(module == p or module.startswith(p + ".") for p in packages):
            return rank
    return None


def test_every_module_lives_in_a_layer():
    """No loose modules at the top: a module's folder says which layer it is in."""
    loose = [m for m in _graph() if _layer(m) is None and m not in PUBLIC_FACES]
    assert not loose, f"modules outside the layers {LAYERS}: {loose}"


def test_no_module_imports_a_layer_above_its_own():
    bad = [(m, d) for m, deps in _graph().items() if _layer(m) is not None
           for d in deps if _layer(d) is not None and _layer(d) > _layer(m)]
    assert not bad, f"imports that point up the layers (importer, imported): {bad}"


# Layers inside a layer, bottom up. The tooling: the sweeps (bench) and the caching method
# (diagnose) measure with tools.measuring and never import each other both ways; the CLI on top.
TOOL_LAYERS = [
    ("fastprep.tools.measuring", "fastprep.tools.photos"),
    ("fastprep.tools.bench",),
    ("fastprep.tools.diagnose", "fastprep.tools._plotting"),
    ("fastprep.tools.cli",),
]
# io: what every reader uses, JPEG decoding, the sources' common ground, the pack format and the
# store interface (fastprep.io._store), then the sources and the object stores, then packs (which
# read through the stores and pack the sources).
IO_LAYERS = [
    ("fastprep.io._files", "fastprep.io._windowed"),
    ("fastprep.io.jpeg",),
    ("fastprep.io._source", "fastprep.io._encode", "fastprep.io._pack_format", "fastprep.io._store"),
    ("fastprep.io.sources", "fastprep.io.remote"),
    ("fastprep.io.packed",),
]


@pytest.mark.parametrize(("package", "layers"), [("fastprep.tools", TOOL_LAYERS), ("fastprep.io", IO_LAYERS)])
def test_the_layers_inside_a_layer_point_down(package, layers):
    rank = functools.partial(_layer, layers=layers)
    graph = _graph()
    inside = [m for m in graph if m.startswith(package + ".")]
    assert not [m for m in inside if rank(m) is None], f"{package} modules outside {layers}"
    bad = [(m, d) for m in inside for d in graph[m] if rank(d) is not None and rank(d) > rank(m)]
    assert not bad, f"{package} imports that point up (importer, imported): {bad}"


# The modules that read or write a pack through a store or a pack source (fastprep.io._store,
# fastprep.io.packed._local_pack), and the monitor, which reads what a dataset declares: none of
# them asks whether a pack is local or remote, or makes a store of a kind itself.
ONE_INTERFACE = ["io/packed/_dataset.py", "io/packed/_shard_maps.py", "io/packed/_read_ahead.py", "io/remote/_cache.py",
                 "io/packed/_upload.py", "monitoring/_pipeline.py"]
LOCAL_OR_REMOTE = ("is_url(", "_remote is None", "_remote is not None", "remote is None", "remote is not None",
                   "RemoteStore(", "RemotePack(", "LocalStore(", "LocalPack(")


@pytest.mark.parametrize("path", ONE_INTERFACE)
def test_the_store_readers_never_branch_on_local_or_remote(path):
    text = (PACKAGE / path).read_text()
    found = [b for b in LOCAL_OR_REMOTE if b in text]
    assert not found, f"{path} holds {found}: read through the store / pack source interface instead"


def test_the_monitor_imports_no_reader_to_tell_the_source():
    deps = _graph()["fastprep.monitoring._pipeline"]
    assert not [d for d in deps if d.startswith("fastprep.io")], \
        f"fastprep.monitoring._pipeline imports {sorted(deps)}: read the datasets' source_kind instead"


def test_the_counter_generator_is_a_leaf():
    assert _graph()["fastprep.core._counter_rng"] == set()


def test_the_library_never_imports_the_tooling():
    for name, deps in _graph().items():
        if not name.startswith("fastprep.tools") and name != "fastprep.__main__":  # the CLI entry
            bad = [d for d in deps if d.startswith("fastprep.tools")]
            assert not bad, f"{name} (library) imports {bad} (tooling)"


def test_no_import_cycles():
    graph = _graph()
    # Packages import their submodules by design (fastprep.ops defines the schemas by importing
    # its families); a cycle through a package's own __init__ is that, not a cycle between peers.
    edges = {m: {d for d in deps if d in graph and not m.startswith(d + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(edges[m]):
            if state.get(d) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(d):] + [d]))
            if d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])


def test_no_private_names_imported_across_modules():
    for path in PACKAGE.rglob("*.py"):
        for module, names in _imports(path):
            private = [n for n in names if n.startswith("_") and n not in ("_C", "_jpeg")]  # native modules
            assert not private, f"{_module_name(path)} imports {private} from {module}"


def test_the_loader_uses_only_the_public_api_of_transforms():
    """The Loader runs transforms through what fastprep.transforms exports (FusionPlan, ...): a new
    transform or fused op never needs a change in the Loader, nor can the Loader lean on internals."""
    public = set(fastprep.transforms.__all__)
    for path in (PACKAGE / "loader").rglob("*.py"):
        for module, names in _imports(path):
            if module.startswith("fastprep.transforms"):
                assert module == "fastprep.transforms" and set(names) <= public, \
                    f"{_module_name(path)} imports {names} from {module}; use fastprep.transforms' public names"


@pytest.mark.parametrize("module", sorted(p.stem for p in (PACKAGE / "loader").glob("*.py")
                                           if p.stem not in ("__init__", "_core")))
def test_the_parts_of_a_pass_are_handed_the_loaders_settings_not_the_loader(module):
    """The Loader's parts (_iteration.py, _ahead.py, _device_split.py, _checkpoint.py, ...) take its frozen
    LoaderSettings and the live objects they use (dataset, transform, order, pools), never the Loader
    itself (a bag whose attributes they read and set): no parameter or name `loader`, no import of
    loader/_core.py."""
    tree = ast.parse((PACKAGE / "loader" / f"{module}.py").read_text())
    parameters = {a.arg for node in ast.walk(tree) if isinstance(node, ast.arguments)
                  for a in (*node.posonlyargs, *node.args, *node.kwonlyargs)}
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not {"loader", "Loader"} & (parameters | names), f"fastprep.loader.{module} is handed the Loader"
    assert "fastprep.loader._core" not in _graph()[f"fastprep.loader.{module}"]


def test_import_on_the_native_backend_loads_no_numba():
    code = "import sys, fastprep; print(fastprep.backend(), 'numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "FASTPREP_BACKEND": "native"})
    assert out.returncode == 0, out.stderr
    backend, numba_loaded = out.stdout.split()
    if backend != "native":
        pytest.skip("the native backend is not built here")
    assert numba_loaded == "False"


def _schemas() -> set[str]:
    return {s.name.split("::")[1] for s in torch._C._jit_get_all_schemas() if s.name.startswith("fastprep::")}


def test_the_registry_lists_exactly_the_defined_ops():
    names = [row.name for row in OPS]
    assert len(names) == len(set(names))
    assert set(names) == _schemas()


@pytest.mark.parametrize("row", OPS, ids=lambda row: row.name)
def test_every_op_has_all_its_pieces(row):
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fastprep import numba_kernels

    qualname = f"fastprep::{row.name}"
    assert getattr(fastprep, row.name).__module__ == f"fastprep.ops._{row.family}"  # the wrapper
    assert row.name in fastprep.__all__
    assert callable(numba_kernels.kernel(row.name))  # the Numba kernel, same name
    key = "CPU" if row.takes_tensor else "CompositeExplicitAutograd"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key)  # the active backend's
    importlib.import_module(f"fastprep.ops._{row.family}")
    with FakeTensorMode():  # the fake kernel: shapes without data
        getattr(torch.ops.fastprep, row.name)(*row.sample())
    assert (PACKAGE.parents[1] / "csrc" / "ops" / f"{row.family}.cpp").exists() or \
        not (PACKAGE.parents[1] / "csrc").exists()  # the binding, in a source checkout


OPTIONAL_SOURCE_LIBRARIES = ("lmdb", "h5py", "webdataset")


def test_the_sources_libraries_are_imported_only_when_a_source_is_made():
    """lmdb and h5py are optional (the `sources` extra): fastprep.io reaches them through
    io.source.optional_module, which names the pip install when one is missing; webdataset is
    never needed (tar shards are read and written with the standard library)."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            bad = [n for n in names if n.split(".")[0] in OPTIONAL_SOURCE_LIBRARIES]
            assert not bad, f"{_module_name(path)} imports {bad}: use fastprep.io._source.optional_module"


def _import_unless_optional(name: str) -> ModuleType | None:
    """The module, or None where it needs a library fastprep leaves optional (Ray) that is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # fastprep.integrations._ray names the extra, raising from the missing module
        missing = exc if isinstance(exc, ModuleNotFoundError) else exc.__cause__
        if isinstance(missing, ModuleNotFoundError) and missing.name and not missing.name.startswith("fastprep"):
            return None
        raise


def _names_up_the_folders(name: str) -> list[str]:
    """Where an alias left by a re-filing would put a module: its own name one or more folders up
    (fastprep.batch._window_batch as fastprep.window_batch)."""
    parts = name.split(".")
    return [".".join(parts[:depth] + parts[-1:]) for depth in range(1, len(parts) - 1)]


def test_no_module_is_importable_under_two_names():
    """A module has one dotted path: a second name in sys.modules makes importlib.reload (and
    pickling by name) find the wrong one, and patching one name miss code that reads the other."""
    files = [_module_name(p) for p in PACKAGE.rglob("*.py")]
    imported = [name for name in files if _import_unless_optional(name) is not None]
    aliases = []
    for name in imported:
        for alias in _names_up_the_folders(name):
            if alias not in files:
                try:
                    importlib.import_module(alias)
                    aliases.append(alias)
                except ModuleNotFoundError:
                    pass
    assert not aliases, f"modules importable under a second name: {aliases}"
    ours = {key: m for key, m in list(sys.modules.items()) if m is not None and key.split(".")[0] == "fastprep"}
    renamed = [(key, m.__name__, m.__spec__.name) for key, m in ours.items() if key != m.__name__ or key != m.__spec__.name]
    assert not renamed, f"(sys.modules key, __name__, __spec__.name): {renamed}"
    keys_by_module: dict[int, list[str]] = {}
    for key, module in ours.items():
        keys_by_module.setdefault(id(module), []).append(key)
    assert not [keys for keys in keys_by_module.values() if len(keys) > 1]
    assert not [f for f in sys.meta_path if type(f).__module__.split(".")[0] == "fastprep"], "an import finder of fastprep's"


RELOADED = ["fastprep.batch._window_batch", "fastprep.core._counter_rng", "fastprep.io._pack_format",
            "fastprep.tools.bench._table"]
# For each module: imported, every name up its folders tried, reloaded; then its name, its spec's
# name, whether sys.modules holds the reloaded module by that name, whether its code ran again
# (its functions and classes are new objects).
RELOAD_PROBE = """
import importlib, sys
for name, aliases in {tried!r}.items():
    module = importlib.import_module(name)
    for alias in aliases:
        try:
            importlib.import_module(alias)
        except ModuleNotFoundError:
            pass
    defined = {{k: v for k, v in vars(module).items() if callable(v) and getattr(v, "__module__", "") == name}}
    reloaded = importlib.reload(module)
    rerun = bool(defined) and all(getattr(reloaded, k) is not v for k, v in defined.items())
    print(name, reloaded.__name__, reloaded.__spec__.name, sys.modules[name] is reloaded, rerun)
"""


def test_reloading_a_module_reruns_it_under_its_own_name():
    """In a fresh process: a reload makes new classes, which the rest of the suite must not see."""
    code = RELOAD_PROBE.format(tried={name: _names_up_the_folders(name) for name in RELOADED})
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"{name} {name} {name} True True" for name in RELOADED]


def test_tests_share_helpers_only_through_the_helpers_package():
    """A test module never imports another test module or a conftest: what tests share lives in
    tests/helpers (importable as helpers.<module>, no pythonpath entries), fixtures in a conftest."""
    tests = Path(__file__).parent
    bad = []
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bad += [(str(path.relative_to(tests)), n) for n in names
                    if n.split(".")[0].startswith("test_") or n.split(".")[0] == "conftest"]
    assert not bad, f"imports of test modules or conftest (move what they share to tests/helpers): {bad}"
    loose = sorted(p.name for p in tests.glob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py")
    assert not loose, f"shared test modules outside tests/helpers: {loose}"


# Exceptions that never reach a caller (control flow inside one module's machinery) or belong to the
# command-line tools (printed as one line by the CLI), and the only ones defined outside fastprep.errors.
INTERNAL_EXCEPTIONS = {
    "fastprep.loader._pool": {"Stopped"},  # a Loader thread told to stop
    "fastprep.core._bad_samples": {"SampleError"},  # carries a worker's failure to the consumer, re-raised as the user's
    "fastprep.io.packed._pack_item": {"Unreadable"},  # the packer's verdict on an input: skipped and named
    "fastprep.io.remote._redaction": {"Redacted"},  # stands in for an error whose text held a credential
    "fastprep.io.remote._window_batch": {"Probed"},  # a trial run's stop where it would read bytes
    "fastprep.tools.bench._bad_files": {"BadFileError", "BadFileStop"},
    "fastprep.tools.measuring._usage": {"UsageError"},
    "fastprep.tools.cli._diagnose": {"PipelineError"},
}


def test_every_exception_and_warning_is_in_fastprep_errors():
    """One module holds what a caller may catch or filter: fastprep/errors.py."""
    import builtins

    kinds = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
    kinds |= {node.name for node in ast.parse((PACKAGE / "errors.py").read_text()).body
              if isinstance(node, ast.ClassDef)}
    stray = []
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and module != "fastprep.errors" and \
                    any(getattr(b, "id", getattr(b, "attr", None)) in kinds for b in node.bases) and \
                    node.name not in INTERNAL_EXCEPTIONS.get(module, ()):
                stray.append(f"{module}.{node.name}")
    assert not stray, f"exceptions or warnings outside fastprep/errors.py: {stray}"


# The public faces: what the docs show is each one's __all__, and nothing else public lives there.
FACES = ["fastprep", "fastprep.errors", "fastprep.io", "fastprep.io.remote", "fastprep.loader", "fastprep.monitoring",
         "fastprep.transforms", "fastprep.ray", "fastprep.ops", "fastprep.tools.diagnose"]
# Packages whose __init__ still holds implementation (functions other modules of the package call):
# their public names are the package's working parts, not a surface; to move into modules of their own.
IMPLEMENTATION_INITS = {"fastprep.io.jpeg", "fastprep.numba_kernels"}


@pytest.mark.parametrize("face", [pytest.param(f, marks=pytest.mark.slow) if f == "fastprep.ray" else f for f in FACES])
def test_a_public_face_exports_exactly_its_all(face):
    if face == "fastprep.ray":  # its import needs Ray Data: .ci/slow installs it and runs this case
        pytest.importorskip("ray")
    module = importlib.import_module(face)
    assert isinstance(getattr(module, "__all__", None), list), f"{face} has no __all__"
    public = {n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, ModuleType)
              and n != "annotations"}
    assert public == set(module.__all__), (f"{face}: public but not in __all__ {sorted(public - set(module.__all__))}, "
                                           f"in __all__ but missing {sorted(set(module.__all__) - public)}")


def test_every_package_is_a_face_or_a_namespace():
    """A package's __init__ either is a public face (FACES) or binds no public name: a folder of modules."""
    bad = []
    for path in PACKAGE.rglob("__init__.py"):
        name = _module_name(path)
        if name in FACES or name in IMPLEMENTATION_INITS:
            continue
        body = [n for n in ast.parse(path.read_text()).body
                if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))  # the docstring
                and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
        if body:
            bad.append(name)
    assert not bad, f"packages whose __init__ binds names but is not a public face: {bad}"


# Modules that stay public though they are not packages: the faces that are one file, and the
# programs (`python -m ...`).
PUBLIC_MODULES = {"fastprep.errors", "fastprep.ray", "fastprep.__main__", "fastprep.tools.bench.profile_loader",
                  "fastprep.tools.photos"}


def test_every_implementation_module_is_private():
    """A module's name says whether it is a surface: the public names live in the packages' faces
    (their __init__ and __all__), every other module is _name.py (as torchvision's), so an import
    of an implementation module from outside reads as one."""
    public = sorted(name for name in map(_module_name, PACKAGE.rglob("*.py"))
                    if not name.rsplit(".", 1)[-1].startswith("_") and name not in PUBLIC_MODULES
                    and not (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists())
    assert not public, f"implementation modules with public names (rename to _name.py): {public}"
