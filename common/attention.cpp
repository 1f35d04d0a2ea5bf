// attention.cpp: attention kernels: names and parsing (attention.hpp).
#include "common/attention.hpp"

#include "common/enum_names.hpp"
#include "common/errors.hpp"

namespace itertime {

constexpr EnumName<AttentionKernel> kAttentionNames[] = {
    {AttentionKernel::kEager, "eager"}, {AttentionKernel::kSdpa, "sdpa"}, {AttentionKernel::kAuto, "auto"}};
static_assert(enum_names_one_to_one(kAttentionNames));

std::string to_string(AttentionKernel kernel) { return name_of(kAttentionNames, kernel, "AttentionKernel"); }

AttentionKernel parse_attention(std::string_view text) { return parse_named(kAttentionNames, text, "attention"); }

}  // namespace itertime
