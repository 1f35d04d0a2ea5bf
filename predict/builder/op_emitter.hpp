// op_emitter.hpp: the stage builder's recorder of operator calls (an internal part of predict/op_builder):
// it renders each call with common/op_signature.hpp, aggregates calls per (phase, signature) in order
// of first appearance, and offers the ATen calls the model is made of (casts, transposes, reshapes,
// matrix products, element-wise calls) with the layout of their results (predict/builder/aten_emulation.hpp).
// Invariants:
//  - OpArgument borrows its tensors: an argument list lives only within the full expression that calls
//    OpEmitter::call, which reads it and keeps nothing, so a temporary tensor outlives it.
//  - A call is worked out (name, dtypes, FLOPs, bytes) on its signature's first appearance only; later
//    ones add their count.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/collective.hpp"
#include "common/op_signature.hpp"
#include "common/phase.hpp"
#include "predict/builder/aten_emulation.hpp"
#include "predict/builder/op_builder.hpp"

namespace itertime::predict::builder {

// Arguments of a call, as c10 prints each kind of IValue.
inline OpArgument tensor_arg(const TensorLayout& tensor) { return OpArgument::of(tensor); }
inline OpArgument tensor_list_arg(const std::vector<TensorLayout>& tensors) { return OpArgument::of(tensors); }
OpArgument int_arg(int64_t value);            // "2"
OpArgument int_list_arg(const Dims& values);  // "[1, 16]"
OpArgument bool_arg(bool value);              // "False" / "True"
OpArgument none_arg();                        // "None"
OpArgument cpu_device_arg();                  // "cpu"
OpArgument double_arg(double value);          // c10_double_text
OpArgument dtype_arg(DType dtype);            // the c10::ScalarType number
OpArgument text_arg(std::string text);        // as given ("-inf")
// A 0-dim tensor: fp64 for the Python numbers autograd wraps as tensors.
inline TensorLayout scalar_tensor(DType dtype) { return contiguous(dtype, {}); }

class OpEmitter {
 public:
  void set_phase(Phase phase);
  // Calls emitted from now on stand for `times` identical calls each: every layer of a stage (and every
  // layer's parameter) makes the same calls, so one is emitted and counted for all, which keeps building
  // a 126-layer stage as cheap as a 1-layer one. Aggregation order is unchanged: later layers add no new
  // signature.
  void set_repeat(int64_t times) { repeat_ = times; }

  // `qualified`: "aten::mm" or "aten::mul.Tensor"; `output`: the dtype of the call's result.
  void call(std::string_view qualified, std::initializer_list<OpArgument> args, DType output);
  void call(std::string_view qualified, const std::vector<OpArgument>& args, DType output);
  // A communication operation in the current phase, repeated as the calls are.
  void comm(CommKind kind, DType dtype, int64_t bytes);
  // One communication operation outside the phases' flow (trace_stage's P2P sends, the DP all-reduce).
  void comm_once(Phase phase, CommKind kind, DType dtype, int64_t bytes);

  std::vector<BuiltOp>& ops() { return ops_; }
  const std::vector<CommOp>& comms() const { return comms_; }

  // ---- ATen calls and the layout of their results ----
  TensorLayout to_dtype(const TensorLayout& x, DType dtype);   // Tensor::to(dtype), recorded even as a no-op
  TensorLayout to_layout(const TensorLayout& x, DType dtype);  // ToCopyBackward's cast
  TensorLayout t(const TensorLayout& x);
  TensorLayout transpose(const TensorLayout& x, int64_t dim_a, int64_t dim_b);
  TensorLayout permute(const TensorLayout& x, const Dims& dims);
  TensorLayout reshape(const TensorLayout& x, const Dims& sizes);
  TensorLayout view(const TensorLayout& x, const Dims& sizes);
  TensorLayout mm(const TensorLayout& a, const TensorLayout& b);
  TensorLayout bmm(const TensorLayout& a, const TensorLayout& b);
  TensorLayout mul(const TensorLayout& x, const TensorLayout& y);  // aten::mul.Tensor
  TensorLayout add(const TensorLayout& x, const TensorLayout& y);  // aten::add.Tensor, alpha 1
  TensorLayout unary(const char* qualified, const TensorLayout& x);
  TensorLayout narrow(const TensorLayout& x, int64_t dim, int64_t start, int64_t length);
  TensorLayout clone(const TensorLayout& x);  // the TP region's copy (aten::clone)

 private:
  void record(std::string_view qualified, const OpArgument* args, std::size_t arg_count, std::string_view output);
  TensorLayout binary(const char* qualified, const TensorLayout& x, const TensorLayout& y, bool with_alpha);

  std::vector<BuiltOp> ops_;
  std::vector<CommOp> comms_;
  Phase phase_ = Phase::kForward;
  std::string phase_name_ = to_string(Phase::kForward);  // phase_ as text: the aggregation key's prefix
  int64_t repeat_ = 1;
  std::unordered_map<std::string, std::size_t> position_;  // "phase\nsignature" -> index in ops_
  std::string key_;                                        // reused buffer
};

}  // namespace itertime::predict::builder
