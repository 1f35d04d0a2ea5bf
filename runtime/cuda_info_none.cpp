// cuda_info_none.cpp: query_cuda() for builds without CUDA (ITERTIME_WITH_CUDA=OFF or not found).
#include "runtime/cuda_info.hpp"

namespace itertime {

CudaInfo query_cuda() {
  CudaInfo info;
  info.status = "built without CUDA (configure with -DITERTIME_WITH_CUDA=ON on a machine with nvcc and NCCL)";
  return info;
}

}  // namespace itertime
