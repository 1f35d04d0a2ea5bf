// torch_info_none.cpp: query_torch() for builds without LibTorch (ITERTIME_WITH_TORCH=OFF).
#include "calibrate/torch_info.hpp"

namespace itertime::calibrate {

TorchInfo query_torch() { return TorchInfo{}; }

}  // namespace itertime::calibrate
