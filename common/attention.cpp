// attention.cpp: attention kernels: names and parsing (attention.hpp).
#include "common/attention.hpp"

#include "common/errors.hpp"

namespace itertime {

std::string to_string(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kAuto: return "auto";
    case AttentionKernel::kEager: return "eager";
    case AttentionKernel::kSdpa: return "sdpa";
  }
  throw InternalError("unknown AttentionKernel", __FILE__, __LINE__);
}

AttentionKernel parse_attention(std::string_view text) {
  for (AttentionKernel kernel : {AttentionKernel::kAuto, AttentionKernel::kEager, AttentionKernel::kSdpa}) {
    if (to_string(kernel) == text) return kernel;
  }
  throw UserError("unknown attention '" + std::string(text) + "': use one of eager, sdpa, auto");
}

}  // namespace itertime
