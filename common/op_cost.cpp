// op_cost.cpp: see op_cost.hpp.
#include "common/op_cost.hpp"

#include <algorithm>

namespace itertime {
namespace {

double batched_matmul_flops(const TensorExtent& a, const TensorExtent& b) {
  const std::vector<int64_t>& as = *a.sizes;
  const std::vector<int64_t>& bs = *b.sizes;
  if (as.empty() || bs.empty()) return 0.0;
  const double k = static_cast<double>(as.back());
  const double n = bs.size() >= 2 ? static_cast<double>(bs.back()) : 1.0;
  const double rows = static_cast<double>(a.numel()) / k;  // batch dimensions x M
  double batch_b = 1.0;
  for (std::size_t i = 0; i + 2 < bs.size(); ++i) batch_b *= static_cast<double>(bs[i]);
  double batch_a = 1.0;
  for (std::size_t i = 0; i + 2 < as.size(); ++i) batch_a *= static_cast<double>(as[i]);
  const double broadcast = batch_b > batch_a ? batch_b / batch_a : 1.0;
  return 2.0 * rows * k * n * broadcast;
}

}  // namespace

int64_t TensorExtent::numel() const {
  int64_t n = 1;
  if (sizes != nullptr) {
    for (int64_t s : *sizes) n *= s;
  }
  return n;
}

double op_flops(std::string_view name, const std::vector<TensorExtent>& tensors) {
  if ((name == "aten::mm" || name == "aten::bmm" || name == "aten::matmul") && tensors.size() >= 2) {
    return batched_matmul_flops(tensors[0], tensors[1]);
  }
  if (name == "aten::addmm" && tensors.size() >= 3) return batched_matmul_flops(tensors[1], tensors[2]);
  if (name == "aten::linear" && tensors.size() >= 2) {
    const TensorExtent& input = tensors[0];
    const TensorExtent& weight = tensors[1];
    if (input.sizes->empty() || weight.sizes->size() != 2) return 0.0;
    return 2.0 * static_cast<double>(input.numel()) * static_cast<double>((*weight.sizes)[0]);
  }
  double largest = 0.0;
  for (const TensorExtent& t : tensors) largest = std::max(largest, static_cast<double>(t.numel()));
  return largest;
}

double op_bytes(const std::vector<TensorExtent>& tensors, const std::vector<TensorExtent>& list_elements) {
  double total = 0.0;
  double largest = 0.0;
  for (const TensorExtent& t : tensors) {
    const double b = static_cast<double>(t.numel() * static_cast<int64_t>(dtype_bytes(t.dtype)));
    total += b;
    largest = std::max(largest, b);
  }
  for (const TensorExtent& t : list_elements)
    total += static_cast<double>(t.numel() * static_cast<int64_t>(dtype_bytes(t.dtype)));
  return total + largest;  // the output is taken as large as the largest input
}

}  // namespace itertime
