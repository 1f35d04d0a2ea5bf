// dtype.cpp: element types and backends: names, sizes, parsing (dtype.hpp).
#include "common/dtype.hpp"

#include <algorithm>
#include <cctype>

#include "common/enum_names.hpp"
#include "common/errors.hpp"

namespace itertime {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// The short names (parse_dtype also takes the long ones and C's).
constexpr EnumName<DType> kDTypeNames[] = {{DType::kFloat32, "fp32"}, {DType::kFloat16, "fp16"}, {DType::kBFloat16, "bf16"},
                                           {DType::kFloat64, "fp64"}, {DType::kInt8, "int8"},    {DType::kInt32, "int32"},
                                           {DType::kInt64, "int64"},  {DType::kBool, "bool"}};
static_assert(enum_names_one_to_one(kDTypeNames));

}  // namespace

std::size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
  }
  throw InternalError("unknown DType", __FILE__, __LINE__);
}

std::string to_string(DType dtype) { return name_of(kDTypeNames, dtype, "DType"); }

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> kAll = values_in(kDTypeNames);
  return kAll;
}

DType parse_dtype(std::string_view text) {
  const std::string name = lower(text);
  if (name == "fp32" || name == "float32" || name == "float") return DType::kFloat32;
  if (name == "fp16" || name == "float16" || name == "half") return DType::kFloat16;
  if (name == "bf16" || name == "bfloat16") return DType::kBFloat16;
  if (name == "fp64" || name == "float64" || name == "double") return DType::kFloat64;
  if (name == "int8" || name == "char") return DType::kInt8;
  if (name == "int32" || name == "int") return DType::kInt32;
  if (name == "int64" || name == "long") return DType::kInt64;
  if (name == "bool") return DType::kBool;
  throw UserError("unknown dtype '" + std::string(text) + "': use one of fp32, fp16, bf16, fp64, int8, int32, int64, bool");
}

bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat64;
}

std::string to_string(Backend backend) { return backend == Backend::kCpu ? "cpu" : "cuda"; }

Backend parse_backend(std::string_view text) {
  const std::string name = lower(text);
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda" || name == "gpu") return Backend::kCuda;
  throw UserError("unknown backend '" + std::string(text) + "': use cpu or cuda");
}

}  // namespace itertime
