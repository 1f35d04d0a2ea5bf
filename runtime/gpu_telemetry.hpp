// gpu_telemetry.hpp: a GPU's SM clock, power and temperature while it works, read from NVML
// (libnvidia-ml.so.1, the driver's library) opened at run time, so that nothing is needed to build and
// a machine without a driver simply has no telemetry.
// Invariants:
// - Never throws: without NVML, or when a query fails, the figure is absent and `status()` says why.
// - One NVML session per object (nvmlInit on open, nvmlShutdown in the destructor; NVML counts them).
// - The device is NVML's index for the rank's CUDA device: the rank's entry of CUDA_VISIBLE_DEVICES
//   (an index, or a "GPU-..." UUID) when it is set, else the CUDA index itself. CUDA orders devices
//   fastest first and NVML by PCI bus, which agree on a node of identical GPUs (docs/framework.md).
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace itertime {

struct GpuSample {
  std::optional<double> sm_clock_mhz;
  std::optional<double> power_w;
  std::optional<double> temperature_c;
};

class GpuTelemetry {
 public:
  // Telemetry of CUDA device `cuda_index` of this process.
  static GpuTelemetry open_for_cuda_device(int cuda_index);
  // No telemetry (a CPU rank), with the reason `status()` gives.
  static GpuTelemetry none(const std::string& why);

  GpuTelemetry(GpuTelemetry&&) noexcept;
  GpuTelemetry& operator=(GpuTelemetry&&) noexcept;
  ~GpuTelemetry();

  bool available() const;
  const std::string& status() const { return status_; }  // "nvml", or why there is none
  GpuSample sample() const;
  std::optional<double> power_limit_w() const;
  std::optional<double> max_sm_clock_mhz() const;

 private:
  struct Nvml;
  GpuTelemetry(std::unique_ptr<Nvml> nvml, std::string status);
  std::unique_ptr<Nvml> nvml_;
  std::string status_;
};

}  // namespace itertime
