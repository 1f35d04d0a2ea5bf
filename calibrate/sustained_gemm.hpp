// sustained_gemm.hpp: `itertime calibrate sustained`: every rank multiplies two random normal
// matrices back to back on its device (a GPU a rank, or a CPU core) for a stated time, all ranks at
// once (the whole node under load, as in training), and records the throughput of each window beside
// the GPU's SM clock, power and temperature (NVML, runtime/gpu_telemetry.hpp). Rank 0 gets the probe
// (common/sustained_throughput.hpp), which the launcher writes as JSON: what the training-condition
// figures of data/training (the sustained clock, the spread between GPUs) are measured with
// (docs/framework.md).
// Invariants:
// - Collective over MPI_COMM_WORLD: the ranks start together (a barrier after the warm-up) and each
//   runs for `seconds` of its own clock; rank 0 gets every rank's series after all finished.
// - Windows close at the first check after `window_s`; a check synchronizes the device every ~20 ms of
//   GEMMs, so the device idles at most one synchronization per check.
// - Random normal data (torch::randn, as training's activations and the MAMF finder's inputs): a GEMM's
//   power, and so a power-limited clock, depends on its data.
#pragma once

#include <cstdint>
#include <optional>

#include "common/dtype.hpp"
#include "common/sustained_throughput.hpp"

namespace itertime::calibrate {

struct SustainedGemmOptions {
  Backend backend = Backend::kCpu;
  DType dtype = DType::kBFloat16;
  int64_t m = 8192, n = 8192, k = 8192;
  double seconds = 180;
  double window_s = 1;
  int cpu_threads = 1;  // CPU ranks: threads each rank's GEMMs use
};

// Runs the probe on every rank (collective); the probe on rank 0, nullopt elsewhere. The options are
// checked by the caller (launcher/cmd_calibrate.cpp).
std::optional<SustainedProbe> run_sustained_gemm(const SustainedGemmOptions& options);

}  // namespace itertime::calibrate
