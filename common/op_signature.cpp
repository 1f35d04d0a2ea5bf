// op_signature.cpp: see op_signature.hpp.
#include "common/op_signature.hpp"

#include <charconv>
#include <utility>

#include "common/op_cost.hpp"

namespace itertime {
namespace {

void append_ints(std::string& out, const std::vector<int64_t>& values) {
  char digits[24];
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    const auto result = std::to_chars(digits, digits + sizeof(digits), values[i]);
    out.append(digits, result.ptr);
  }
}

void append_tensor_text(std::string& out, const TensorLayout& tensor) {
  out += to_string(tensor.dtype);
  out += '[';
  append_ints(out, tensor.sizes);
  out += ']';
  if (!tensor.is_contiguous()) {
    out += '{';
    append_ints(out, tensor.strides);
    out += '}';
  }
}

}  // namespace

int64_t TensorLayout::numel() const {
  int64_t n = 1;
  for (int64_t size : sizes) n *= size;
  return n;
}

bool TensorLayout::is_contiguous() const {
  int64_t expected = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

std::string TensorLayout::text() const {
  std::string out;
  append_tensor_text(out, *this);
  return out;
}

OpArgument OpArgument::of(const TensorLayout& tensor) {
  OpArgument argument;
  argument.kind = Kind::kTensor;
  argument.tensor = &tensor;
  return argument;
}

OpArgument OpArgument::of(const std::vector<TensorLayout>& tensors) {
  OpArgument argument;
  argument.kind = Kind::kTensorList;
  argument.tensors = &tensors;
  return argument;
}

OpArgument OpArgument::of(std::string text) {
  OpArgument argument;
  argument.text = std::move(text);
  return argument;
}

void append_argument_text(std::string& out, const OpArgument& argument) {
  switch (argument.kind) {
    case OpArgument::Kind::kTensor: append_tensor_text(out, *argument.tensor); return;
    case OpArgument::Kind::kTensorList:
      out += '[';
      for (std::size_t i = 0; i < argument.tensors->size(); ++i) {
        if (i) out += ',';
        append_tensor_text(out, (*argument.tensors)[i]);
      }
      out += ']';
      return;
    case OpArgument::Kind::kText: out += argument.text; return;
  }
}

std::string argument_text(const OpArgument& argument) {
  std::string out;
  append_argument_text(out, argument);
  return out;
}

void OpCall::append_signature(std::string& out) const {
  out += name;
  if (!overload.empty()) {
    out += '.';
    out += overload;
  }
  out += '(';
  for (std::size_t i = 0; i < arg_count; ++i) {
    if (i) out += ", ";
    append_argument_text(out, args[i]);
  }
  out += ')';
  if (!output_dtype.empty()) {
    out += "->";
    out += output_dtype;
  }
}

std::string OpCall::signature() const {
  std::string out;
  append_signature(out);
  return out;
}

std::vector<DType> OpCall::input_dtypes() const {
  std::vector<DType> out;
  for (std::size_t i = 0; i < arg_count; ++i) {
    if (args[i].kind == OpArgument::Kind::kTensor) out.push_back(args[i].tensor->dtype);
    if (args[i].kind == OpArgument::Kind::kTensorList) {
      for (const TensorLayout& tensor : *args[i].tensors) out.push_back(tensor.dtype);
    }
  }
  return out;
}

double OpCall::flops() const {
  std::vector<TensorExtent> tensors;
  for (std::size_t i = 0; i < arg_count; ++i) {
    if (args[i].kind == OpArgument::Kind::kTensor) tensors.push_back({args[i].tensor->dtype, &args[i].tensor->sizes});
  }
  return op_flops(name, tensors);
}

double OpCall::bytes() const {
  std::vector<TensorExtent> tensors, list_elements;
  for (std::size_t i = 0; i < arg_count; ++i) {
    const OpArgument& argument = args[i];
    if (argument.kind == OpArgument::Kind::kTensor) tensors.push_back({argument.tensor->dtype, &argument.tensor->sizes});
    if (argument.kind == OpArgument::Kind::kTensorList) {
      for (const TensorLayout& tensor : *argument.tensors) list_elements.push_back({tensor.dtype, &tensor.sizes});
    }
  }
  return op_bytes(tensors, list_elements);
}

}  // namespace itertime
