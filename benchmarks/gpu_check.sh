#!/usr/bin/env bash
# The GPU check, one command on a fresh CUDA machine (no network needed), <= 8 minutes on 16 cores:
#   jpeg    libjpeg-turbo's headers: the system's, or unpacked from .debs/*.deb (Debian's
#           libjpeg62-turbo-dev + libjpeg62-turbo, carried in) into a private prefix
#   build   fastprep built against the machine's torch (pip install --no-build-isolation --no-deps .)
#   wheels  .whl/*.whl (nvImageCodec cu13 + nvJPEG, carried in) installed into a private folder
#   tests   the CUDA tests (ops, the resize windows, the decode split, its device stage and decoders), installed build
#   decode  each device JPEG decoder (torchvision's nvJPEG, nvImageCodec: the JPEG engines where the
#           GPU has them) on window cuts against libjpeg-turbo on one core (benchmarks/gpu_decode.py)
#   loader  fastprep.Loader decoding in threads 1, 4, 16, and with decode_on="cuda" by decoder and
#           device-stage streams 1-16, with the cores busy; a profile of the best split
#           (benchmarks/gpu_loader.py)
#   train   ResNet-18/50 training fed device-cached, by the Loader, by the Loader with the split
#           (each at its best settings above), as a share of the device-cached rate (benchmarks/gpu_train.py)
#   report  one markdown table of it all (benchmarks/gpu_report.py)
# Each stage runs under its own timeout within a total budget (GPU_CHECK_BUDGET_S, default 480 s; the
# first run on an H200 took 186 s): a failing stage is one line of the table and the next stage
# runs; the table is always printed.
# With $OUT set (the device tool's), it writes $OUT/gpu_table.md, $OUT/gpu_check.json (every figure)
# and $OUT/gpu_check.log (everything). From the repository root:
#   bash benchmarks/gpu_check.sh                 # on the GPU machine
#   bash benchmarks/gpu_check.sh --cpu-dry-run   # the same stages on the CPU, tiny sizes, no build
# Environment: PYTHON (default python3), GPU_CHECK_BUDGET_S, GPU_CHECK_SKIP (comma-separated stages).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD
py=${PYTHON:-python3}
dry=${GPU_CHECK_DRY_RUN:-0}
for arg in "$@"; do
  case $arg in
    --cpu-dry-run) dry=1 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $arg (expected --cpu-dry-run)" >&2; exit 2 ;;
  esac
done
export GPU_CHECK_DRY_RUN=$dry
skip=",${GPU_CHECK_SKIP:-}," && [ "$dry" = 1 ] && skip="$skip,build,"  # a dry run imports the fastprep it finds
budget=${GPU_CHECK_BUDGET_S:-480}
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/fastprep-gpu-check.XXXXXX")
export GPU_CHECK_DIR=$work
out=${OUT:-$work}
mkdir -p "$out"
log=$out/gpu_check.log
: >"$log"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INDEX=1 PYTHONUNBUFFERED=1
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}

say() { echo "$*" | tee -a "$log"; }
record() {  # stage, exit status, seconds, one line of what happened
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(echo "$4" | tr '\t\n' '  ' | cut -c1-400)" >>"$work/stages.tsv"
  local outcome="exit $2"; [ "$2" = 0 ] && outcome=ok; [ "$2" = skipped ] && outcome=skipped
  say "$1: $outcome in $3 s${4:+: $4}"
}
stage_time() {  # the stage's cap, within what the budget leaves (45 s kept for the report)
  local left=$((start + budget - 45 - $(date +%s)))
  echo $(($1 < left ? $1 : left))
}
run() {  # stage, cap seconds, command...: stdout to the console and the log, stderr to the log
  local name=$1 t; t=$(stage_time "$2"); shift 2
  if [[ $skip == *",$name,"* ]]; then record "$name" skipped 0 "GPU_CHECK_SKIP"; return; fi
  if ((t < 15)); then record "$name" skipped 0 "out of time (budget ${budget} s)"; return; fi
  say "== $name (timeout ${t} s)"
  export GPU_CHECK_DEADLINE=$(($(date +%s) + t - 15))  # rows that would start later are skipped
  local t0=$SECONDS rc msg
  { timeout -k 10 "$t" "$@" 2>"$work/$name.err"; echo $? >"$work/$name.rc"; } | tee "$work/$name.out" | tee -a "$log"
  rc=$(cat "$work/$name.rc")
  cat "$work/$name.err" >>"$log"
  # What happened, in one line: a failure's last words on stderr, else the last line printed.
  msg=$(grep -v '^\s*$' "$work/$name.out" | tail -1)
  [ -f "$work/$name.json" ] && msg=""  # a Python stage's rows say it
  [ "$rc" != 0 ] && grep -q '[^[:space:]]' "$work/$name.err" && msg=$(grep -v '^\s*$' "$work/$name.err" | tail -1)
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then msg="timed out after $t s${msg:+; last: $msg}"; fi
  record "$name" "$rc" $((SECONDS - t0)) "$msg"
}

say "fastprep GPU check: $(date -u '+%F %T UTC'), $root, python $("$py" -c 'import sys; print(sys.version.split()[0])' 2>&1), results in $out$([ "$dry" = 1 ] && echo ', CPU DRY RUN')"

# jpeg: fastprep._jpeg needs jpeglib.h at build time; without the system's, unpack the carried .debs.
t0=$SECONDS
if printf '#include <stdio.h>\n#include <jpeglib.h>\n' | "${CXX:-c++}" -E -x c++ - >/dev/null 2>&1; then
  record jpeg 0 0 "the system's jpeglib.h"
elif compgen -G ".debs/*.deb" >/dev/null; then
  prefix=${TMPDIR:-/tmp}/jpeg-prefix
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in .debs/*.deb; do
    if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$deb" "$prefix"
    else (d=$(mktemp -d) && cd "$d" && ar x "$root/$deb" && tar -xf data.tar.* -C "$prefix"; rm -rf "$d"); fi
  done >>"$log" 2>&1
  inc=$(dirname "$(find "$prefix" -name jpeglib.h | head -1)")
  lib=$(dirname "$(find "$prefix" -name 'libjpeg.so' | head -1)")
  # Debian keeps jconfig.h in the multiarch folder, which the compiler searches only under /usr.
  find "$prefix" -name jconfig.h ! -path "$inc/jconfig.h" -exec cp {} "$inc/" \; 2>/dev/null
  if [ -f "$inc/jpeglib.h" ] && [ -f "$inc/jconfig.h" ] && [ -e "$lib/libjpeg.so" ]; then
    export CMAKE_ARGS="${CMAKE_ARGS:-} -DJPEG_INCLUDE_DIR=$inc -DJPEG_LIBRARY=$lib/libjpeg.so -DCMAKE_PREFIX_PATH=${inc%/include}"
    export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    record jpeg 0 $((SECONDS - t0)) "no system jpeglib.h: $(ls .debs | tr '\n' ' ')unpacked into $prefix"
  else
    record jpeg 1 $((SECONDS - t0)) "no system jpeglib.h and .debs/ did not give jpeglib.h + jconfig.h + libjpeg.so"
  fi
else
  record jpeg 1 0 "no jpeglib.h and no .debs/: fastprep._jpeg is not built, nothing decodes JPEGs (carry .debs/)"
fi

# wheels: nvImageCodec and nvJPEG, carried in .whl/ (no network there), beside the machine's torch.
if compgen -G ".whl/*.whl" >/dev/null; then
  t0=$SECONDS
  site=$work/site
  if "$py" -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl >>"$log" 2>&1; then
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    record wheels 0 $((SECONDS - t0)) "$(ls .whl | tr '\n' ' ')into $site"
  else
    record wheels 1 $((SECONDS - t0)) "pip could not install .whl/*.whl (see the log)"
  fi
else
  record wheels skipped 0 "no .whl/: the rows of nvImageCodec are skipped"
fi

report=$root/benchmarks/gpu_report.py
if [[ $skip != *",build,"* ]]; then
  # shellcheck disable=SC2016 # $0, $1, $2: bash -c's arguments
  run build 240 bash -c '"$0" -m pip install -q --no-build-isolation --no-deps "$1" && cd "$1/tests" && "$0" "$2" --build-line' \
    "$py" "$root" "$report"
  [ "$(tail -1 "$work/stages.tsv" | cut -f2)" = 0 ] || tail -30 "$work/build.err"
else
  record build skipped 0 "dry run: $(cd "$root/tests" && "$py" "$report" --build-line 2>&1 | tail -1)"
fi

cd "$root/tests" || exit 2  # import the installed build, not the source tree
xdist=$("$py" -c 'import xdist' 2>/dev/null && echo "-n 4")
# -p no:benchmark: pytest-benchmark, where installed, warns beside xdist, and the suite makes warnings errors.
# shellcheck disable=SC2086 # $xdist: none or two words
run tests 120 env FASTPREP_BACKEND=native "$py" -m pytest -q -p no:cacheprovider -p no:benchmark -c ../pyproject.toml \
  --rootdir .. --tb=short $xdist ops/test_cuda.py ops/test_resize_windows.py loader/test_device_split.py loader/test_device_stage.py \
  batch/test_stream_pool.py io/test_device_decoders.py
run decode 90 "$py" "$root/benchmarks/gpu_decode.py"
run loader 210 "$py" "$root/benchmarks/gpu_loader.py"
run train 180 "$py" "$root/benchmarks/gpu_train.py"

say "== report ($((SECONDS)) s so far)"
if ! timeout -k 5 40 "$py" "$report" 2>>"$log" | tee -a "$log"; then
  say "report failed (see $log); the stages:"
  say "| stage | exit | seconds | note |"
  say "| --- | --- | ---: | --- |"
  while IFS=$'\t' read -r name rc secs msg; do say "| $name | $rc | $secs | $msg |"; done <"$work/stages.tsv"
fi
[ "$out" != "$work" ] && cp "$work"/gpu_table.md "$work"/gpu_check.json "$out"/ 2>/dev/null
say "done in $SECONDS s; table, figures and log: $out/gpu_table.md, $out/gpu_check.json, $log"
failed=$(cut -f2 "$work/stages.tsv" | grep -cv -E '^(0|skipped)$')
[ "$out" != "$work" ] && rm -rf "$work"
exit $((failed > 0))
