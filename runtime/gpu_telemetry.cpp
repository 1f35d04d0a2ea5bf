// gpu_telemetry.cpp: see gpu_telemetry.hpp. NVML's C entry points are declared here by their
// documented signatures (nvml.h: nvmlReturn_t is an int, 0 success; nvmlDevice_t an opaque pointer),
// so that no CUDA header is needed.
#include "runtime/gpu_telemetry.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <sstream>
#include <vector>

namespace itertime {
namespace {

using NvmlDevice = void*;
using InitFn = int (*)();
using ShutdownFn = int (*)();
using HandleByIndexFn = int (*)(unsigned, NvmlDevice*);
using HandleByUuidFn = int (*)(const char*, NvmlDevice*);
using ClockFn = int (*)(NvmlDevice, int, unsigned*);  // nvmlDeviceGetClockInfo / GetMaxClockInfo
using PowerFn = int (*)(NvmlDevice, unsigned*);       // milliwatts
using TemperatureFn = int (*)(NvmlDevice, int, unsigned*);
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;         // NVML_CLOCK_SM
constexpr int kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU

template <typename Fn>
Fn symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

// The rank's entry of CUDA_VISIBLE_DEVICES for CUDA index `cuda_index`, or nothing when it is unset.
std::optional<std::string> visible_device_entry(int cuda_index) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return std::nullopt;
  std::vector<std::string> entries;
  std::stringstream list(visible);
  for (std::string entry; std::getline(list, entry, ',');) entries.push_back(entry);
  if (cuda_index < 0 || cuda_index >= static_cast<int>(entries.size())) return std::string();
  return entries[cuda_index];
}

}  // namespace

struct GpuTelemetry::Nvml {
  void* library = nullptr;
  bool initialized = false;
  NvmlDevice device = nullptr;
  ClockFn clock = nullptr;
  ClockFn max_clock = nullptr;
  PowerFn power = nullptr;
  PowerFn power_limit = nullptr;
  TemperatureFn temperature = nullptr;

  ~Nvml() {
    if (initialized) {
      if (auto shutdown = symbol<ShutdownFn>(library, "nvmlShutdown")) shutdown();
    }
    if (library != nullptr) dlclose(library);
  }
};

GpuTelemetry::GpuTelemetry(std::unique_ptr<Nvml> nvml, std::string status) : nvml_(std::move(nvml)), status_(std::move(status)) {}
GpuTelemetry::GpuTelemetry(GpuTelemetry&&) noexcept = default;
GpuTelemetry& GpuTelemetry::operator=(GpuTelemetry&&) noexcept = default;
GpuTelemetry::~GpuTelemetry() = default;

GpuTelemetry GpuTelemetry::none(const std::string& why) { return GpuTelemetry(nullptr, why); }

GpuTelemetry GpuTelemetry::open_for_cuda_device(int cuda_index) {
  auto nvml = std::make_unique<Nvml>();
  nvml->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml->library == nullptr) return none("none: libnvidia-ml.so.1 (the driver's NVML) cannot be loaded");
  auto init = symbol<InitFn>(nvml->library, "nvmlInit_v2");
  auto by_index = symbol<HandleByIndexFn>(nvml->library, "nvmlDeviceGetHandleByIndex_v2");
  auto by_uuid = symbol<HandleByUuidFn>(nvml->library, "nvmlDeviceGetHandleByUUID");
  nvml->clock = symbol<ClockFn>(nvml->library, "nvmlDeviceGetClockInfo");
  nvml->max_clock = symbol<ClockFn>(nvml->library, "nvmlDeviceGetMaxClockInfo");
  nvml->power = symbol<PowerFn>(nvml->library, "nvmlDeviceGetPowerUsage");
  nvml->power_limit = symbol<PowerFn>(nvml->library, "nvmlDeviceGetEnforcedPowerLimit");
  nvml->temperature = symbol<TemperatureFn>(nvml->library, "nvmlDeviceGetTemperature");
  if (init == nullptr || by_index == nullptr || by_uuid == nullptr) return none("none: NVML lacks its entry points");
  if (init() != kNvmlSuccess) return none("none: nvmlInit failed");
  nvml->initialized = true;
  const std::optional<std::string> entry = visible_device_entry(cuda_index);
  int status = -1;
  if (!entry) {
    status = by_index(static_cast<unsigned>(cuda_index), &nvml->device);
  } else if (entry->rfind("GPU-", 0) == 0) {
    status = by_uuid(entry->c_str(), &nvml->device);
  } else if (!entry->empty() && entry->find_first_not_of("0123456789") == std::string::npos) {
    status = by_index(static_cast<unsigned>(std::stoul(*entry)), &nvml->device);
  } else {
    return none("none: CUDA_VISIBLE_DEVICES entry '" + *entry + "' names no NVML device (an index or a GPU- UUID)");
  }
  if (status != kNvmlSuccess) return none("none: NVML has no handle for CUDA device " + std::to_string(cuda_index));
  return GpuTelemetry(std::move(nvml), "nvml");
}

bool GpuTelemetry::available() const { return nvml_ != nullptr; }

GpuSample GpuTelemetry::sample() const {
  GpuSample out;
  if (!nvml_) return out;
  unsigned value = 0;
  if (nvml_->clock && nvml_->clock(nvml_->device, kNvmlClockSm, &value) == kNvmlSuccess) out.sm_clock_mhz = value;
  if (nvml_->power && nvml_->power(nvml_->device, &value) == kNvmlSuccess) out.power_w = value / 1000.0;
  if (nvml_->temperature && nvml_->temperature(nvml_->device, kNvmlTemperatureGpu, &value) == kNvmlSuccess)
    out.temperature_c = value;
  return out;
}

std::optional<double> GpuTelemetry::power_limit_w() const {
  unsigned milliwatts = 0;
  if (!nvml_ || !nvml_->power_limit || nvml_->power_limit(nvml_->device, &milliwatts) != kNvmlSuccess) return std::nullopt;
  return milliwatts / 1000.0;
}

std::optional<double> GpuTelemetry::max_sm_clock_mhz() const {
  unsigned mhz = 0;
  if (!nvml_ || !nvml_->max_clock || nvml_->max_clock(nvml_->device, kNvmlClockSm, &mhz) != kNvmlSuccess) return std::nullopt;
  return mhz;
}

}  // namespace itertime
