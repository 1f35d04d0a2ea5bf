// training_conditions.hpp: what real training costs on a GPU beyond its isolated-kernel figures (issue 46):
// the kernel figures (gpu_kernels.hpp) are ceilings measured one kernel at a time; a training step also
// runs at the clock the GPU sustains under its power limit, computes beside communication kernels that
// take SMs and memory bandwidth, waits for the host where the host issues kernels slower than the GPU
// runs them, and waits for the slowest of its GPUs. Each is a named term with its published source in
// data/training/<gpu>.json (docs/framework.md "Training conditions"); nothing here is fitted to a step time.
// Invariants:
//  - TrainingConditions::neutral() changes nothing: every factor 1, every slowdown and host time 0
//    (the kernel figures' own conditions); predictions made with it equal those of the kernel figures alone.
//  - A file that exists is complete: every term present with a value, a unit, a source, and a rule where it
//    is derived; a term whose figure was not found says so in its source and holds its neutral value.
//    Every mistake is one UserError naming the file and the field.
//  - The terms' effects (framework_predictor.cpp) never make a prediction faster: clock <= 1, slowdowns,
//    host time and spread >= 0.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/hardware_spec.hpp"

namespace itertime::predict::framework {

struct TrainingConditions {
  std::string gpu;   // the hardware description's name ("" for neutral)
  std::string path;  // the file read ("" for neutral)
  // Compute kernels (GEMM, attention) run at this fraction of the clock their figures were measured at.
  double sustained_clock_fraction = 1.0;
  // Compute beside an NCCL collective takes (1 + this) times its own time while the two overlap (SMs and
  // memory bandwidth shared); the collective's own time is unchanged.
  double overlap_compute_slowdown = 0.0;
  // SMs Transformer Engine's userbuffers take from the GEMM beside them under TP communication overlap.
  int tp_overlap_sms = 0;
  int sm_count = 0;  // the GPU's SMs (the hardware description's)
  // CPU time to issue one kernel from Megatron-Core / TE's Python (PyTorch eager dispatch); the GPU waits
  // where the kernels of an iteration take less time than the host needs to issue them.
  double host_us_per_kernel = 0.0;
  // One standard deviation of a GPU's speed across GPUs of one model (silicon, cooling), as a fraction:
  // a synchronous step waits for the slowest of its GPUs.
  double gpu_speed_sigma = 0.0;
  std::map<std::string, std::string> sources;  // term -> its source text (+ rule)
  std::string summary_text;                    // the file's one-line summary

  static TrainingConditions neutral() { return {}; }
  bool is_neutral() const { return path.empty(); }
  // The slowdown of a GEMM that shares the GPU with userbuffers: sm / (sm - tp_overlap_sms) - 1 (0 without).
  double userbuffers_slowdown() const;
  // The expected slowdown of a step of `gpus` GPUs from the slowest: gpu_speed_sigma x E[max of gpus
  // standard normal draws] (expected_max_standard_normal).
  double straggler_slowdown(int64_t gpus) const;
  std::string summary() const;  // for a prediction's notes
};

// E[max of n independent standard normal draws], by Blom's approximation Phi^-1((n - 0.375) / (n + 0.25))
// (within 0.5% of the exact value for n >= 2); 0 for n <= 1. Pure.
double expected_max_standard_normal(int64_t n);

// <source dir>/data/training, or $ITERTIME_TRAINING_DIR when set and non-empty.
std::string training_conditions_dir();
// Reads <dir>/<hardware.name>.json. A GPU without a file gets neutral() (the prediction's notes say so).
TrainingConditions load_training_conditions(const HardwareSpec& hardware, const std::string& dir = training_conditions_dir());

}  // namespace itertime::predict::framework
