#!/usr/bin/env bash
# gpu-run.sh: turns a bare GPU machine into numbers (docs/gpu.md): unpacks the Debian 12 bundle of
# gpu-bundle.sh into a user-space prefix, builds itertime against the machine's PyTorch (its LibTorch,
# CUDA and NCCL), and runs `itertime info`, the NCCL communicator test and the comm sweep (with 2 GPUs
# or more), then the GPU job (calibrate ops, ground truth, validate with both holdouts) and the memory
# report, writing everything into one folder and ending with a summary table.
#
#   launcher/scripts/gpu-run.sh [--cpu] [--bundle DIR] [--out DIR] [--torch LOCATION] [--ranks N] [--job JOB]
#
#   --cpu          CPU mode: the same steps on CPU ranks (LibTorch: --torch, else Debian's libtorch-dev),
#                  with jobs/gpu-cpu-mode.json (the GPU job's pipeline on a tiny model); for testing the
#                  script and the prefix where there is no GPU
#   --bundle DIR   the bundle (default: out/gpu-bundle)
#   --out DIR      the output folder (default: out/gpu-run; emptied first, except a prefix it holds)
#   --torch LOC    the LibTorch (launcher/scripts/build.sh --torch; default python3 on GPU)
#   --ranks N      ranks (default: GPU mode the number of GPUs torch sees, CPU mode 2)
#   --job JOB      the job (default: jobs/gpu-h200.json, CPU mode jobs/gpu-cpu-mode.json)
#
# Invariants:
#  - Needs bash, python3, cmake, ninja and a C++17 compiler; no root, no package access, no MPI, HDF5
#    or Boost of the system: everything else comes from the bundle, unpacked into OUT/prefix
#    (deb_extract.py; nothing is written outside OUT and the checkout's untouched build folders).
#  - The prefix is used through the environment only (PATH, LD_LIBRARY_PATH, CPATH, OPAL_PREFIX for Open MPI,
#    PMIx's plugin path) and CMake hints (the MPI and HDF5 compiler wrappers, CMAKE_PREFIX_PATH).
#  - Every step's output goes to OUT/NN-step.log; the script prints one progress line per step, with
#    its time, and stops at the first failing step (exit status 1, naming its log).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MODE=gpu
BUNDLE="$ROOT/out/gpu-bundle"
OUT="$ROOT/out/gpu-run"
TORCH=""
RANKS=""
JOB=""
die() { echo "gpu-run: error: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu) MODE=cpu; shift ;;
    --bundle) BUNDLE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --torch) TORCH="$2"; shift 2 ;;
    --ranks) RANKS="$2"; shift 2 ;;
    --job) JOB="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -d "$BUNDLE/debs" ]] || die "no bundle at $BUNDLE (make one with launcher/scripts/gpu-bundle.sh where Debian 12 packages are reachable)"
for tool in python3 cmake ninja; do command -v "$tool" >/dev/null || die "$tool not found"; done
if [[ "$MODE" == gpu ]]; then
  # nvcc where CUDA installs it by default, when it is not on PATH (CMake's CUDA check looks on PATH).
  if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
  command -v nvcc >/dev/null || die "nvcc not found (put the CUDA toolkit's bin folder on PATH)"
  TORCH="${TORCH:-python3}"
  JOB="${JOB:-$ROOT/jobs/gpu-h200.json}"
  if [[ -z "$RANKS" ]]; then
    RANKS="$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)"
  fi
  [[ "$RANKS" -ge 1 ]] || die "no CUDA device visible to python3's torch (use --cpu to test the script without a GPU)"
else
  JOB="${JOB:-$ROOT/jobs/gpu-cpu-mode.json}"
  RANKS="${RANKS:-2}"
fi
BUNDLE="$(cd "$BUNDLE" && pwd)"
JOB="$(cd "$(dirname "$JOB")" && pwd)/$(basename "$JOB")"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
find "$OUT" -mindepth 1 -maxdepth 1 ! -name prefix ! -name build -exec rm -rf {} +
PREFIX="$OUT/prefix"
STARTED=$SECONDS
STEP=0
declare -a SUMMARY_STEPS=()

# step NAME COMMAND...: runs COMMAND with its output in OUT/NN-NAME.log; prints a progress line. (Inside
# `if`, set -e does not reach into a function: the step functions below return on failure themselves.)
step() {
  local name="$1"
  shift
  STEP=$((STEP + 1))
  local log
  log="$(printf '%s/%02d-%s.log' "$OUT" "$STEP" "$name")"
  local t0=$SECONDS
  printf 'gpu-run: [%3ds] %-12s ...' "$((SECONDS - STARTED))" "$name"
  if "$@" >"$log" 2>&1; then
    printf ' ok (%ds)\n' "$((SECONDS - t0))"
    SUMMARY_STEPS+=("$(printf '%-12s %5ds  ok      %s' "$name" "$((SECONDS - t0))" "${log#"$OUT"/}")")
  else
    printf ' FAILED (%ds); last lines of %s:\n' "$((SECONDS - t0))" "$log"
    tail -n 25 "$log" | sed 's/^/    /'
    exit 1
  fi
}

# 1. The prefix: the bundle unpacked, the names Debian's alternatives give made (the MPI wrappers and
#    mpirun, PSM's library), the HDF5 wrappers pointed at it.
make_prefix() {
  local stamp="$PREFIX/.bundle-manifest" want
  want="$(cat "$BUNDLE/MANIFEST"; echo "# prefix fix-ups 2")"   # bump when the fix-ups below change
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "prefix $PREFIX already holds this bundle"
    return 0
  fi
  rm -rf "$PREFIX"
  python3 "$ROOT/launcher/scripts/deb_extract.py" "$PREFIX" "$BUNDLE"/debs/*.deb || return 1
  local bin="$PREFIX/usr/bin" name
  for name in mpirun mpiexec mpicc mpicxx mpic++; do ln -sf "$name.openmpi" "$bin/$name" || return 1; done
  for name in h5cc h5c++; do sed -i "s|^prefix=\"/usr\"|prefix=\"$PREFIX/usr\"|" "$bin/$name" || return 1; done
  ln -sf ../libpsm1/libpsm_infinipath.so.1.16 "$PREFIX/usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1" || return 1
  echo "$want" >"$stamp"
  echo "prefix $PREFIX: $(find "$PREFIX" -type f | wc -l) files from $(ls "$BUNDLE"/debs/*.deb | wc -l) packages"
}
step prefix make_prefix

LIB="$PREFIX/usr/lib/x86_64-linux-gnu"
export PATH="$PREFIX/usr/bin:$PATH"
export LD_LIBRARY_PATH="$LIB:$LIB/openmpi/lib:$LIB/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Debian's multiarch headers (OpenSSL's opensslconf.h, for formats/ SHA-256): a compiler searches
# /usr/include/x86_64-linux-gnu by itself, not the prefix's copy.
export CPATH="$PREFIX/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
export OPAL_PREFIX="$PREFIX/usr"
export PMIX_INSTALL_PREFIX="$PREFIX/usr"
export PMIX_MCA_mca_base_component_path="$LIB/pmix2/lib/pmix"
export OMPI_MCA_btl="^openib,tcp" OMPI_MCA_pml="^ucx"   # one node: shared memory only
export OMPI_MCA_plm_rsh_agent=false   # one node: no ssh needed (Open MPI refuses to start without an agent)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
if [[ "$(id -u)" == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

# 2. Configure and build (only what the run needs).
BUILD="$OUT/build"
TARGETS="itertime"
TESTS=OFF
if [[ "$MODE" == gpu && "$RANKS" -ge 2 ]]; then TARGETS="itertime itertime_gpu_tests"; TESTS=ON; fi
# CPU mode checks the prefix and the script, not speed: -O1 without debug information compiles the
# LibTorch files about a third faster (it is a cold build inside CI's bare-root leg).
build_type=()
if [[ "$MODE" == cpu ]]; then
  build_type=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG")
fi
build() {
  local torch_args=()
  [[ -n "$TORCH" ]] && torch_args=(--torch "$TORCH")
  ITERTIME_BUILD_DIR="$BUILD" ITERTIME_BUILD_TARGETS="$TARGETS" "$ROOT/launcher/scripts/build.sh" "${torch_args[@]}" \
    ${build_type[@]+"${build_type[@]}"} -DITERTIME_BUILD_BENCHMARKS=OFF -DITERTIME_BUILD_TESTS="$TESTS" \
    -DITERTIME_WITH_CUDA="$([[ "$MODE" == gpu ]] && echo ON || echo OFF)" \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
    -DMPI_C_COMPILER="$PREFIX/usr/bin/mpicc.openmpi" -DMPI_CXX_COMPILER="$PREFIX/usr/bin/mpicxx.openmpi" \
    -DMPIEXEC_EXECUTABLE="$PREFIX/usr/bin/mpiexec.openmpi" \
    -DHDF5_C_COMPILER_EXECUTABLE="$PREFIX/usr/bin/h5cc" -DHDF5_CXX_COMPILER_EXECUTABLE="$PREFIX/usr/bin/h5c++"
}
step build build
ITERTIME="$BUILD/launcher/itertime"

# 3. What the machine is.
step info "$ITERTIME" info

# 3b. Training conditions: every GPU multiplies bf16 8192^3 matrices back to back at once for
# $ITERTIME_SUSTAINED_S seconds (default 120; 0 skips it), throughput per second beside NVML's SM clock,
# power and temperature: the sustained clock and the spread between GPUs of data/training
# (docs/framework.md, "Measuring the training conditions yourself"). CPU mode: 3 s of small products.
SUSTAINED_S="${ITERTIME_SUSTAINED_S:-120}"
if [[ "$SUSTAINED_S" != 0 ]]; then
  if [[ "$MODE" == gpu ]]; then
    step sustained mpirun -np "$RANKS" "$ITERTIME" calibrate sustained --backend cuda --seconds "$SUSTAINED_S" \
      -o "$OUT/sustained.json"
  else
    step sustained mpirun -np "$RANKS" "$ITERTIME" calibrate sustained --backend cpu --seconds 3 --window-s 0.5 \
      --shape 256,256,256 -o "$OUT/sustained.json"
  fi
fi

# 4. Communication: the NCCL communicator test and the comm sweep need two ranks or more.
if [[ "$MODE" == gpu && "$RANKS" -ge 2 ]]; then
  step nccl-test mpirun -np 2 "$BUILD/tests/mpi/itertime_gpu_tests"
  step comm mpirun -np "$RANKS" "$ITERTIME" calibrate comm --backend cuda -o "$OUT/comm.h5" \
    --min-bytes 1K --max-bytes 256M --step-factor 4 --iters 20
fi

# 5. The job: operators, ground truth, fit and validation under both holdouts (itertime run).
STAGES="comm,ops,groundtruth,validate"
[[ "$RANKS" -ge 2 ]] || STAGES="ops,groundtruth,validate"
step job "$ITERTIME" run "$JOB" -o "$OUT/cal.h5" --ranks "$RANKS" --stages "$STAGES"

# 6. Memory: the memory model against the measured peaks per configuration.
MODEL="$(python3 -c 'import json, os, sys; j = json.load(open(sys.argv[1])); print(os.path.join(os.path.dirname(sys.argv[1]), j["model"]))' "$JOB")"
step memory "$ITERTIME" validate "$OUT/cal.h5" --no-store --out-dir "$OUT/memory" --memory-report "$MODEL"

# 7. The summary.
echo
echo "gpu-run: summary ($MODE mode, $RANKS rank(s), $((SECONDS - STARTED)) s in all; everything in $OUT)"
printf '  %s\n' "${SUMMARY_STEPS[@]}"
python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
def pct(v):
    return "-" if v is None else "%.2f" % v
for name, label in (("validation.json", "leave-one-tuple-out"), ("validation-precision.json", "leave-one-precision-out")):
    path = os.path.join(out, "cal-validation", name)
    if not os.path.exists(path):
        print("  (no %s)" % name)
        continue
    v = json.load(open(path))
    print("\n  MAPE per precision, %s (%%; floor = the ground truth's own round spread)" % label)
    print("  %-10s %3s %8s %8s %8s %10s" % ("precision", "n", "floor", "aware", "blind", "blind_raw"))
    for g in v["mape_per_precision"] + [dict(v["mape_overall"], group="overall")]:
        print("  %-10s %3d %8s %8s %8s %10s" % (g["group"], g["count"], pct(g.get("floor_pct")), pct(g.get("mape_pct")),
                                                pct(g.get("blind_mape_pct")), pct(g.get("blind_raw_mape_pct"))))
path = os.path.join(out, "sustained.json")
if os.path.exists(path):
    p = json.load(open(path))
    print("\n  sustained %s GEMM %dx%dx%d, %.0f s on %d rank(s) at once (TFLOP/s; SM clock MHz, power W)" % (
        p["dtype"], p["shape"]["m"], p["shape"]["n"], p["shape"]["k"], p["seconds"], len(p["summary"]["ranks"])))
    f = lambda v, fmt: "-" if v is None else fmt % v
    for r in p["summary"]["ranks"]:
        print("  rank %d %-24s first %s, 30-40 s %s, last third %s; clock %s -> %s, power %s, limit %s" % (
            r["rank"], r["device"], f(r["first_tflops"], "%.1f"), f(r["warm_tflops"], "%.1f"), f(r["sustained_tflops"], "%.1f"),
            f(r["first_sm_clock_mhz"], "%.0f"), f(r["sustained_sm_clock_mhz"], "%.0f"), f(r["sustained_power_w"], "%.0f"),
            f(r["power_limit_w"], "%.0f")))
    s = p["summary"]
    print("  sustained / 30-40 s %s, sustained / first %s, rank sigma %s" % (
        f(s["sustained_over_warm"], "%.4f"), f(s["sustained_over_first"], "%.4f"), f(s["rank_sigma"], "%.4f")))
path = os.path.join(out, "cal-validation", "validation.json")
if os.path.exists(path):
    print("\n  %-52s %12s %12s %7s" % ("configuration", "measured_ms", "predicted_ms", "APE(%)"))
    for c in json.load(open(path))["configurations"]:
        if c.get("status") == "ok":
            print("  %-52s %12.2f %12.2f %7.2f" % (c["key"], c["measured_us"] / 1e3, c["predicted_us"] / 1e3, c["ape_pct"]))
        else:
            print("  %-52s %12s %12s %7s  %s" % (c["key"], "-", "-", "-", c.get("status", "")))
EOF
MEMLOG="$(ls "$OUT"/*-memory.log)"
echo
grep -E '^# measured / model|^# no stage' "$MEMLOG" | sed 's/^# /  memory: /' || true
