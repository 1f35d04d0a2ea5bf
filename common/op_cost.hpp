// op_cost.hpp: the FLOPs and bytes charged to one operator call, from its name and its tensor arguments.
// The one definition, reached through common/op_signature.hpp's OpCall by the tracer (calibrate/op_tracer:
// TracedOp) and the stage builder (predict/op_builder), so that a built signature carries the same figures
// as the traced one and the operator regression (predict/op_regression) sees one scale.
// Invariants:
//  - Matrix products (aten::mm, bmm, matmul; addmm's two last tensors; linear's input and weight):
//    2 * M * N * K, batch dimensions included (a broadcast batch of the second operand multiplies).
//    Every other operator (and a matrix product given fewer tensors than it takes): the element count
//    of its largest single-tensor argument (tensor lists do not count), 0 without one: a size, not an
//    arithmetic count, which the operator regression scales per operator.
//  - Bytes: every tensor argument and every tensor of a tensor-list argument at its dtype's size, plus
//    the largest single tensor argument again for the output.
//  - Pure, no allocation beyond the caller's vectors.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"

namespace itertime {

// A tensor argument as far as cost goes: its dtype and sizes (borrowed, not owned).
struct TensorExtent {
  DType dtype = DType::kFloat32;
  const std::vector<int64_t>* sizes = nullptr;
  int64_t numel() const;
};

// `tensors`: the call's single-tensor arguments, in order (tensor lists left out).
double op_flops(std::string_view name, const std::vector<TensorExtent>& tensors);
// `tensors` as above; `list_elements`: every tensor of the call's tensor-list arguments.
double op_bytes(const std::vector<TensorExtent>& tensors, const std::vector<TensorExtent>& list_elements);

}  // namespace itertime
