// aten_emulation.cpp: see aten_emulation.hpp.
#include "predict/builder/aten_emulation.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

namespace itertime::predict {

Dims contiguous_strides(const Dims& sizes) {
  Dims strides(sizes.size(), 1);
  int64_t expected = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = expected;
    expected *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

TensorLayout contiguous(DType dtype, const Dims& sizes) { return TensorLayout{dtype, sizes, contiguous_strides(sizes)}; }

TensorLayout strided(DType dtype, Dims sizes, Dims strides) { return TensorLayout{dtype, std::move(sizes), std::move(strides)}; }

// ATen walks the old dimensions innermost first in chunks of memory-contiguous dimensions and lays the
// new dimensions over each chunk; a new dimension that straddles two chunks has no stride.
std::optional<Dims> view_strides(const Dims& sizes, const Dims& strides, const Dims& new_sizes) {
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  if (numel == 0 || sizes.empty()) return contiguous_strides(new_sizes);
  Dims out(new_sizes.size(), 0);
  int64_t view_dim = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t chunk_numel = 1;
  int64_t view_numel = 1;
  for (std::size_t dim = sizes.size(); dim-- > 0;) {
    chunk_numel *= sizes[dim];
    const bool chunk_ends = dim == 0 || (sizes[dim - 1] != 1 && strides[dim - 1] != chunk_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_dim >= 0 && (view_numel < chunk_numel || new_sizes[static_cast<std::size_t>(view_dim)] == 1)) {
      out[static_cast<std::size_t>(view_dim)] = view_numel * chunk_base_stride;
      view_numel *= new_sizes[static_cast<std::size_t>(view_dim)];
      view_dim--;
    }
    if (view_numel != chunk_numel) return std::nullopt;
    if (dim > 0) {
      chunk_base_stride = strides[dim - 1];
      chunk_numel = 1;
      view_numel = 1;
    }
  }
  if (view_dim != -1) return std::nullopt;
  return out;
}

TensorLayout reshaped(const TensorLayout& tensor, const Dims& new_sizes) {
  if (auto strides = view_strides(tensor.sizes, tensor.strides, new_sizes)) {
    return strided(tensor.dtype, new_sizes, std::move(*strides));
  }
  return contiguous(tensor.dtype, new_sizes);
}

TensorLayout transposed(const TensorLayout& tensor, std::size_t dim_a, std::size_t dim_b) {
  TensorLayout out = tensor;
  std::swap(out.sizes[dim_a], out.sizes[dim_b]);
  std::swap(out.strides[dim_a], out.strides[dim_b]);
  return out;
}

TensorLayout permuted(const TensorLayout& tensor, const Dims& dims) {
  TensorLayout out = tensor;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    out.sizes[i] = tensor.sizes[static_cast<std::size_t>(dims[i])];
    out.strides[i] = tensor.strides[static_cast<std::size_t>(dims[i])];
  }
  return out;
}

TensorLayout elementwise_result(const TensorLayout& like, DType dtype) {
  const std::size_t rank = like.sizes.size();
  if (like.is_contiguous()) return contiguous(dtype, like.sizes);
  // Dimensions innermost first: by ascending stride, starting from the last dimension (an insertion
  // sort, as TensorIterator's reorder_dimensions).
  std::vector<std::size_t> inner_first;
  for (std::size_t dim = rank; dim-- > 0;) {
    std::size_t at = inner_first.size();
    while (at > 0) {
      const std::size_t other = inner_first[at - 1];
      if (like.sizes[dim] == 1 || like.sizes[other] == 1 || !(like.strides[dim] < like.strides[other])) break;
      --at;
    }
    inner_first.insert(inner_first.begin() + static_cast<std::ptrdiff_t>(at), dim);
  }
  TensorLayout out{dtype, like.sizes, Dims(rank, 0)};
  int64_t stride = 1;
  for (std::size_t dim : inner_first) {
    out.strides[dim] = stride;
    stride *= like.sizes[dim];
  }
  return out;
}

bool non_overlapping_and_dense(const TensorLayout& tensor) {
  std::vector<std::size_t> dims;
  for (std::size_t dim = 0; dim < tensor.sizes.size(); ++dim) {
    if (tensor.sizes[dim] >= 2) dims.push_back(dim);
  }
  std::stable_sort(dims.begin(), dims.end(), [&](std::size_t a, std::size_t b) { return tensor.strides[a] < tensor.strides[b]; });
  int64_t required = 1;
  for (std::size_t dim : dims) {
    if (tensor.strides[dim] != required) return false;
    required *= tensor.sizes[dim];
  }
  return true;
}

TensorLayout unary_result(const TensorLayout& like, DType dtype) {
  if (like.is_contiguous()) return contiguous(dtype, like.sizes);
  if (non_overlapping_and_dense(like)) return TensorLayout{dtype, like.sizes, like.strides};
  return elementwise_result(like, dtype);
}

DType promote_floating(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kFloat32 || b == DType::kFloat32) return DType::kFloat32;
  return a;
}

DType binary_result_dtype(const TensorLayout& x, const TensorLayout& y) {
  const bool wrapped_number = y.sizes.empty() && y.dtype == DType::kFloat64 && !x.sizes.empty();
  return wrapped_number ? x.dtype : promote_floating(x.dtype, y.dtype);
}

std::string c10_double_text(double value) {
  const int category = std::fpclassify(value);
  if ((category == FP_NORMAL || category == FP_ZERO) && std::abs(value) < 1e10) {
    const auto integral = static_cast<int64_t>(value);
    if (static_cast<double>(integral) == value) {
      if (integral == 0 && std::signbit(value)) return "-0.";
      return std::to_string(integral) + ".";
    }
  }
  char digits[32];  // as an ostream with precision max_digits10 (%.17g)
  const auto result = std::to_chars(digits, digits + sizeof(digits), value, std::chars_format::general,
                                    std::numeric_limits<double>::max_digits10);
  return std::string(digits, result.ptr);
}

int c10_scalar_type_number(DType dtype) {
  switch (dtype) {
    case DType::kInt8: return 1;
    case DType::kInt32: return 3;
    case DType::kInt64: return 4;
    case DType::kFloat16: return 5;
    case DType::kFloat32: return 6;
    case DType::kFloat64: return 7;
    case DType::kBool: return 11;
    case DType::kBFloat16: return 15;
  }
  return -1;
}

}  // namespace itertime::predict
