// torch_info.hpp: the LibTorch this build links, and the threads one rank computes with, without pulling
// torch headers into the includer.
// Invariants:
//  - set_compute_threads(n) sets LibTorch's intra-op pool to n and, when the BLAS that LibTorch calls
//    for fp32/fp64 products is OpenBLAS (found at run time by its symbol, no link dependency), that
//    library's own pool too: torch::set_num_threads does not reach it, and Debian's OpenBLAS otherwise
//    starts one spinning thread per core in every rank, so ranks sharing a node fight over the cores.
//  - Without LibTorch (torch_info_none.cpp) both are no-ops that report 0.
#pragma once

#include <string>

namespace itertime::calibrate {

struct TorchInfo {
  bool compiled = false;
  std::string version;        // e.g. "1.13.1"
  bool cuda_available = false;
  int intra_op_threads = 0;
  int blas_threads = 0;       // OpenBLAS's own pool; 0 when the BLAS is not OpenBLAS
};

TorchInfo query_torch();
void set_compute_threads(int threads);

}  // namespace itertime::calibrate
