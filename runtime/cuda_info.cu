// cuda_info.cu: CUDA runtime and NCCL queries (compiled by nvcc when ITERTIME_WITH_CUDA finds CUDA).
#include <cuda_runtime.h>
#include <nccl.h>

#include "runtime/cuda_info.hpp"

namespace itertime {
namespace {

std::string version_text(int version) { return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10); }

}  // namespace

CudaInfo query_cuda() {
  CudaInfo info;
  info.compiled = true;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) info.runtime_version = version_text(runtime);
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) info.driver_version = version_text(driver);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    info.nccl_version =
        std::to_string(nccl / 10000) + "." + std::to_string((nccl % 10000) / 100) + "." + std::to_string(nccl % 100);
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    info.status = std::string("no CUDA device: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error
    return info;
  }
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) continue;
    info.device_names.emplace_back(properties.name);
    info.device_memory_gib.push_back(static_cast<double>(properties.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  }
  info.status = count > 0 ? "ok" : "no CUDA device";
  return info;
}

}  // namespace itertime
