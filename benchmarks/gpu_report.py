"""gpu_check.sh's last stage: one markdown table of every stage's figures, and a JSON of them all.

Reads ``$GPU_CHECK_DIR/stages.tsv`` (the shell's line per stage: name, exit status, seconds, one
line of what happened) and the stages' ``<name>.json`` rows, describes the machine (nvidia-smi's
name, torch, torchvision, fastprep's build, the date), prints the table and writes it to
``<dir>/gpu_table.md`` and everything to ``<dir>/gpu_check.json``. Each piece it cannot read is
said in its place; the table is printed whatever failed before.

    GPU_CHECK_DIR=/tmp/x python benchmarks/gpu_report.py
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from typing import Any

from gpu_common import DRY_RUN, cores, one_line, results_dir

STAGE_TITLES = {"jpeg": "libjpeg-turbo", "wheels": "wheels", "build": "build", "tests": "CUDA tests",
                "decode": "device decoders vs CPU", "loader": "Loader", "train": "training", "report": "report"}
OUTCOMES = {0: "ok", 124: "timed out", 137: "killed (timeout)"}


def _try(what: str, fn) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 (the report says what it could not read, and goes on)
        return f"unknown ({what}: {one_line(exc)})"


def _gpu_name() -> str:
    if DRY_RUN:
        return f"none (CPU dry run on {platform.processor() or platform.machine()})"
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        if done.returncode == 0 and done.stdout.strip():
            return "; ".join(line.strip() for line in done.stdout.strip().splitlines()) + " (name, memory, driver)"
    except (OSError, subprocess.SubprocessError):
        pass
    import torch  # noqa: PLC0415

    return torch.cuda.get_device_name() + " (torch; nvidia-smi did not answer)"


def machine_build() -> dict:
    """Where fastprep was imported from and how it was built."""
    import fastprep  # noqa: PLC0415
    import fastprep.io  # noqa: PLC0415

    info = fastprep.build_info()
    return {"file": fastprep.__file__, "backend": fastprep.backend(), "jpeg_decoder": fastprep.io.available(),
            **{k: info.get(k) for k in ("torch_version", "isa_selected", "compiler")}}


def machine() -> dict:
    def versions() -> dict:
        import torch  # noqa: PLC0415

        return {"torch": torch.__version__, "cuda": torch.version.cuda}

    def torchvision() -> str:
        import torchvision as tv  # noqa: PLC0415

        return tv.__version__

    return {"gpu": _try("nvidia-smi", _gpu_name), "cores": cores(), **_try("torch", versions),
            "torchvision": _try("torchvision", torchvision), "fastprep": _try("fastprep", machine_build),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "dry_run": DRY_RUN}


def stages(folder: str) -> dict[str, dict]:
    """Each stage's outcome (stages.tsv) with its rows (<name>.json), in the order run."""
    out: dict[str, dict] = {}
    tsv = os.path.join(folder, "stages.tsv")
    lines = open(tsv).read().splitlines() if os.path.exists(tsv) else []
    for line in lines:
        name, rc, seconds, message = (line.split("\t", 3) + ["", "", ""])[:4]
        out[name] = {"rc": int(rc) if rc.lstrip("-").isdigit() else rc, "seconds": seconds, "message": message}
    for name in STAGE_TITLES:
        path = os.path.join(folder, f"{name}.json")
        if os.path.exists(path):
            out.setdefault(name, {"rc": "not run by gpu_check.sh", "seconds": "", "message": ""})
            out[name].update(_try(f"{name}.json", lambda path=path: json.load(open(path))))
    return out


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(info: dict, results: dict[str, dict]) -> str:
    gpu, build = info["gpu"], info["fastprep"]
    jpeg = build.get("jpeg_decoder") if isinstance(build, dict) else build
    lines = [f"**fastprep GPU check** {info['date']}: {gpu}; {info['cores']} cores; torch {info.get('torch')} "
             f"(CUDA {info.get('cuda')}), torchvision {info['torchvision']}; fastprep "
             f"{build.get('isa_selected') if isinstance(build, dict) else build}, JPEG decoder {jpeg}"
             + ("; DRY RUN on the CPU: not GPU figures" if info["dry_run"] else ""), "",
             "| stage | measurement | samples/s | ratio | note |", "| --- | --- | ---: | ---: | --- |"]
    for name, st in results.items():
        title = STAGE_TITLES.get(name, name)
        rc = st.get("rc")
        outcome = OUTCOMES.get(rc, f"failed (exit {rc})") if isinstance(rc, int) else str(rc)
        if outcome != "ok" or not st.get("rows"):
            note = st.get("skipped") or st.get("message") or ""
            lines.append(f"| {title} | {_cell(st.get('what', ''))} | | | {_cell(outcome)}"
                         f"{' in ' + st['seconds'] + ' s' if st.get('seconds') else ''}{': ' + _cell(note) if note else ''} |")
        for row in st.get("rows", []):
            figure = row.get("samples_per_s")
            ratio = row.get("ratio")
            ratio_text = "" if ratio is None else (f"{ratio:.0%} of {row['ratio_of']}" if row.get("ratio_of") ==
                                                   "device-cached" else f"{ratio:.2f}x {row['ratio_of']}")
            extra = [f"max/mean abs diff vs CPU {row['max_abs_diff_vs_cpu']}/{row['mean_abs_diff_vs_cpu']}"] \
                if "max_abs_diff_vs_cpu" in row else []
            if "mean_cut_kB" in row:
                extra.append(f"cuts {row['mean_cut_kB']} kB, windows {row['mean_window_px'] / 1e3:.0f}k px")
            extra += [f"{row['cores_busy']} cores busy"] if "cores_busy" in row else []
            extra += [f"decoded by {row['decoders']}"] if row.get("decoders") else []
            extra += [f"stage {row['stage']}"] if row.get("stage") else []
            if "profile_share" in row:
                extra.append("time: " + ", ".join(f"{k} {v:.0%}" for k, v in row["profile_share"].items()))
            status = row.get("status", "?")
            note = "; ".join(([] if status == "ok" else [f"{status}: {row.get('note', '')}"]) + extra)
            lines.append(f"| {title} | {_cell(row.get('label', ''))} | "
                         f"{'' if figure is None else f'{figure:,.0f}'} | {ratio_text} | {_cell(note)} |")
    return "\n".join(lines)


def build_line() -> str:
    """The fastprep this interpreter imports, in one line (gpu_check.sh's build stage prints it)."""
    import torch  # noqa: PLC0415

    b = machine_build()
    return (f"fastprep at {b['file']}: built for torch {b['torch_version']} (running {torch.__version__}), ISA "
            f"{b['isa_selected']}, backend {b['backend']}, JPEG decoder {b['jpeg_decoder']}")


def main() -> None:
    if sys.argv[1:] == ["--build-line"]:
        print(build_line())
        return
    folder = results_dir()
    info, results = machine(), stages(folder)
    text = table(info, results)
    print(text, flush=True)
    with open(os.path.join(folder, "gpu_table.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(folder, "gpu_check.json"), "w") as f:
        json.dump({"machine": info, "stages": results}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
