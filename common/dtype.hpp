// dtype.hpp: element types that itertime measures, stores and models.
// Invariants: every DType has exactly one canonical name (the one to_string prints and parse_dtype
// accepts, case-insensitively, along with common aliases) and a fixed size in bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace itertime {

enum class DType { kFloat32, kFloat16, kBFloat16, kFloat64, kInt8, kInt32, kInt64, kBool };

std::size_t dtype_bytes(DType dtype);
std::string to_string(DType dtype);
// Throws UserError naming the text and the accepted names.
DType parse_dtype(std::string_view text);
bool is_floating(DType dtype);
const std::vector<DType>& all_dtypes();

enum class Backend { kCpu, kCuda };

std::string to_string(Backend backend);
Backend parse_backend(std::string_view text);

}  // namespace itertime
