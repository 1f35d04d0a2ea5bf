// op_tracer.hpp: records, in order, the operators LibTorch really runs (name, overload, input dtypes,
// shapes and strides, scalar arguments, output dtype), through a RecordFunction observer, and replays
// any recorded operator in isolation through the dispatcher, for profiling.
// Invariants:
//  - Only top-level operators are recorded; an operator's children are not counted twice. The rule:
//    the tree of RecordFunction calls is flattened so that (a) autograd engine nodes
//    ("autograd::engine::evaluate_function: ...") and calls that are not dispatcher operators are
//    transparent (their children count), (b) an operator that calls itself again (the autocast wrapper
//    re-dispatching `aten::linear` after casting its inputs) is transparent, so the casts it inserts
//    (aten::to / aten::_to_copy) and the low-precision call are recorded, and (c) every other operator is
//    a leaf: it is recorded and its children are not.
//  - One TraceSession at a time per thread; it registers a global callback on construction and
//    removes it on destruction (RAII). Backward work of CPU tensors runs on the calling thread.
//  - A TracedOp's signature() is a canonical text of everything that determines its cost; two calls with
//    equal signatures are the same measurement. The text, input dtypes, FLOPs and bytes are those of
//    common/op_signature.hpp (shared with predict/op_builder), computed from ArgSpec::describe().
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/comm.hpp"
#include "common/collective.hpp"
#include "common/dtype.hpp"
#include "common/op_signature.hpp"
#include "common/phase.hpp"

namespace itertime::calibrate {

// A recorded tensor: dtype, sizes, strides (text(): "bf16[8,64,128]" + "{strides}" when not contiguous).
using TensorSpec = TensorLayout;

// One argument of a recorded call: a tensor, a list of tensors, or any other value kept as is.
struct ArgSpec {
  enum class Kind { kTensor, kTensorList, kNone, kValue } kind = Kind::kValue;
  TensorSpec tensor;
  std::vector<TensorSpec> tensors;
  c10::IValue value;  // scalars, int lists, bools, dtypes, ...
  // The torch-free description a signature is rendered from: tensors borrowed from this ArgSpec, any
  // other value as c10 prints the IValue ("None" for an undefined tensor).
  OpArgument describe() const;
  std::string text() const;
};

using itertime::Phase;  // the shared phases (common/phase.hpp), with their to_string

struct TracedOp {
  std::string name;      // "aten::mm"
  std::string overload;  // "" or e.g. "Tensor"
  std::vector<ArgSpec> args;
  std::string output_dtype;  // of the first tensor output, "" when none
  Phase phase = Phase::kForward;
  std::string signature() const;
  std::vector<std::string> input_dtypes() const;  // of tensor arguments, in order
  double flops() const;  // matrix products: 2*M*N*K (batched); others: elements of the largest tensor argument
  double bytes() const;  // tensor arguments and tensor-list elements, plus the largest tensor argument again
                         // for the output, at their dtypes (common/op_cost.hpp)
};

struct TracedComm {
  CommKind kind = CommKind::kTpAllReduce;
  DType dtype = DType::kFloat32;
  int64_t bytes = 0;
  Phase phase = Phase::kForward;
};

class TraceSession {
 public:
  TraceSession();
  ~TraceSession();
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;

  void set_phase(Phase phase);
  void record_comm(CommKind kind, DType dtype, int64_t bytes);
  // Flattened top-level operators, in order (see the rule above).
  std::vector<TracedOp> operators() const;
  const std::vector<TracedComm>& comms() const;

  struct Node;   // the raw call tree (implementation detail)
  struct State;  // reached by the RecordFunction callbacks (implementation detail)

 private:
  std::unique_ptr<State> state_;
};

// The group a tracing communicator stands for: tensor, context or data parallelism.
enum class TracedGroup { kTp, kCp, kDp };
// The comm kind (common/collective.hpp) of a collective over that group; InternalError for a pair no
// training stage runs (a CP all-reduce, any broadcast, all-to-all or point-to-point call).
CommKind traced_comm_kind(TracedGroup group, Collective collective);

// A Communicator that moves no data: it records every call (its CommKind, dtype, bytes) in a TraceSession,
// so a TP-sharded (or context-parallel, or data-parallel) stage can be traced in one process without its
// peers: TP all-reduces, all-gathers and reduce-scatters; CP all-gathers and reduce-scatters; DP
// all-reduces, reduce-scatters and all-gathers (the started ones too: the defaults call the blocking
// ones). Bytes are count * dtype size (one rank's part for all-gathers and reduce-scatters). Results are
// meaningless numerically.
class TracingCommunicator final : public Communicator {
 public:
  TracingCommunicator(int size, TraceSession* session, TracedGroup group = TracedGroup::kTp)
      : size_(size), session_(session), group_(group) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::kCpu; }
  std::string name() const override { return "trace"; }
  std::unique_ptr<CommBuffer> allocate(std::size_t) override { return nullptr; }
  void copy_in(CommBuffer&, const void*, std::size_t) override {}
  void copy_out(void*, const CommBuffer&, std::size_t) override {}
  void all_reduce_sum(const void*, void*, std::size_t count, DType dtype) override {
    record(Collective::kAllReduce, count, dtype);
  }
  void all_gather(const void*, void*, std::size_t count, DType dtype) override { record(Collective::kAllGather, count, dtype); }
  void reduce_scatter_sum(const void*, void*, std::size_t count, DType dtype) override {
    record(Collective::kReduceScatter, count, dtype);
  }
  void broadcast(void*, std::size_t count, DType dtype, int) override { record(Collective::kBroadcast, count, dtype); }
  void all_to_all(const void*, void*, std::size_t count, DType dtype) override { record(Collective::kAllToAll, count, dtype); }
  void send(const void*, std::size_t count, DType dtype, int) override { record(Collective::kSend, count, dtype); }
  void recv(void*, std::size_t count, DType dtype, int) override { record(Collective::kSend, count, dtype); }
  void send_recv(const void*, int, void*, int, std::size_t count, DType dtype) override {
    record(Collective::kSendRecv, count, dtype);
  }
  void synchronize() override {}
  void barrier() override {}
  void set_session(TraceSession* session) { session_ = session; }

 private:
  void record(Collective collective, std::size_t count, DType dtype) {
    if (session_)
      session_->record_comm(traced_comm_kind(group_, collective), dtype, static_cast<int64_t>(count * dtype_bytes(dtype)));
  }
  int size_;
  TraceSession* session_;
  TracedGroup group_;
};

// Builds the call's arguments (fresh tensors: normal(0,1) for floating types, zeros otherwise) once;
// run() invokes the operator through the dispatcher.
class OpReplay {
 public:
  OpReplay(const TracedOp& op, torch::Device device);
  void run();

 private:
  c10::OperatorHandle handle_;
  std::vector<c10::IValue> arguments_;
};

}  // namespace itertime::calibrate
