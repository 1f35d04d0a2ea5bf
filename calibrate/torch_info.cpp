// torch_info.cpp: see torch_info.hpp.
#include "calibrate/torch_info.hpp"

#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "calibrate/torch_compat.hpp"

#include <exception>

namespace itertime::calibrate {
namespace {

// OpenBLAS's thread-count entry points, when the process has OpenBLAS loaded (else null).
using GetThreads = int (*)();
using SetThreads = void (*)(int);
GetThreads openblas_get() { return reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")); }
SetThreads openblas_set() { return reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")); }

// The CUDA runtime version LibTorch was built with ("12.4"), or "none" for a CPU-only LibTorch: the
// default CUDA hooks (no libtorch_cuda loaded) throw, the real ones return CUDART_VERSION. Needs no GPU.
std::string cuda_build_version() {
  try {
    const long v = at::detail::getCUDAHooks().versionCUDART();
    if (v <= 0) return "none";
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  } catch (const std::exception&) {
    return "none";
  }
}

}  // namespace

TorchInfo query_torch() {
  TorchInfo info;
  info.compiled = true;
  info.version = TORCH_VERSION;
  info.cuda_version = cuda_build_version();
  info.cuda_available = torch::cuda::is_available();
  info.intra_op_threads = torch::get_num_threads();
  if (const GetThreads get = openblas_get()) info.blas_threads = get();
  info.cpu_fp16_matmul = cpu_fp16_matmul();
  info.attention_backends = attention_backends(info.cuda_version != "none");
  return info;
}

void set_compute_threads(int threads) {
  torch::set_num_threads(threads);
  if (const SetThreads set = openblas_set()) set(threads);
}

}  // namespace itertime::calibrate
