// op_signature.hpp: the canonical text of one operator call ("aten::mm(fp32[64,128], fp32[128,32]{1,128})->fp32"),
// the key under which /ops stores a traced operator and its measurements, with the input dtypes, FLOPs
// and bytes that go with it. Defined once, torch-free, for the tracer (calibrate/op_tracer, which first
// describes LibTorch's IValues as OpArgument) and the stage builder (predict/op_builder).
// Format (byte for byte what stored HDF5 files hold; a change orphans every stored trace):
//  - name, ".overload" when there is one, "(", the arguments joined by ", ", ")", and "->" + the
//    output dtype when the call returns a tensor;
//  - a tensor: dtype name, "[" sizes joined by "," "]", then "{" strides joined by "," "}" only when it
//    is not contiguous (dimensions of size 1 do not count);
//  - a tensor list: "[" its tensors joined by "," "]";
//  - any other argument: its text as given (the tracer gives c10's IValue printing: "None", "True",
//    "[1, 16]", "2.", "0.99990000000000001").
// Invariants: pure; OpCall and OpArgument borrow the tensors they point to for the duration of a call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"

namespace itertime {

// A tensor as a signature shows it: dtype, sizes and strides (in elements).
struct TensorLayout {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t numel() const;
  bool is_contiguous() const;  // row-major, ignoring dimensions of size 1
  std::string text() const;    // "bf16[8,64,128]" (+ "{strides}" when not contiguous)
};

// One argument of a call: a tensor, a tensor list (both borrowed), or any other value as text.
struct OpArgument {
  enum class Kind { kTensor, kTensorList, kText };
  Kind kind = Kind::kText;
  const TensorLayout* tensor = nullptr;
  const std::vector<TensorLayout>* tensors = nullptr;
  std::string text;

  static OpArgument of(const TensorLayout& tensor);
  static OpArgument of(const std::vector<TensorLayout>& tensors);
  static OpArgument of(std::string text);
};

// One operator call: name ("aten::mul"), overload ("Tensor" or ""), its arguments (borrowed) and the
// dtype name of its first tensor output ("" when it returns none).
struct OpCall {
  std::string_view name;
  std::string_view overload;
  const OpArgument* args = nullptr;
  std::size_t arg_count = 0;
  std::string_view output_dtype;

  void append_signature(std::string& out) const;  // appends, so that one buffer serves many calls
  std::string signature() const;
  std::vector<DType> input_dtypes() const;  // tensor arguments and tensor-list elements, in order
  double flops() const;                     // common/op_cost.hpp's op_flops of the tensor arguments
  double bytes() const;                     // common/op_cost.hpp's op_bytes of tensors and list elements
};

// The text of one argument, as it appears between the call's parentheses.
void append_argument_text(std::string& out, const OpArgument& argument);
std::string argument_text(const OpArgument& argument);

}  // namespace itertime
