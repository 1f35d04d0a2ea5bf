// torch_info.hpp: the LibTorch this build links, without pulling torch headers into the includer.
#pragma once

#include <string>

namespace itertime::calibrate {

struct TorchInfo {
  bool compiled = false;
  std::string version;        // e.g. "1.13.1"
  bool cuda_available = false;
  int intra_op_threads = 0;
};

TorchInfo query_torch();

}  // namespace itertime::calibrate
