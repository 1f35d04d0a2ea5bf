#!/usr/bin/env bash
# calibrate_sustained.sh: `itertime calibrate sustained` on CPU ranks (the same code runs a GPU a rank
# with --backend cuda; docs/framework.md, "Measuring the training conditions yourself").
#   two_ranks  2 ranks for 3 s in windows of 0.5 s: every rank's series is there, its windows add up to
#              the run, throughput is positive; no telemetry on CPU ranks and no sustained-clock figure
#              for a run under 40 s, each saying why; the spread between the 2 ranks is given.
#   mistakes   a user's mistake (an existing output, an unknown dtype, a window longer than the run, a
#              missing folder, a bad shape; fp16 on a LibTorch without CPU fp16 products) exits 2 with one
#              line naming the option, and writes nothing
#              (on 2 ranks for the first, every rank stopping; the others as a singleton, to keep it short).
#
#   calibrate_sustained.sh MPIEXEC "MPIEXEC_FLAGS" ITERTIME [CASE...]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
take_args "MPIEXEC MPIEXEC_FLAGS ITERTIME [CASE...]" "$@"
probe_quiet
ALL_CASES=(two_ranks mistakes)

sustained() {  # sustained RANKS ARGS...: the probe on RANKS CPU ranks (1: a singleton, no launcher), in $WORK
  if [[ $1 == 1 ]]; then
    (cd "$WORK" && "$ITERTIME" calibrate sustained "${@:2}" >"$OUT" 2>"$ERR")
  else
    (cd "$WORK" && "$MPIEXEC" "${QUIET[@]}" -n "$1" "${MPIEXEC_FLAGS[@]}" "$ITERTIME" calibrate sustained "${@:2}" \
      >"$OUT" 2>"$ERR")
  fi
  STATUS=$?
}

case_two_ranks() {
  sustained 2 --seconds 3 --window-s 0.5 --shape 128,128,128 -o probe.json
  expect_status 0
  python3 - "$WORK/probe.json" <<'PY' || fail "probe.json does not hold what it should (above)"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["probe"] == "sustained_gemm" and p["backend"] == "cpu" and p["dtype"] == "fp32", p
assert p["shape"] == {"m": 128, "n": 128, "k": 128}, p["shape"]
ranks = p["summary"]["ranks"]
assert [r["rank"] for r in ranks] == [0, 1], ranks
for r, w in zip(ranks, p["windows"]):
    assert r["device"] == "cpu" and r["telemetry"].startswith("none: a CPU rank"), r
    assert r["first_tflops"] > 0 and r["sustained_tflops"] > 0 and r["warm_tflops"] is None, r
    n = len(w["tflops"])
    # Windows tile the run from its start: each at least 0.5 s but the last, which ends the run at or after 3 s;
    # so at most 6 full windows and the last (what load does to a check's length does not change that).
    assert 1 <= n <= 7, n
    assert all(s >= 0.5 for s in w["seconds"][:-1]), w["seconds"]
    assert w["start_s"][0] == 0, w["start_s"]
    for a, secs, b in zip(w["start_s"], w["seconds"], w["start_s"][1:]):
        assert abs(a + secs - b) <= 1e-6, (a, secs, b)
    assert w["start_s"][-1] + w["seconds"][-1] >= 3.0, w["start_s"][-1] + w["seconds"][-1]
    for calls, secs, tf in zip(w["calls"], w["seconds"], w["tflops"]):
        assert abs(calls * 2 * 128**3 / secs / 1e12 - tf) <= 1e-9 * tf, (calls, secs, tf)
    assert all(c is None for c in w["sm_clock_mhz"]), w["sm_clock_mhz"]
figures = p["training_figures"]
assert figures["sustained_clock"]["value"] is None and "shorter than 40 s" in figures["sustained_clock"]["why"], figures
sigma = figures["gpu_speed_sigma"]
assert sigma["value"] is not None and sigma["value"] >= 0 and "x 2 at once" in sigma["source"], sigma
assert p["summary"]["slowest_over_fastest"] <= 1, p["summary"]
PY
}

# mistake RANKS ARGS... -- TEXT: the probe on RANKS ranks exits 2, stderr is one line holding TEXT, nothing new is
# written.
mistake() {
  local ranks=$1 args=() text
  shift
  while [[ $1 != -- ]]; do args+=("$1"); shift; done
  text="$2"
  local before
  before="$(ls -A "$WORK" | sort)"
  sustained "$ranks" "${args[@]}"
  expect_status 2
  expect_stderr "$text"
  # itertime's own lines: one (rank 0 reports, the others stop quietly). Open MPI 5's launcher adds its
  # own report of the exit status, which is not itertime's; a singleton's stderr is the one line alone.
  [[ $(grep -c '^itertime' "$ERR") -eq 1 ]] || fail "itertime wrote not one line for ${args[*]}"
  [[ $ranks -gt 1 || $(grep -c . "$ERR") -eq 1 ]] || fail "stderr is not one line for ${args[*]}"
  [[ "$(ls -A "$WORK" | sort)" == "$before" ]] || fail "files changed for ${args[*]}"
  [[ "$(cat "$WORK/kept.json")" == "keep" ]] || fail "kept.json was touched by ${args[*]}"
}

case_mistakes() {
  echo keep >"$WORK/kept.json"
  mistake 2 --seconds 1 -o kept.json -- "-o kept.json: file exists; pass --force"  # every rank stops
  mistake 1 --seconds 1 --dtype int8 -o new.json -- "--dtype int8: the probe multiplies bf16, fp16 or fp32"
  mistake 1 --seconds 1 --window-s 2 -o new.json -- "--window-s must be above 0 and at most --seconds"
  mistake 1 --seconds 1 -o no/such/folder/p.json -- "its folder does not exist"
  mistake 1 --seconds 1 --shape 128,128 -o new.json -- "--shape: give three positive sizes"
  mistake 1 --seconds 0 -o new.json -- "--seconds must be above 0"
  # fp16 on CPU where LibTorch has no CPU fp16 product (1.13; `itertime info` says which).
  if "$ITERTIME" info 2>/dev/null | grep -q '^  CPU fp16 matmul *no'; then
    mistake 1 --seconds 1 --dtype fp16 -o new.json -- "--dtype fp16 with --backend cpu: this LibTorch cannot multiply fp16"
  fi
}

run_cases
