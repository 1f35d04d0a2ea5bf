// torch_info.hpp: the LibTorch this build links, and the threads one rank computes with, without pulling
// torch headers into the includer.
// Invariants:
//  - set_compute_threads(n) sets LibTorch's intra-op pool to n and, when the BLAS that LibTorch calls
//    for fp32/fp64 products is OpenBLAS (found at run time by its symbol, no link dependency), that
//    library's own pool too: torch::set_num_threads does not reach it, and Debian's OpenBLAS otherwise
//    starts one spinning thread per core in every rank, so ranks sharing a node fight over the cores.
//  - query_torch() caches nothing: each call probes again (the fp16 product is two 2x2 tensors).
//  - Without LibTorch (torch_info_none.cpp) both are no-ops: query_torch() reports compiled = false,
//    cuda_version "none" and attention_backends {"none"}.
#pragma once

#include <string>
#include <vector>

namespace itertime::calibrate {

struct TorchInfo {
  bool compiled = false;
  std::string version;       // e.g. "1.13.0" (TORCH_VERSION of the headers compiled against)
  std::string cuda_version;  // CUDA runtime LibTorch was built with, e.g. "12.4"; "none" for a CPU-only LibTorch
  bool cuda_available = false;
  bool cpu_fp16_matmul = false;  // torch::mm of two kFloat16 CPU tensors runs (false on 1.13: no Half kernel)
  // "eager" (always, with LibTorch); "sdpa" when torch::scaled_dot_product_attention exists (LibTorch 2.x);
  // with a CUDA LibTorch 2.x, the SDPA CUDA kernels enabled in at::globalContext(): "sdpa:flash",
  // "sdpa:mem-efficient", "sdpa:math", "sdpa:cudnn" (the last where that LibTorch has the switch).
  std::vector<std::string> attention_backends;
  int intra_op_threads = 0;
  int blas_threads = 0;  // OpenBLAS's own pool; 0 when the BLAS is not OpenBLAS
};

TorchInfo query_torch();
void set_compute_threads(int threads);

}  // namespace itertime::calibrate
