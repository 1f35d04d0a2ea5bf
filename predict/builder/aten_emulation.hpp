// aten_emulation.hpp: the few ATen / c10 behaviours the stage builder (predict/op_builder) must reproduce
// without LibTorch, because they show in a traced signature: the strides of contiguous tensors, of
// views and reshapes (at::detail::computeStride), of element-wise results (TensorIterator's output
// permutation), the result dtype of a mixed-dtype binary call, and how c10 prints a double and a
// ScalarType in an IValue. Each re-implements the LibTorch 1.13 / 2.x rule named on it.
// Invariants: pure; tests/predict/test_aten_emulation.cpp pins each rule on hand-checked cases, and
// tests/torch/test_op_builder.cpp checks whole stages against real traces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "common/op_signature.hpp"

namespace itertime::predict {

using Dims = std::vector<int64_t>;

// Row-major strides of `sizes` (a dimension of size 0 counts as 1), as at::empty gives.
Dims contiguous_strides(const Dims& sizes);
TensorLayout contiguous(DType dtype, const Dims& sizes);
TensorLayout strided(DType dtype, Dims sizes, Dims strides);

// at::detail::computeStride: the strides under which (sizes, strides) can be viewed as new_sizes,
// or nothing when no view exists (reshape then copies).
std::optional<Dims> view_strides(const Dims& sizes, const Dims& strides, const Dims& new_sizes);
// Tensor::reshape / view: a view when view_strides allows one, else a contiguous copy.
TensorLayout reshaped(const TensorLayout& tensor, const Dims& new_sizes);
// Tensor::transpose(a, b) / t(): sizes and strides swapped.
TensorLayout transposed(const TensorLayout& tensor, std::size_t dim_a, std::size_t dim_b);
// Tensor::permute(dims): dimension i of the result is dimension dims[i] of `tensor` (a view).
TensorLayout permuted(const TensorLayout& tensor, const Dims& dims);
// The layout TensorIterator gives an element-wise result computed like `like`, in `dtype`: contiguous
// when `like` is, else `like`'s dimensions ordered innermost first by ascending stride (a size-1
// dimension is never moved past another), packed densely.
TensorLayout elementwise_result(const TensorLayout& like, DType dtype);
// c10's is_non_overlapping_and_dense: the dimensions of size 2 and more, ordered by stride, pack densely
// from stride 1 (dimensions of size 1 are ignored).
bool non_overlapping_and_dense(const TensorLayout& tensor);
// The layout of a result computed from `like` alone (a unary element-wise call, a cast): a non-overlapping
// and dense `like` is kept exactly, strides of size-1 dimensions included (TensorIterator's fast setup,
// empty_like); any other as elementwise_result.
TensorLayout unary_result(const TensorLayout& like, DType dtype);
// The result dtype of a binary call between two floating tensors as the builder meets them: equal
// dtypes stay, fp32 with a 16-bit float promotes to fp32.
DType promote_floating(DType a, DType b);
// The result dtype of aten::mul / add.Tensor(x, y): a 0-dim fp64 y (a Python number autograd wrapped)
// leaves a dimensioned x's dtype alone; otherwise promote_floating.
DType binary_result_dtype(const TensorLayout& x, const TensorLayout& y);

// c10's IValue printing of a double: integral values below 1e10 in magnitude as "2.", all others with
// max_digits10 significant digits ("0.90000000000000002", "1e-08"). Checked against LibTorch 1.13 for the
// values the builder passes; not for -0.0 (printed "-0." here, "0." by LibTorch 1.13)
// nor integral values of 1e10 and above (1.13 appends "."), which the builder never passes.
std::string c10_double_text(double value);
// c10::ScalarType's number as an IValue prints a dtype argument ("6" for fp32, "15" for bf16).
int c10_scalar_type_number(DType dtype);

}  // namespace itertime::predict
