// op_tracer.cpp: the operator tracer: one training step of a stage recorded as ATen calls and communications (op_tracer.hpp).
#include "calibrate/op_tracer.hpp"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <mutex>
#include <sstream>

#include "calibrate/torch_compat.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {

struct TraceSession::Node {
  std::string name;
  std::string overload;
  bool is_operator = false;
  std::vector<ArgSpec> args;
  std::string output_dtype;
  Phase phase = Phase::kForward;
  std::vector<std::unique_ptr<Node>> children;
};

struct TraceSession::State {
  at::CallbackHandle handle = at::INVALID_CALLBACK_HANDLE;
  Node root;
  std::vector<Node*> stack;
  Phase phase = Phase::kForward;
  std::vector<TracedComm> comms;
};

namespace {

// The session tracing on this thread, if any: set and cleared by TraceSession's constructor and
// destructor (RAII), read by the RecordFunction callbacks, which cannot capture state.
thread_local TraceSession::State* g_active_trace = nullptr;
thread_local bool g_in_callback = false;

TensorSpec spec_of(const at::Tensor& tensor) {
  TensorSpec spec;
  spec.dtype = from_torch(tensor.scalar_type());
  spec.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  spec.strides.assign(tensor.strides().begin(), tensor.strides().end());
  return spec;
}

ArgSpec arg_of(const c10::IValue& value) {
  ArgSpec arg;
  if (value.isTensor()) {
    const at::Tensor& tensor = value.toTensor();
    if (!tensor.defined()) {
      arg.kind = ArgSpec::Kind::kNone;
    } else {
      arg.kind = ArgSpec::Kind::kTensor;
      arg.tensor = spec_of(tensor);
    }
  } else if (value.isTensorList()) {
    arg.kind = ArgSpec::Kind::kTensorList;
    for (const at::Tensor& tensor : value.toTensorVector()) arg.tensors.push_back(spec_of(tensor));
  } else if (value.isNone()) {
    arg.kind = ArgSpec::Kind::kNone;
  } else {
    arg.kind = ArgSpec::Kind::kValue;
    arg.value = value;
  }
  return arg;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  TraceSession::State* state = g_active_trace;
  if (state == nullptr || g_in_callback) return nullptr;
  g_in_callback = true;
  auto node = std::make_unique<TraceSession::Node>();
  node->name = fn.name();
  node->phase = state->phase;
  const auto operator_name = fn.operator_name();
  if (operator_name.has_value()) {
    node->is_operator = true;
    node->overload = operator_name->overload_name;
    for (const c10::IValue& value : fn.inputs()) node->args.push_back(arg_of(value));
  }
  TraceSession::Node* raw = node.get();
  state->stack.back()->children.push_back(std::move(node));
  state->stack.push_back(raw);
  g_in_callback = false;
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  TraceSession::State* state = g_active_trace;
  if (state == nullptr || g_in_callback || state->stack.size() <= 1) return;
  TraceSession::Node* node = state->stack.back();
  if (node->is_operator) {
    for (const c10::IValue& output : fn.outputs()) {
      if (output.isTensor() && output.toTensor().defined()) {
        node->output_dtype = to_string(from_torch(output.toTensor().scalar_type()));
        break;
      }
    }
  }
  state->stack.pop_back();
}

bool is_transparent(const TraceSession::Node& node) {
  if (!node.is_operator) return true;
  if (node.name.rfind("autograd::", 0) == 0) return true;
  for (const auto& child : node.children) {
    if (child->name == node.name) return true;  // autocast wrapper re-dispatching itself
  }
  return false;
}

void flatten(const TraceSession::Node& node, std::vector<TracedOp>& out) {
  for (const auto& child : node.children) {
    if (is_transparent(*child)) {
      flatten(*child, out);
      continue;
    }
    TracedOp op;
    op.name = child->name;
    op.overload = child->overload;
    op.args = child->args;
    op.output_dtype = child->output_dtype;
    op.phase = child->phase;
    out.push_back(std::move(op));
  }
}

at::Tensor make_tensor(const TensorSpec& spec, torch::Device device) {
  // Storage large enough for any stride pattern (including broadcast stride 0), filled, then viewed.
  int64_t storage = 1;
  for (std::size_t i = 0; i < spec.sizes.size(); ++i) {
    if (spec.sizes[i] == 0) {
      storage = 0;
      break;
    }
    storage += (spec.sizes[i] - 1) * spec.strides[i];
  }
  const auto options = torch::TensorOptions().dtype(to_torch(spec.dtype)).device(device);
  at::Tensor base = torch::empty({std::max<int64_t>(storage, 1)}, options);
  if (is_floating(spec.dtype)) {
    base.normal_();
  } else {
    base.zero_();
  }
  return base.as_strided(spec.sizes, spec.strides);
}

}  // namespace

// ---- specs: described torch-free, rendered and costed by common/op_signature.hpp -----------------

OpArgument ArgSpec::describe() const {
  switch (kind) {
    case Kind::kTensor: return OpArgument::of(tensor);
    case Kind::kTensorList: return OpArgument::of(tensors);
    case Kind::kNone: return OpArgument::of("None");
    case Kind::kValue: {
      std::ostringstream text;
      text << value;
      return OpArgument::of(text.str());
    }
  }
  return OpArgument::of("?");
}

std::string ArgSpec::text() const { return argument_text(describe()); }

namespace {

// The call as common/op_signature.hpp sees it; `described` holds its arguments and must outlive it.
OpCall describe_call(const TracedOp& op, std::vector<OpArgument>& described) {
  described.clear();
  for (const ArgSpec& arg : op.args) described.push_back(arg.describe());
  return OpCall{op.name, op.overload, described.data(), described.size(), op.output_dtype};
}

}  // namespace

std::string TracedOp::signature() const {
  std::vector<OpArgument> described;
  return describe_call(*this, described).signature();
}

std::vector<std::string> TracedOp::input_dtypes() const {
  std::vector<OpArgument> described;
  std::vector<std::string> out;
  for (DType dtype : describe_call(*this, described).input_dtypes()) out.push_back(to_string(dtype));
  return out;
}

double TracedOp::flops() const {
  std::vector<OpArgument> described;
  return describe_call(*this, described).flops();
}

double TracedOp::bytes() const {
  std::vector<OpArgument> described;
  return describe_call(*this, described).bytes();
}

// ---- TraceSession ------------------------------------------------------------------------------

TraceSession::TraceSession() : state_(std::make_unique<State>()) {
  ITERTIME_CHECK(g_active_trace == nullptr, "one trace session at a time per thread");
  state_->stack.push_back(&state_->root);
  g_active_trace = state_.get();
  state_->handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

TraceSession::~TraceSession() {
  at::removeCallback(state_->handle);
  g_active_trace = nullptr;
}

void TraceSession::set_phase(Phase phase) { state_->phase = phase; }

void TraceSession::record_comm(CommKind kind, DType dtype, int64_t bytes) {
  state_->comms.push_back(TracedComm{kind, dtype, bytes, state_->phase});
}

std::vector<TracedOp> TraceSession::operators() const {
  std::vector<TracedOp> out;
  flatten(state_->root, out);
  return out;
}

const std::vector<TracedComm>& TraceSession::comms() const { return state_->comms; }

CommKind traced_comm_kind(TracedGroup group, Collective collective) {
  switch (group) {
    case TracedGroup::kTp:
      if (collective == Collective::kAllReduce) return CommKind::kTpAllReduce;
      if (collective == Collective::kAllGather) return CommKind::kTpAllGather;
      if (collective == Collective::kReduceScatter) return CommKind::kTpReduceScatter;
      break;
    case TracedGroup::kCp:
      if (collective == Collective::kAllGather) return CommKind::kCpAllGather;
      if (collective == Collective::kReduceScatter) return CommKind::kCpReduceScatter;
      break;
    case TracedGroup::kDp:
      if (collective == Collective::kAllReduce) return CommKind::kDpAllReduce;
      if (collective == Collective::kAllGather) return CommKind::kDpAllGather;
      if (collective == Collective::kReduceScatter) return CommKind::kDpReduceScatter;
      break;
  }
  throw InternalError("a traced stage ran a " + to_string(collective) + " that no comm kind names", __FILE__, __LINE__);
}

// ---- OpReplay ----------------------------------------------------------------------------------

OpReplay::OpReplay(const TracedOp& op, torch::Device device)
    : handle_([&] {
        const auto found = c10::Dispatcher::singleton().findSchema(c10::OperatorName(op.name, op.overload));
        if (!found.has_value()) {
          throw InternalError("operator " + op.name + "." + op.overload + " is not in the dispatcher; cannot replay it", __FILE__,
                              __LINE__);
        }
        return *found;
      }()) {
  for (const ArgSpec& arg : op.args) {
    switch (arg.kind) {
      case ArgSpec::Kind::kTensor: arguments_.emplace_back(make_tensor(arg.tensor, device)); break;
      case ArgSpec::Kind::kTensorList: {
        std::vector<at::Tensor> tensors;
        for (const auto& t : arg.tensors) tensors.push_back(make_tensor(t, device));
        arguments_.emplace_back(c10::List<at::Tensor>(tensors));
        break;
      }
      case ArgSpec::Kind::kNone: arguments_.emplace_back(); break;
      case ArgSpec::Kind::kValue: arguments_.push_back(arg.value); break;
    }
  }
}

void OpReplay::run() {
  torch::NoGradGuard no_grad;
  std::vector<c10::IValue> stack(arguments_);
  handle_.callBoxed(&stack);
}

}  // namespace itertime::calibrate
