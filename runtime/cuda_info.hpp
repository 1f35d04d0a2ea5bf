// cuda_info.hpp: what CUDA and NCCL can tell about this machine, without any CUDA header.
// Invariants: callable on any machine; without a CUDA build or without a device it reports an empty
// device list and says why in `status`, never throws.
#pragma once

#include <string>
#include <vector>

namespace itertime {

struct CudaInfo {
  bool compiled = false;        // built with CUDA
  std::string status;           // "ok", or why there are no devices
  std::string runtime_version;  // e.g. "13.0"
  std::string driver_version;   // empty without a driver
  std::string nccl_version;     // e.g. "2.27.3"
  std::vector<std::string> device_names;
  std::vector<double> device_memory_gib;
};

CudaInfo query_cuda();

}  // namespace itertime
