// torch_info_none.cpp: query_torch() and set_compute_threads() for builds without LibTorch
// (ITERTIME_WITH_TORCH=OFF).
#include "calibrate/torch_info.hpp"

namespace itertime::calibrate {

TorchInfo query_torch() {
  TorchInfo info;
  info.version = "none";
  info.cuda_version = "none";
  info.attention_backends = {"none"};
  return info;
}
void set_compute_threads(int) {}

}  // namespace itertime::calibrate
