// torch_info.cpp: see torch_info.hpp.
#include "calibrate/torch_info.hpp"

#include <dlfcn.h>
#include <torch/torch.h>
#include <torch/version.h>

namespace itertime::calibrate {
namespace {

// OpenBLAS's thread-count entry points, when the process has OpenBLAS loaded (else null).
using GetThreads = int (*)();
using SetThreads = void (*)(int);
GetThreads openblas_get() { return reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")); }
SetThreads openblas_set() { return reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")); }

}  // namespace

TorchInfo query_torch() {
  TorchInfo info;
  info.compiled = true;
  info.version = TORCH_VERSION;
  info.cuda_available = torch::cuda::is_available();
  info.intra_op_threads = torch::get_num_threads();
  if (const GetThreads get = openblas_get()) info.blas_threads = get();
  return info;
}

void set_compute_threads(int threads) {
  torch::set_num_threads(threads);
  if (const SetThreads set = openblas_set()) set(threads);
}

}  // namespace itertime::calibrate
