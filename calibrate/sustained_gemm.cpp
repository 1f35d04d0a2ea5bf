// sustained_gemm.cpp: see sustained_gemm.hpp.
#include "calibrate/sustained_gemm.hpp"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "calibrate/torch_compat.hpp"
#include "calibrate/torch_info.hpp"
#include "common/errors.hpp"
#include "common/sustained_throughput.hpp"
#include "runtime/cuda_info.hpp"
#include "runtime/gpu_telemetry.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/nccl_communicator.hpp"
#include "runtime/string_gather.hpp"

namespace itertime::calibrate {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kCheckEvery_s = 0.02;  // synchronize and look at the clock about this often

double seconds_between(Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double>(to - from).count(); }

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

// One rank's series: GEMMs back to back for options.seconds, a window closed at the first check after
// options.window_s. `start_together` runs after the warm-up, before the first timed call.
template <typename StartTogether>
RankSeries measure_rank(const SustainedGemmOptions& options, const torch::Device& device, const GpuTelemetry& telemetry,
                        StartTogether&& start_together) {
  const auto tensor_options = torch::TensorOptions().dtype(to_torch(options.dtype)).device(device);
  const torch::Tensor a = torch::randn({options.m, options.k}, tensor_options);
  const torch::Tensor b = torch::randn({options.k, options.n}, tensor_options);
  torch::Tensor c = torch::empty({options.m, options.n}, tensor_options);
  const auto synchronize = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };
  const double flop_per_call = 2.0 * static_cast<double>(options.m) * options.n * options.k;

  // Warm-up: the library's first calls (kernel choice, workspace), then one timed call for the batch size.
  for (int i = 0; i < 2; ++i) torch::matmul_out(c, a, b);
  synchronize();
  const Clock::time_point probe_start = Clock::now();
  torch::matmul_out(c, a, b);
  synchronize();
  const double one_call_s = std::max(1e-6, seconds_between(probe_start, Clock::now()));
  const int64_t calls_per_check = std::max<int64_t>(1, static_cast<int64_t>(kCheckEvery_s / one_call_s));

  start_together();
  RankSeries series;
  const Clock::time_point run_start = Clock::now();
  Clock::time_point window_start = run_start;
  int64_t window_calls = 0;
  while (true) {
    for (int64_t i = 0; i < calls_per_check; ++i) torch::matmul_out(c, a, b);
    synchronize();
    window_calls += calls_per_check;
    const Clock::time_point now = Clock::now();
    const double window_seconds = seconds_between(window_start, now);
    const bool run_over = seconds_between(run_start, now) >= options.seconds;
    if (window_seconds >= options.window_s || run_over) {
      const GpuSample sample = telemetry.sample();
      series.windows.push_back({seconds_between(run_start, window_start), window_seconds, window_calls,
                                window_calls * flop_per_call / window_seconds / 1e12, sample.sm_clock_mhz, sample.power_w,
                                sample.temperature_c});
      window_start = now;
      window_calls = 0;
    }
    if (run_over) break;
  }
  return series;
}

}  // namespace

std::optional<SustainedProbe> run_sustained_gemm(const SustainedGemmOptions& options) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  torch::Device device(torch::kCPU);
  std::string device_name = "cpu";
  GpuTelemetry telemetry = GpuTelemetry::none("none: a CPU rank");
  if (options.backend == Backend::kCuda) {
    const int index = bind_cuda_device(node_local_rank(MPI_COMM_WORLD));
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
    const CudaInfo cuda = query_cuda();
    if (index < static_cast<int>(cuda.device_names.size())) device_name = cuda.device_names[index];
    telemetry = GpuTelemetry::open_for_cuda_device(index);
  } else {
    set_compute_threads(options.cpu_threads);
  }
  RankSeries series = measure_rank(options, device, telemetry, [] { quiet_barrier(MPI_COMM_WORLD); });
  series.rank = rank;
  series.device = device_name;
  series.telemetry = telemetry.status();
  series.power_limit_w = telemetry.power_limit_w();
  series.max_sm_clock_mhz = telemetry.max_sm_clock_mhz();
  const std::vector<std::string> gathered = gather_strings(rank_series_json(series), MPI_COMM_WORLD);
  if (rank != 0) return std::nullopt;
  SustainedProbe probe;
  probe.backend = to_string(options.backend);
  probe.dtype = to_string(options.dtype);
  probe.m = options.m;
  probe.n = options.n;
  probe.k = options.k;
  probe.seconds = options.seconds;
  probe.window_s = options.window_s;
  probe.date_utc = utc_now();
  for (const std::string& text : gathered) probe.ranks.push_back(parse_rank_series_json(text));
  return probe;
}

}  // namespace itertime::calibrate
