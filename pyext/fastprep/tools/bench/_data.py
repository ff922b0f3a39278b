"""`python -m fastprep bench --data DIR --transform MODULE:ATTR`: the user's folder (torchvision's
ImageFolder layout, or a fastprep pack) and torchvision transform, run the usual way and
fastprep's way side by side, at the same worker / thread count.

- the usual way: torchvision's ImageFolder(DIR, transform) in a DataLoader(num_workers=n)
  (a pack, which torchvision cannot read: fastprep's PackedDataset decoding each image whole,
  then the transform);
- fastprep's way: the transform ported to fastprep.transforms (_port.py) in
  fastprep.Loader(threads=n) over fastprep.io.ImageFolder(DIR, roi=True) or the pack, and the
  port in a DataLoader; where a step has no port, the Loader runs the transform as it is (a
  foreign transform: in its threads, sharing the GIL), and the steps without a port are named.

Every problem with what was given (DIR, MODULE:ATTR, a transform failing on the first sample,
torchvision missing) is a UsageError naming the argument and the value, before anything is timed.
"""

from __future__ import annotations

import importlib
import inspect
import os
from typing import Any

import torch

import fastprep.tools.bench._usual as bench_usual
from fastprep.core._failure_text import SKIP_HINT
from fastprep.tools.bench._bad_files import BadFileError, BadFileStop, bad_file_line, naming_loader
from fastprep.tools.bench._port import Port, port
from fastprep.tools.bench._sweep import usable_cores
from fastprep.tools.measuring._usage import UsageError


def _raised(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def torchvision_hint() -> str:
    """The pip line for the torchvision paired with this torch (torch 2.N pairs with 0.N+15)."""
    major_minor = torch.__version__.split("+")[0].split(".")[:2]
    paired = f"0.{int(major_minor[1]) + 15}.*" if major_minor[0] == "2" else "the version paired with your torch"
    cpu = "+cpu" in torch.__version__
    index = " --index-url https://download.pytorch.org/whl/cpu" if cpu else ""
    return f"pip install 'torchvision=={paired}'{index} (the one built for torch {torch.__version__.split('+')[0]})"


def open_data(path: str) -> tuple[str, Any]:
    """("folder" | "pack", fastprep's dataset over `path`), or a UsageError naming --data."""
    import fastprep.io as fio  # noqa: PLC0415
    from fastprep.io._pack_format import INDEX_NAME  # noqa: PLC0415

    if not os.path.exists(path):
        raise UsageError(f"--data {path!r}: no such directory")
    if not os.path.isdir(path):
        raise UsageError(f"--data {path!r}: not a directory (expected a folder of class folders, torchvision's "
                         f"ImageFolder layout, or a fastprep pack)")
    try:
        if os.path.isfile(os.path.join(path, INDEX_NAME)):
            return "pack", fio.PackedDataset(path)
        return "folder", fio.ImageFolder(path, roi=True)
    except Exception as exc:  # noqa: BLE001 (whatever the reader says, said as the argument's problem)
        raise UsageError(f"--data {path!r}: {_raised(exc)}") from None


def load_transform(spec: str) -> tuple[Any, str]:
    """(the transform, how it was found) from MODULE:ATTR: an object (a Compose, any callable taking
    the image) or a factory (a function or class taking no arguments) returning one."""
    example = "e.g. mypkg.transforms:train_tf"
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr or ":" in attr:
        raise UsageError(f"--transform: expected MODULE:ATTR with one ':' ({example}), got {spec!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == "torchvision":
            raise UsageError(f"--transform {spec!r}: importing {module_name!r} needs torchvision, which is not "
                             f"installed: {torchvision_hint()}") from None
        raise UsageError(f"--transform {spec!r}: cannot import module {module_name!r}: {_raised(exc)} (is it on "
                         f"sys.path? `python -m fastprep` adds the current directory)") from None
    except (Exception, SystemExit) as exc:
        raise UsageError(f"--transform {spec!r}: importing {module_name!r} raised {_raised(exc)}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"--transform {spec!r}: {getattr(obj, '__name__', module_name)!r} has no attribute "
                             f"{part!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"--transform {spec!r} is not callable ({type(obj).__name__}: {obj!r:.60}): expected a "
                         f"transform, or a factory returning one")
    if inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isclass(obj):
        try:
            inspect.signature(obj).bind()
        except TypeError:
            return obj, f"a function taking the image: {attr}"  # f(image) is the transform itself
        try:
            made = obj()
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"--transform {spec!r}: calling the factory {attr}() raised {_raised(exc)}") from None
        if not callable(made):
            raise UsageError(f"--transform {spec!r}: the factory {attr}() returned a {type(made).__name__}, "
                             f"not a transform (a callable)")
        return made, f"a factory: {attr}() returned {_kind(made)}"
    return obj, f"an object: {_kind(obj)}"


def _kind(tf: Any) -> str:
    module = type(tf).__module__ or ""
    lib = "v2 " if ".v2" in module else "v1 " if module.startswith("torchvision.transforms") else ""
    return f"a {lib}{type(tf).__name__}" + (f" of {len(tf.transforms)} steps" if hasattr(tf, "transforms") else "")


def first_sample(dataset: Any, spec: str, what: str) -> None:
    """dataset[0], or a UsageError naming the transform, the sample and the error."""
    try:
        dataset[0]
    except Exception as exc:  # noqa: BLE001
        path = (dataset.samples[0][0] if hasattr(dataset, "samples") else dataset.where(0) if hasattr(dataset, "where")
                else "item 0")
        if isinstance(exc, BadFileError) or SKIP_HINT in str(exc):  # the file's fault, not the transform's
            raise UsageError(bad_file_line(exc, [path]) or f"{path!r}: {_raised(exc)}") from None
        raise UsageError(f"--transform {spec!r} failed on the first sample ({path}) {what}: {_raised(exc)}") from None


def prepare(data: str, spec: str) -> dict:
    """Check everything and build the datasets: {kind, fastprep, usual, port, transform, how, ...}."""
    kind, fp = open_data(data)
    transform, how = load_transform(spec)
    v2, why = bench_usual.torchvision_v2()
    if v2 is None:
        raise UsageError(f"--data needs torchvision for the baseline (torchvision's ImageFolder + your transform "
                         f"in a DataLoader); it does not import here ({why}): {torchvision_hint()}")
    import fastprep.io as fio  # noqa: PLC0415

    if kind == "folder":
        from torchvision.datasets import ImageFolder  # noqa: PLC0415

        usual = ImageFolder(data, transform=transform, loader=naming_loader)  # its errors name the file
    else:
        usual = fio.PackedDataset(data, transform=transform)
    first_sample(usual, spec, "in the usual pipeline")
    ported = port(transform)
    out = {"kind": kind, "data": data, "spec": spec, "how": how, "transform": transform, "usual": usual,
           "port": ported, "fastprep": fp, "count": len(fp), "classes": len(getattr(fp, "classes", []) or [])}
    if ported.compose is not None:
        try:
            ported.compose(fp.load_raw(0)[0])
        except Exception as exc:  # noqa: BLE001 (a ported step refusing this input: run the transform as it is)
            ported.steps.append(("(the port)", f"failed on the first sample: {_raised(exc)}; running yours as is"))
            ported.compose = None
    if ported.compose is None:
        out["foreign"] = _foreign_source(data, kind, transform, fp, spec)
    else:
        out["applying"] = (fio.ImageFolder(data, ported.compose, roi=True) if kind == "folder"
                           else fio.PackedDataset(data, ported.compose))
    return out


def _foreign_source(data: str, kind: str, transform: Any, fp: Any, spec: str) -> dict:
    """How the Loader runs `transform` as it is: {dataset, transform (the Loader's), what (decoded
    by), code (the dataset as the user would write it)}. In this order: fastprep's decode when the
    transform takes its CHW tensor; fastprep's dataset applying a torchvision v1 transform itself
    (it hands those PIL images, as torchvision's ImageFolder does: io.source.wants_pil), a folder's
    or a pack's; else torchvision's ImageFolder (Pillow's images) for a folder."""
    import fastprep.io as fio  # noqa: PLC0415
    from fastprep.io._source import wants_pil  # noqa: PLC0415

    decoded = fio.ImageFolder(data) if kind == "folder" else fp
    kind_class = "ImageFolder" if kind == "folder" else "PackedDataset"
    try:
        transform(decoded[0][0])
        return {"dataset": decoded, "transform": transform, "what": "fastprep's decoder",
                "code": f"fio.{kind_class}({data!r})"}
    except Exception as exc:  # noqa: BLE001
        failed = exc
    if wants_pil(transform):
        applying = getattr(fio, kind_class)(data, transform)
        first_sample(applying, spec, f"in fastprep's {kind_class} applying it (PIL images)")
        return {"dataset": applying, "transform": None,
                "what": f"fastprep's decoder, as PIL images (your transform takes them), in fio.{kind_class}",
                "code": f"fio.{kind_class}({data!r}, transform=your_transform)"}
    if kind == "pack":
        raise UsageError(f"--transform {spec!r} failed on the first sample of the pack decoded by fastprep "
                         f"(a CHW uint8 tensor): {_raised(failed)}") from None
    from torchvision.datasets import ImageFolder  # noqa: PLC0415

    return {"dataset": ImageFolder(data), "transform": transform, "what": "Pillow (your transform needs PIL images)",
            "code": f"torchvision.datasets.ImageFolder({data!r})"}


def run(data: str, spec: str, cores: int | None = None, batch_size: int = 64, repeats: int = 2,
        seconds: float | None = None) -> dict:
    """Measure the usual way and fastprep's ways on DATA with the transform (see the module doc)."""
    from torch.utils.data import default_collate  # noqa: PLC0415

    import fastprep.tools.bench._feeds as feeds  # noqa: PLC0415
    from fastprep import transforms as T  # noqa: PLC0415
    from fastprep.tools.bench._headline import dataloader_way, loader_way, measure  # noqa: PLC0415
    from fastprep.tools.measuring._stand_ins import Cycle  # noqa: PLC0415

    n = cores or usable_cores()
    made = prepare(data, spec)
    budget = feeds.Budget(2, 1.0 if seconds is None else seconds, 100)
    length = batch_size * (budget.max_batches + 2 * n + 8)
    torch.set_num_threads(1)
    ways = {"usual": dataloader_way(Cycle(made["usual"], length), default_collate, batch_size, n)}
    if "foreign" in made:
        foreign = made["foreign"]
        ways["fastprep.Loader, your transform as is"] = loader_way(Cycle(foreign["dataset"], length),
                                                                   foreign["transform"], batch_size, n)
    else:
        ways["fastprep.Loader + the port"] = loader_way(Cycle(made["fastprep"], length), made["port"].compose,
                                                        batch_size, n)
        ways["the port in a DataLoader"] = dataloader_way(T.SeedByIndex(Cycle(made["applying"], length), seed=0),
                                                          default_collate, batch_size, n)
    try:
        rates = measure({"data": ways}, repeats, budget, {"data": data})["data"]
    except Exception as exc:
        paths = [p for p, _ in made["fastprep"].samples] if made["kind"] == "folder" else []
        line = bad_file_line(exc, paths)
        if line is None:
            raise
        raise BadFileStop(line) from exc
    return {**{k: made[k] for k in ("kind", "data", "spec", "how", "count", "classes")}, "port": made["port"],
            "foreign": made["foreign"]["what"] if "foreign" in made else "",
            "foreign_code": made["foreign"]["code"] if "foreign" in made else "", "cores": n, "batch_size": batch_size,
            "repeats": repeats, "rates": rates, "torchvision": bench_usual.torchvision_v2()[1]}


def text(result: dict) -> str:
    """The printed answer: the ratio, both ways' samples/s, what the port did, the code to use."""
    p: Port = result["port"]
    rates, n, data = result["rates"], result["cores"], result["data"]
    usual = rates["usual"]
    mine = {k: v for k, v in rates.items() if k != "usual"}
    best = max(mine, key=mine.get)
    what = "a fastprep pack" if result["kind"] == "pack" else f"{result['count']} images in {result['classes']} classes"
    lines = [f"fastprep bench --data {data}: {what}; {n} DataLoader workers vs {n} fastprep threads, batch "
             f"{result['batch_size']}, best of {result['repeats']} rounds, each batch copied once",
             f"  your transform {result['spec']}: {result['how']}",
             "  fastprep's port: " + ", ".join(name if how == "ported" else f"[{name}: {how}]" for name, how in p.steps)
             + (" -> fused: one op call a sample" if p.fused else ""),
             ""]
    if p.unported:
        lines.append(f"  no port for {', '.join(p.unported)}: fastprep.Loader runs your transform as it is "
                     f"(a foreign transform, in its threads; images decoded by {result['foreign']})")
    lines.append(f"  fastprep delivers {mine[best] / usual:.1f}x your pipeline: {usual:,.0f} -> {mine[best]:,.0f} "
                 f"samples/s ({best})")
    source = "fastprep's PackedDataset decoding whole" if result["kind"] == "pack" else "torchvision's ImageFolder"
    rows = {f"your pipeline ({source} + your transform, DataLoader)": usual, **mine}
    width = max(len(k) for k in rows) + 2
    lines += [f"    {way:<{width}}{rate:>9,.0f} samples/s" for way, rate in rows.items()]
    lines += ["", "  to use it (import fastprep, fastprep.io as fio; from fastprep import transforms as T):"]
    if p.compose is None:  # the dataset measured: fastprep's, applying the transform itself, or torchvision's
        dataset = result["foreign_code"]
        given = "" if "transform=your_transform" in dataset else ", transform=your_transform"
        lines.append(f"    loader = fastprep.Loader({dataset}, {result['batch_size']}{given}, shuffle=True)")
        return "\n".join(lines)
    dataset = f"fio.PackedDataset({data!r})" if result["kind"] == "pack" else f"fio.ImageFolder({data!r}, roi=True)"
    if best == "the port in a DataLoader":
        lines.append(f"    loader = DataLoader(T.SeedByIndex({dataset[:-1]}, transform={p.code()})), batch_size="
                     f"{result['batch_size']}, num_workers={n}, shuffle=True)")
    else:
        lines.append(f"    loader = fastprep.Loader({dataset}, {result['batch_size']}, transform={p.code()}, "
                     f"shuffle=True)")
    return "\n".join(lines)
