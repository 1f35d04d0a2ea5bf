#include "calibrate/torch_info.hpp"

#include <torch/torch.h>
#include <torch/version.h>

namespace itertime::calibrate {

TorchInfo query_torch() {
  TorchInfo info;
  info.compiled = true;
  info.version = TORCH_VERSION;
  info.cuda_available = torch::cuda::is_available();
  info.intra_op_threads = torch::get_num_threads();
  return info;
}

}  // namespace itertime::calibrate
