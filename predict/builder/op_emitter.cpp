// op_emitter.cpp: see op_emitter.hpp.
#include "predict/builder/op_emitter.hpp"

#include <utility>

namespace itertime::predict::builder {

OpArgument int_arg(int64_t value) { return OpArgument::of(std::to_string(value)); }

OpArgument int_list_arg(const Dims& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return OpArgument::of(text + "]");
}

OpArgument bool_arg(bool value) { return OpArgument::of(value ? "True" : "False"); }
OpArgument none_arg() { return OpArgument::of("None"); }
OpArgument cpu_device_arg() { return OpArgument::of("cpu"); }
OpArgument double_arg(double value) { return OpArgument::of(c10_double_text(value)); }
OpArgument dtype_arg(DType dtype) { return int_arg(c10_scalar_type_number(dtype)); }
OpArgument text_arg(std::string text) { return OpArgument::of(std::move(text)); }

void OpEmitter::set_phase(Phase phase) {
  phase_ = phase;
  phase_name_ = to_string(phase);
}

void OpEmitter::call(std::string_view qualified, std::initializer_list<OpArgument> args, DType output) {
  record(qualified, args.begin(), args.size(), to_string(output));
}

void OpEmitter::call(std::string_view qualified, const std::vector<OpArgument>& args, DType output) {
  record(qualified, args.data(), args.size(), to_string(output));
}

void OpEmitter::record(std::string_view qualified, const OpArgument* args, std::size_t arg_count, std::string_view output) {
  const std::size_t dot = qualified.find('.');
  OpCall call;
  call.name = qualified.substr(0, dot);
  call.overload = dot == std::string_view::npos ? std::string_view() : qualified.substr(dot + 1);
  call.args = args;
  call.arg_count = arg_count;
  call.output_dtype = output;
  key_.assign(phase_name_);
  key_ += '\n';
  const std::size_t signature_start = key_.size();
  call.append_signature(key_);
  const auto [position, inserted] = position_.try_emplace(key_, ops_.size());
  if (!inserted) {
    ops_[position->second].count += repeat_;
    return;
  }
  std::string input_dtypes;
  for (DType dtype : call.input_dtypes()) input_dtypes += (input_dtypes.empty() ? "" : ",") + to_string(dtype);
  ops_.push_back(BuiltOp{phase_, std::string(call.name), key_.substr(signature_start), std::move(input_dtypes),
                         std::string(output), call.flops(), call.bytes(), repeat_});
}

void OpEmitter::comm(CommKind kind, DType dtype, int64_t bytes) { comms_.push_back(CommOp{phase_, kind, dtype, bytes, repeat_}); }

void OpEmitter::comm_once(Phase phase, CommKind kind, DType dtype, int64_t bytes) {
  comms_.push_back(CommOp{phase, kind, dtype, bytes, 1});
}

// ---- ATen calls ----

TensorLayout OpEmitter::to_dtype(const TensorLayout& x, DType dtype) {
  call("aten::to.dtype", {tensor_arg(x), dtype_arg(dtype), bool_arg(false), bool_arg(false), none_arg()}, dtype);
  return elementwise_result(x, dtype);
}

TensorLayout OpEmitter::to_layout(const TensorLayout& x, DType dtype) {
  call("aten::to.dtype_layout",
       {tensor_arg(x), dtype_arg(dtype), int_arg(0), cpu_device_arg(), none_arg(), bool_arg(false), bool_arg(false), none_arg()},
       dtype);
  return elementwise_result(x, dtype);
}

TensorLayout OpEmitter::t(const TensorLayout& x) {
  call("aten::t", {tensor_arg(x)}, x.dtype);
  return transposed(x, 0, 1);
}

TensorLayout OpEmitter::transpose(const TensorLayout& x, int64_t dim_a, int64_t dim_b) {
  call("aten::transpose.int", {tensor_arg(x), int_arg(dim_a), int_arg(dim_b)}, x.dtype);
  return transposed(x, static_cast<std::size_t>(dim_a), static_cast<std::size_t>(dim_b));
}

TensorLayout OpEmitter::permute(const TensorLayout& x, const Dims& dims) {
  call("aten::permute", {tensor_arg(x), int_list_arg(dims)}, x.dtype);
  return permuted(x, dims);
}

TensorLayout OpEmitter::reshape(const TensorLayout& x, const Dims& sizes) {
  call("aten::reshape", {tensor_arg(x), int_list_arg(sizes)}, x.dtype);
  return reshaped(x, sizes);
}

TensorLayout OpEmitter::view(const TensorLayout& x, const Dims& sizes) {
  call("aten::view", {tensor_arg(x), int_list_arg(sizes)}, x.dtype);
  return reshaped(x, sizes);
}

TensorLayout OpEmitter::mm(const TensorLayout& a, const TensorLayout& b) {
  call("aten::mm", {tensor_arg(a), tensor_arg(b)}, a.dtype);
  return contiguous(a.dtype, {a.sizes[0], b.sizes[1]});
}

TensorLayout OpEmitter::bmm(const TensorLayout& a, const TensorLayout& b) {
  call("aten::bmm", {tensor_arg(a), tensor_arg(b)}, a.dtype);
  return contiguous(a.dtype, {a.sizes[0], a.sizes[1], b.sizes[2]});
}

TensorLayout OpEmitter::binary(const char* qualified, const TensorLayout& x, const TensorLayout& y, bool with_alpha) {
  std::vector<OpArgument> args{tensor_arg(x), tensor_arg(y)};
  if (with_alpha) args.push_back(int_arg(1));
  const DType output = binary_result_dtype(x, y);
  call(qualified, args, output);
  return elementwise_result(x.numel() >= y.numel() ? x : y, output);
}

TensorLayout OpEmitter::mul(const TensorLayout& x, const TensorLayout& y) { return binary("aten::mul.Tensor", x, y, false); }
TensorLayout OpEmitter::add(const TensorLayout& x, const TensorLayout& y) { return binary("aten::add.Tensor", x, y, true); }

TensorLayout OpEmitter::unary(const char* qualified, const TensorLayout& x) {
  call(qualified, {tensor_arg(x)}, x.dtype);
  return unary_result(x, x.dtype);
}

TensorLayout OpEmitter::narrow(const TensorLayout& x, int64_t dim, int64_t start, int64_t length) {
  call("aten::narrow", {tensor_arg(x), int_arg(dim), int_arg(start), int_arg(length)}, x.dtype);
  TensorLayout out = x;
  const auto rank = static_cast<int64_t>(x.sizes.size());
  out.sizes[static_cast<std::size_t>(dim < 0 ? dim + rank : dim)] = length;
  return out;
}

TensorLayout OpEmitter::clone(const TensorLayout& x) {
  call("aten::clone", {tensor_arg(x), none_arg()}, x.dtype);
  return contiguous(x.dtype, x.sizes);
}

}  // namespace itertime::predict::builder
