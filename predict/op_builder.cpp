// op_builder.cpp: see op_builder.hpp. The stage is emitted call by call in the order the CPU autograd
// engine of LibTorch 1.13 or 2.x (StageRecipe::dialect) runs it for calibrate/llama_model.cpp with the
// recipe's attention kernel (learned from traces; docs/method.md lists where the dialects differ), then
// aggregated.
// Invariants:
//  - Spec / Arg mirror calibrate/op_tracer.hpp's TensorSpec / ArgSpec; text() is the same format, and
//    flops() / bytes() call common/op_cost.hpp as the tracer does, so an equal signature implies equal
//    flops and bytes.
//  - Tensor strides follow ATen: views keep their strides, reshape is a view when ATen's computeStride
//    allows it (else a contiguous copy), element-wise results follow their first input's layout.
//  - Backward gradient accumulation ("add" into an input buffer; "add_" in 2.x when the buffer holds a
//    fresh tensor, see GradBuffer) is emitted when a tensor's second and later gradient contributions
//    arrive, in the engine's order (most recently created node first).
#include "predict/op_builder.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>

#include "common/errors.hpp"
#include "common/op_cost.hpp"
#include "common/parallel_config.hpp"

namespace itertime::predict {
namespace {

using Dims = std::vector<int64_t>;

// ---- tensors and arguments (mirror of calibrate/op_tracer.hpp) -------------------------------------

struct Spec {
  DType dtype = DType::kFloat32;
  Dims sizes, strides;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

Dims contiguous_strides(const Dims& sizes) {
  Dims strides(sizes.size(), 1);
  int64_t expected = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = expected;
    expected *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

Spec T(DType dtype, Dims sizes) {
  Spec spec{dtype, sizes, contiguous_strides(sizes)};
  return spec;
}
Spec T(DType dtype, Dims sizes, Dims strides) { return Spec{dtype, std::move(sizes), std::move(strides)}; }

bool is_contiguous(const Spec& spec) {
  int64_t expected = 1;
  for (std::size_t i = spec.sizes.size(); i-- > 0;) {
    if (spec.sizes[i] != 1 && spec.strides[i] != expected) return false;
    expected *= spec.sizes[i];
  }
  return true;
}

void append_int(std::string& out, int64_t value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, result.ptr);
}

void append_ints(std::string& out, const Dims& values, const char* separator) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += separator;
    append_int(out, values[i]);
  }
}

std::string join_ints(const Dims& values, const char* separator) {
  std::string out;
  append_ints(out, values, separator);
  return out;
}

void append_text(std::string& out, const Spec& spec) {
  out += to_string(spec.dtype);
  out += '[';
  append_ints(out, spec.sizes, ",");
  out += ']';
  if (!is_contiguous(spec)) {
    out += '{';
    append_ints(out, spec.strides, ",");
    out += '}';
  }
}

// An argument of one call. Tensors are borrowed, not copied: an Arg lives only within the full
// expression that calls Emitter::op (which reads it and keeps nothing), so the Spec it points to, even a
// temporary, outlives it.
struct Arg {
  enum class Kind { kTensor, kTensorList, kValue } kind = Kind::kValue;
  const Spec* tensor = nullptr;
  const std::vector<Spec>* tensors = nullptr;
  std::string value;  // c10's IValue text
};

Arg A(const Spec& spec) {
  Arg arg;
  arg.kind = Arg::Kind::kTensor;
  arg.tensor = &spec;
  return arg;
}
Arg AL(const std::vector<Spec>& specs) {
  Arg arg;
  arg.kind = Arg::Kind::kTensorList;
  arg.tensors = &specs;
  return arg;
}
Arg V(const std::string& text) {
  Arg arg;
  arg.value = text;
  return arg;
}
Arg I(int64_t v) { return V(std::to_string(v)); }
Arg L(const Dims& values) { return V("[" + join_ints(values, ", ") + "]"); }
Arg B(bool v) { return V(v ? "True" : "False"); }
Arg N() { return V("None"); }
Arg CPU() { return V("cpu"); }
// A double as c10::IValue prints it: integral values below 1e10 as "2.", others with max_digits10.
Arg D(double d) {
  const int c = std::fpclassify(d);
  if ((c == FP_NORMAL || c == FP_ZERO) && std::abs(d) < 1e10) {
    const auto i = static_cast<int64_t>(d);
    if (static_cast<double>(i) == d) {
      if (i == 0 && std::signbit(d)) return V("-0.");
      return V(std::to_string(i) + ".");
    }
  }
  char digits[32];  // as an ostream with precision max_digits10 (%.17g)
  const auto result = std::to_chars(digits, digits + sizeof(digits), d, std::chars_format::general,
                                    std::numeric_limits<double>::max_digits10);
  return V(std::string(digits, result.ptr));
}
// c10::ScalarType numbers.
Arg ST(DType dtype) {
  switch (dtype) {
    case DType::kInt8: return I(1);
    case DType::kInt32: return I(3);
    case DType::kInt64: return I(4);
    case DType::kFloat16: return I(5);
    case DType::kFloat32: return I(6);
    case DType::kFloat64: return I(7);
    case DType::kBool: return I(11);
    case DType::kBFloat16: return I(15);
  }
  return I(-1);
}

Spec scalar(DType dtype) { return T(dtype, {}); }  // a 0-dim tensor (fp64[] for Python-number operands)

// The arguments of one call, borrowed from the caller for the duration of Emitter::op.
struct ArgView {
  const Arg* first = nullptr;
  std::size_t count = 0;
  const Arg* begin() const { return first; }
  const Arg* end() const { return first + count; }
  std::size_t size() const { return count; }
  const Arg& operator[](std::size_t i) const { return first[i]; }
};

struct RawOp {
  std::string_view name;  // "aten::mm"
  std::string_view qualified;  // "aten::mm" or "aten::mul.Tensor"
  ArgView args;
  std::string_view output_dtype;

  // Appends the canonical text to `out`, so that one buffer serves every call.
  void signature(std::string& out) const {
    out += qualified;
    out += '(';
    for (std::size_t i = 0; i < args.size(); ++i) {
      const Arg& a = args[i];
      if (i) out += ", ";
      if (a.kind == Arg::Kind::kTensor) {
        append_text(out, *a.tensor);
      } else if (a.kind == Arg::Kind::kTensorList) {
        out += '[';
        for (std::size_t j = 0; j < a.tensors->size(); ++j) {
          if (j) out += ',';
          append_text(out, (*a.tensors)[j]);
        }
        out += ']';
      } else {
        out += a.value;
      }
    }
    out += ')';
    if (!output_dtype.empty()) {
      out += "->";
      out += output_dtype;
    }
  }
  std::string input_dtypes() const {
    std::string out;
    auto add = [&out](const Spec& s) { out += (out.empty() ? "" : ",") + to_string(s.dtype); };
    for (const Arg& a : args) {
      if (a.kind == Arg::Kind::kTensor) add(*a.tensor);
      if (a.kind == Arg::Kind::kTensorList) {
        for (const Spec& s : *a.tensors) add(s);
      }
    }
    return out;
  }
  // Cost figures: common/op_cost.hpp, the formulas the tracer uses.
  double flops() const {
    std::vector<TensorExtent> tensors;
    for (const Arg& a : args) {
      if (a.kind == Arg::Kind::kTensor) tensors.push_back({a.tensor->dtype, &a.tensor->sizes});
    }
    return op_flops(name, tensors);
  }
  double bytes() const {
    std::vector<TensorExtent> tensors, list_elements;
    for (const Arg& a : args) {
      if (a.kind == Arg::Kind::kTensor) tensors.push_back({a.tensor->dtype, &a.tensor->sizes});
      if (a.kind == Arg::Kind::kTensorList) {
        for (const Spec& t : *a.tensors) list_elements.push_back({t.dtype, &t.sizes});
      }
    }
    return op_bytes(tensors, list_elements);
  }
};

// ---- ATen layout rules --------------------------------------------------------------------------

// at::detail::computeStride: the strides of a view of (sizes, strides) as new_sizes, if one exists.
bool view_strides(const Dims& sizes, const Dims& strides, const Dims& new_sizes, Dims& out) {
  out.assign(new_sizes.size(), 0);
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0 || sizes.empty()) {
    out = contiguous_strides(new_sizes);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(sizes.size()) - 1; tensor_d >= 0; tensor_d--) {
    tensor_numel *= sizes[static_cast<std::size_t>(tensor_d)];
    if (tensor_d == 0 || (sizes[static_cast<std::size_t>(tensor_d - 1)] != 1 &&
                          strides[static_cast<std::size_t>(tensor_d - 1)] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[static_cast<std::size_t>(view_d)] == 1)) {
        out[static_cast<std::size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[static_cast<std::size_t>(view_d)];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = strides[static_cast<std::size_t>(tensor_d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Spec reshaped(const Spec& x, const Dims& new_sizes) {
  Dims strides;
  if (view_strides(x.sizes, x.strides, new_sizes, strides)) return T(x.dtype, new_sizes, strides);
  return T(x.dtype, new_sizes);
}

Spec transposed(const Spec& x, std::size_t a, std::size_t b) {
  Spec out = x;
  std::swap(out.sizes[a], out.sizes[b]);
  std::swap(out.strides[a], out.strides[b]);
  return out;
}

// The layout TensorIterator gives an element-wise result: the permutation of `like`'s strides.
Spec like_layout(const Spec& like, DType dtype) {
  const std::size_t n = like.sizes.size();
  if (is_contiguous(like)) return T(dtype, like.sizes);
  Spec out{dtype, like.sizes, Dims(n, 0)};
  // Dimensions innermost first: by ascending stride, starting from the last dimension; a dimension of
  // size 1 is never moved past another (insertion sort, as ATen's TensorIterator permutation).
  std::vector<std::size_t> inner_first;
  for (std::size_t i = n; i-- > 0;) {
    std::size_t at = inner_first.size();
    while (at > 0) {
      const std::size_t other = inner_first[at - 1];
      if (like.sizes[i] == 1 || like.sizes[other] == 1 || !(like.strides[i] < like.strides[other])) break;
      --at;
    }
    inner_first.insert(inner_first.begin() + static_cast<std::ptrdiff_t>(at), i);
  }
  int64_t stride = 1;
  for (std::size_t d : inner_first) {
    out.strides[d] = stride;
    stride *= like.sizes[d];
  }
  return out;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kFloat32 || b == DType::kFloat32) return DType::kFloat32;
  return a;
}

// ---- the emitter ----------------------------------------------------------------------------------

struct Dimensions {
  int64_t b, s, h, heads, kv_heads, head_dim, ffn, vocab;
};

class Emitter {
 public:
  Emitter(const PrecisionPolicy& policy, const Dimensions& d) : policy_(policy), d_(d) {
    p_ = policy.param_dtype;
    a_ = policy.activation_dtype;
    m_ = policy.autocast ? policy.compute_dtype : policy.param_dtype;
  }
  // Aggregated per (phase, signature) in order of first appearance, as /ops/sequences rows.
  std::vector<BuiltOp> ops;
  std::vector<CommOp> comms;

  void phase(const char* name) { phase_ = name; }
  // Calls emitted from now on stand for `times` identical calls each: every layer of a stage (and every
  // layer's parameter) makes the same calls, so one is emitted and counted for all, which keeps building
  // a 126-layer stage as cheap as a 1-layer one. Aggregation order is unchanged: later layers add no new
  // signature.
  void repeat(int64_t times) { repeat_ = times; }
  void op(std::string_view qualified, std::initializer_list<Arg> args, DType out) {
    op(qualified, ArgView{args.begin(), args.size()}, to_string(out));
  }
  void op(std::string_view qualified, std::initializer_list<Arg> args, std::string_view out) {
    op(qualified, ArgView{args.begin(), args.size()}, out);
  }
  void op(std::string_view qualified, const std::vector<Arg>& args, DType out) {
    op(qualified, ArgView{args.data(), args.size()}, to_string(out));
  }
  // Aggregates the call at once: `args` is read here and not kept. The name, dtypes, FLOPs and bytes
  // are worked out on a signature's first appearance only.
  void op(std::string_view qualified, ArgView args, std::string_view out) {
    RawOp r;
    r.qualified = qualified;
    r.name = qualified.substr(0, qualified.find('.'));
    r.args = args;
    r.output_dtype = out;
    key_.assign(phase_);
    key_ += '\n';
    const std::size_t signature_start = key_.size();
    r.signature(key_);
    const auto [position, inserted] = position_.try_emplace(key_, ops.size());
    if (!inserted) {
      ops[position->second].count += repeat_;
      return;
    }
    ops.push_back(BuiltOp{phase_, std::string(r.name), key_.substr(signature_start), r.input_dtypes(),
                          std::string(r.output_dtype), r.flops(), r.bytes(), repeat_});
  }
  void comm(const std::string& kind, DType dtype, int64_t bytes) { comms.push_back(CommOp{phase_, kind, to_string(dtype), bytes, repeat_}); }

  // ---- op helpers ----
  Spec to_dtype(const Spec& x, DType dtype) {  // Tensor::to(dtype): recorded even when a no-op
    op("aten::to.dtype", {A(x), ST(dtype), B(false), B(false), N()}, dtype);
    return like_layout(x, dtype);
  }
  Spec to_layout(const Spec& x, DType dtype) {  // ToCopyBackward
    op("aten::to.dtype_layout", {A(x), ST(dtype), I(0), CPU(), N(), B(false), B(false), N()}, dtype);
    return like_layout(x, dtype);
  }
  Spec t(const Spec& x) {
    op("aten::t", {A(x)}, x.dtype);
    return transposed(x, 0, 1);
  }
  Spec transpose(const Spec& x, int64_t a, int64_t b) {
    op("aten::transpose.int", {A(x), I(a), I(b)}, x.dtype);
    return transposed(x, static_cast<std::size_t>(a), static_cast<std::size_t>(b));
  }
  Spec reshape(const Spec& x, const Dims& sizes) {
    op("aten::reshape", {A(x), L(sizes)}, x.dtype);
    return reshaped(x, sizes);
  }
  Spec view(const Spec& x, const Dims& sizes) {
    op("aten::view", {A(x), L(sizes)}, x.dtype);
    return reshaped(x, sizes);
  }
  Spec mm(const Spec& a, const Spec& b) {
    op("aten::mm", {A(a), A(b)}, a.dtype);
    return T(a.dtype, {a.sizes[0], b.sizes[1]});
  }
  Spec bmm(const Spec& a, const Spec& b) {
    op("aten::bmm", {A(a), A(b)}, a.dtype);
    return T(a.dtype, {a.sizes[0], a.sizes[1], b.sizes[2]});
  }
  Spec binary(const char* name, const Spec& x, const Spec& y, bool alpha) {
    std::vector<Arg> args{A(x), A(y)};
    if (alpha) args.push_back(I(1));
    const DType out = y.sizes.empty() && y.dtype == DType::kFloat64 && !x.sizes.empty() ? x.dtype : promote(x.dtype, y.dtype);
    op(name, args, out);
    return like_layout(x.numel() >= y.numel() ? x : y, out);
  }
  Spec mul(const Spec& x, const Spec& y) { return binary("aten::mul.Tensor", x, y, false); }
  Spec add(const Spec& x, const Spec& y) { return binary("aten::add.Tensor", x, y, true); }
  Spec unary(const char* name, const Spec& x) {
    op(name, {A(x)}, x.dtype);
    return like_layout(x, x.dtype);
  }
  Spec narrow(const Spec& x, int64_t dim, int64_t start, int64_t length) {
    op("aten::narrow", {A(x), I(dim), I(start), I(length)}, x.dtype);
    Spec out = x;
    const std::size_t d = static_cast<std::size_t>(dim < 0 ? dim + static_cast<int64_t>(x.sizes.size()) : dim);
    out.sizes[d] = length;
    return out;
  }

  // ---- model pieces: forward ----
  Spec norm_forward(const Spec& x) {
    const DType f32 = DType::kFloat32;
    const Spec h = to_dtype(x, f32);
    op("aten::pow.Tensor_Scalar", {A(h), I(2)}, f32);
    const Dims stat{x.sizes[0], x.sizes[1], 1};
    op("aten::mean.dim", {A(h), L({-1}), B(true), N()}, f32);
    op("aten::add.Tensor", {A(T(f32, stat)), A(scalar(DType::kFloat64)), I(1)}, f32);
    op("aten::rsqrt", {A(T(f32, stat))}, f32);
    op("aten::mul.Tensor", {A(h), A(T(f32, stat))}, f32);
    const Spec y = to_dtype(T(f32, h.sizes), x.dtype);
    return mul(T(p_, {d_.h}), y);
  }
  // Linear (t + matmul, autocast casts under AMP): x [b, s, in] -> [b, s, out].
  Spec linear_forward(const Spec& x, int64_t in, int64_t out) {
    const Spec wt = t(T(p_, {out, in}));
    Spec w = wt;
    Spec input = x;
    if (policy_.autocast) {
      if (w.dtype != m_) w = to_dtype(wt, m_);
      if (input.dtype != m_) input = to_dtype(x, m_);
    }
    op("aten::matmul", {A(input), A(w)}, m_);
    return T(m_, {x.sizes[0], x.sizes[1], out});
  }
  Spec tp_clone(const Spec& x) {
    op("aten::clone", {A(x), N()}, x.dtype);
    return T(x.dtype, x.sizes);
  }

  const PrecisionPolicy& policy_;
  Dimensions d_;
  DType p_, a_, m_;
  std::string phase_ = "forward";
  int64_t repeat_ = 1;
  std::unordered_map<std::string, std::size_t> position_;  // "phase\nsignature" -> index in ops
  std::string key_;                                         // reused buffer
};

}  // namespace

TorchDialect torch_dialect(const std::string& libtorch_version) {
  if (libtorch_version.empty() || libtorch_version.rfind("1.", 0) == 0) return TorchDialect::kTorch1;
  if (libtorch_version.rfind("2.", 0) == 0) return TorchDialect::kTorch2;
  throw UserError("LibTorch " + libtorch_version +
                  ": the stage builder knows the operator sequences of LibTorch 1.13 and 2.x only; trace every "
                  "configuration you predict (`itertime calibrate ops`) instead");
}

BuiltStage build_stage_ops(const LlamaSpec& model, int tp, int pp, int stage, int micro_batch, int seq_len,
                           PrecisionName precision, const StageRecipe& recipe) {
  if (recipe.attention == AttentionKernel::kAuto) {
    throw UserError("build_stage_ops: the attention kernel must be eager or sdpa, not auto");
  }
  if (recipe.attention == AttentionKernel::kSdpa && recipe.dialect == TorchDialect::kTorch1) {
    throw UserError("build_stage_ops: sdpa attention needs LibTorch 2.x; LibTorch 1.13 has no scaled_dot_product_attention");
  }
  if (tp < 1 || pp < 1 || stage < 0 || stage >= pp || micro_batch < 1 || seq_len < 1) {
    throw UserError("build_stage_ops: tp, pp, micro_batch and seq_len must be positive and 0 <= stage < pp");
  }
  if (model.num_heads % tp != 0 || model.num_kv_heads % tp != 0 || model.intermediate_size % tp != 0) {
    throw UserError("model " + model.name + ": tp " + std::to_string(tp) + " does not divide the heads, KV heads and FFN size");
  }
  if (model.num_layers < pp) throw UserError("model " + model.name + " has fewer layers than pp " + std::to_string(pp));
  const PrecisionPolicy& policy = precision_policy(precision);
  const bool torch2 = recipe.dialect == TorchDialect::kTorch2;
  const bool sdpa = recipe.attention == AttentionKernel::kSdpa;
  const auto stages = stage_layers(static_cast<int>(model.num_layers), pp);
  const StageLayers& layers = stages[static_cast<std::size_t>(stage)];
  const Dimensions d{micro_batch, seq_len, model.hidden_size, model.num_heads / tp, model.num_kv_heads / tp,
                     model.head_dim, model.intermediate_size / tp, model.vocab_size};
  const DType f32 = DType::kFloat32, i64 = DType::kInt64, f64 = DType::kFloat64;
  Emitter e(policy, d);
  const DType p = e.p_, a = e.a_, m = e.m_;
  const int64_t b = d.b, s = d.s, h = d.h, nh = d.heads, nkv = d.kv_heads, hd = d.head_dim, f = d.ffn, v = d.vocab;
  const int64_t qd = nh * hd, kvd = nkv * hd;
  const bool gqa = nh != nkv;
  const bool has_tp = tp > 1;
  const Spec act = T(a, {b, s, h});
  const Dims qs_strides{s * nh * hd, hd, nh * hd, 1};
  const Dims ks_strides{s * nkv * hd, hd, nkv * hd, 1};
  const DType buffer_dtype = p;  // rotary tables follow the module's cast to the parameter dtype

  // ---------------- forward ----------------
  if (layers.has_embedding) {
    e.op("aten::randint", {I(v), L({b, s}), ST(i64), N(), CPU(), N()}, i64);
  } else {
    e.op("aten::randn", {L({b, s, h}), ST(a), N(), CPU(), N()}, a);
  }
  if (layers.has_head) e.op("aten::randint", {I(v), L({b, s}), ST(i64), N(), CPU(), N()}, i64);
  if (layers.has_embedding) e.op("aten::embedding", {A(T(p, {v, h})), A(T(i64, {b, s})), I(-1), B(false), B(false)}, p);

  auto rotary_forward = [&](const Spec& x, int64_t heads) {
    for (int i = 0; i < 2; ++i) {
      e.op("aten::narrow", {A(T(buffer_dtype, {s, hd})), I(0), I(0), I(s)}, buffer_dtype);
      e.op("aten::to.dtype", {A(T(buffer_dtype, {s, hd})), ST(x.dtype), B(false), B(false), N()}, x.dtype);
    }
    const Spec first = e.narrow(x, -1, hd / 2, hd / 2);
    e.op("aten::neg", {A(first)}, x.dtype);
    const Spec negated = like_layout(first, x.dtype);
    const Spec second = e.narrow(x, -1, 0, hd / 2);
    e.op("aten::cat", {AL({negated, second}), I(-1)}, x.dtype);
    const Spec rotated = T(x.dtype, {b, heads, s, hd});
    e.mul(rotated, T(x.dtype, {s, hd}));
    const Spec xc = e.mul(x, T(x.dtype, {s, hd}));
    return e.add(xc, rotated);
  };
  auto repeat = [&](const Spec& x) {
    if (torch2) {  // one call in 2.x; 1.13 builds the index and selects
      e.op("aten::repeat_interleave.self_int", {A(x), I(nh / nkv), I(1), N()}, x.dtype);
      return T(x.dtype, {b, nh, s, hd});
    }
    e.op("aten::empty.memory_format", {L({1}), ST(i64), I(0), CPU(), N(), N()}, i64);
    e.op("aten::fill_.Scalar", {A(T(i64, {1})), I(nh / nkv)}, i64);
    e.op("aten::reshape", {A(T(i64, {1})), L({1})}, i64);
    e.op("aten::expand", {A(T(i64, {1})), L({nkv}), B(false)}, i64);
    e.op("aten::repeat_interleave.Tensor", {A(T(i64, {nkv}, {0})), N()}, i64);
    e.op("aten::index_select", {A(x), I(1), A(T(i64, {nh}))}, x.dtype);
    return T(x.dtype, {b, nh, s, hd});
  };

  std::vector<Spec> sdpa_inputs;  // q, k, v as the fused kernel received them (its backward gets them again)
  // One layer is emitted and counted num_layers times (Emitter::repeat); all layers make the same calls.
  const int emitted_layers = std::min(layers.num_layers, 1);
  e.repeat(layers.num_layers);
  for (int layer = 0; layer < emitted_layers; ++layer) {
    // attention block
    Spec x = e.norm_forward(act);
    if (has_tp) x = e.tp_clone(x);
    Spec q = e.linear_forward(x, h, qd);
    q = e.transpose(e.view(q, {b, s, nh, hd}), 1, 2);
    Spec k = e.linear_forward(x, h, kvd);
    k = e.transpose(e.view(k, {b, s, nkv, hd}), 1, 2);
    Spec vv = e.linear_forward(x, h, kvd);
    vv = e.transpose(e.view(vv, {b, s, nkv, hd}), 1, 2);
    q = rotary_forward(q, nh);
    k = rotary_forward(k, nkv);
    if (gqa) {
      k = repeat(k);
      vv = repeat(vv);
    }
    Spec attended;
    if (sdpa) {
      // One call (autocast keeps it in the compute dtype: q, k, v are already); the CPU flash kernel
      // writes its output laid out [b, s, heads, hd], so the transpose + reshape below are views.
      e.op("aten::scaled_dot_product_attention", {A(q), A(k), A(vv), N(), D(0.0), B(true), N(), B(false)}, m);
      attended = T(m, {b, nh, s, hd}, qs_strides);
      sdpa_inputs = {q, k, vv};
    } else {
      const Spec kt = e.transpose(k, 2, 3);
      e.op("aten::matmul", {A(q), A(kt)}, m);
      const Spec scores = T(m, {b, nh, s, s});
      e.op("aten::div.Tensor", {A(scores), A(scalar(f64))}, m);
      e.op("aten::ones", {L({s, s}), ST(DType::kBool), N(), CPU(), N()}, DType::kBool);
      e.op("aten::triu", {A(T(DType::kBool, {s, s})), I(1)}, DType::kBool);
      e.op("aten::masked_fill.Scalar", {A(scores), A(T(DType::kBool, {s, s})), V("-inf")}, m);
      e.op("aten::softmax.int", {A(scores), I(-1), ST(f32)}, f32);
      e.to_dtype(T(f32, {b, nh, s, s}), m);
      e.op("aten::matmul", {A(scores), A(vv)}, m);
      attended = T(m, {b, nh, s, hd});
    }
    const Spec context = e.transpose(attended, 1, 2);
    const Spec flat = e.reshape(context, {b, s, qd});
    Spec out = e.linear_forward(flat, qd, h);
    if (has_tp) {
      out = e.tp_clone(out);
      e.comm("tp_all_reduce", m, b * s * h * static_cast<int64_t>(dtype_bytes(m)));
    }
    e.add(act, out);
    // MLP block
    x = e.norm_forward(act);
    if (has_tp) x = e.tp_clone(x);
    e.linear_forward(x, h, f);
    e.linear_forward(x, h, f);
    e.unary("aten::silu", T(m, {b, s, f}));
    e.mul(T(m, {b, s, f}), T(m, {b, s, f}));
    out = e.linear_forward(T(m, {b, s, f}), f, h);
    if (has_tp) {
      out = e.tp_clone(out);
      e.comm("tp_all_reduce", m, b * s * h * static_cast<int64_t>(dtype_bytes(m)));
    }
    e.add(act, out);
  }
  e.repeat(1);
  if (layers.has_head) {
    const Spec x = e.norm_forward(act);
    const Spec logits = e.linear_forward(x, h, v);
    e.to_dtype(logits, f32);
    e.op("aten::reshape", {A(T(i64, {b, s})), L({-1})}, i64);
    e.op("aten::reshape", {A(T(f32, {b, s, v})), L({-1, v})}, f32);
    e.op("aten::cross_entropy_loss", {A(T(f32, {b * s, v})), A(T(i64, {b * s})), N(), I(1), I(-100), D(0.0)}, f32);
    e.op("aten::mul.Tensor", {A(scalar(f32)), A(scalar(f64))}, f32);
  }

  // ---------------- backward ----------------
  e.phase("backward");
  // Gradient buffers: a tensor's first contribution is stored, later ones are added. LibTorch 1.13 adds
  // out of place; 2.x (InputBuffer::accumulate) adds in place into the buffered tensor when it holds the
  // only reference to it and it is dense (fresh: not a view such as a linear's reshaped input gradient),
  // else out of place, whose result is fresh.
  struct GradBuffer {
    int contributions = 0;
    bool fresh = false;  // the buffered tensor is owned and dense (2.x may add into it)
  };
  auto accumulate = [&](GradBuffer& buffer, const Spec& grad, bool grad_fresh) {  // grad_fresh: see GradBuffer
    if (buffer.contributions++ == 0) {
      buffer.fresh = grad_fresh;
      return;
    }
    if (torch2 && buffer.fresh) {
      e.op("aten::add_.Tensor", {A(grad), A(grad), I(1)}, grad.dtype);
    } else {
      e.add(grad, grad);
    }
    buffer.fresh = true;
  };
  // Linear backward, from the matmul's output-fold reshape to the weight's AccumulateGrad; `input_grad`
  // receives the input gradient [b, s, in] before the weight's path runs.
  auto linear_backward = [&](const Spec& grad3, int64_t in, int64_t out, const std::function<void(const Spec&)>& input_grad) {
    const Spec g2 = e.reshape(grad3, {b * s, out});
    const Spec gt = e.t(g2);
    e.t(e.mm(gt, T(m, {b * s, in})));
    const Spec w = e.t(T(m, {in, out}, {1, in}));
    const Spec gx = e.reshape(e.mm(g2, w), {b, s, in});
    input_grad(gx);
    if (policy.autocast) e.to_layout(T(m, {in, out}, {1, in}), p);
    e.t(T(p, {in, out}, {1, in}));
    e.op("aten::detach", {A(T(p, {out, in}))}, p);
  };
  // The gradient of a linear's input reaching its (shared) source: through autocast's cast, then added.
  auto linear_input = [&](GradBuffer& buffer) {
    return [&, target = &buffer](const Spec& gx) {
      if (policy.autocast && a != m) {
        accumulate(*target, e.to_layout(gx, a), true);
      } else {
        accumulate(*target, gx, false);  // a view of the matmul's result
      }
    };
  };
  auto no_input = [](const Spec&) {};
  // RMSNorm backward; `x_buffer` holds the gradients its input already has.
  auto norm_backward = [&](GradBuffer& x_buffer) {
    const Spec g = T(a, {b, s, h});
    e.mul(g, T(p, {h}));
    e.mul(g, g);
    e.op("aten::sum.dim_IntList", {A(g), L({0, 1}), B(true), N()}, a);
    e.op("aten::view", {A(T(a, {1, 1, h})), L({h})}, a);
    e.op("aten::detach", {A(T(p, {h}))}, p);
    const bool cast = a != f32;
    if (cast) e.to_layout(g, f32);
    const Spec gf = T(f32, {b, s, h});
    const Spec stat = T(f32, {b, s, 1});
    e.mul(gf, gf);
    e.mul(gf, stat);
    e.op("aten::sum.dim_IntList", {A(gf), L({2}), B(true), N()}, f32);
    GradBuffer h_buffer;
    if (cast) {
      accumulate(h_buffer, gf, true);
    } else {
      accumulate(x_buffer, gf, true);
    }
    e.op("aten::pow.Tensor_Scalar", {A(stat), I(3)}, f32);
    e.op("aten::mul.Tensor", {A(stat), A(scalar(f64))}, f32);
    e.mul(stat, stat);
    e.op("aten::expand", {A(stat), L({b, s, h}), B(false)}, f32);
    e.op("aten::div.Tensor", {A(T(f32, {b, s, h}, {s, 1, 0})), A(scalar(i64))}, f32);
    e.op("aten::pow.Tensor_Scalar", {A(gf), D(1.0)}, f32);
    e.op("aten::mul.Tensor", {A(gf), A(scalar(f64))}, f32);
    e.mul(gf, gf);
    if (cast) {
      accumulate(h_buffer, gf, true);
      accumulate(x_buffer, e.to_layout(gf, a), true);
    } else {
      accumulate(x_buffer, gf, true);
    }
  };
  auto rotary_backward = [&](const Spec& grad, int64_t heads) {
    const Spec table = T(m, {s, hd});
    const Spec full = T(m, {b, heads, s, hd});
    Spec buffer = e.mul(grad, table);  // x * cos: the first contribution to x's gradient
    const Spec rotated = e.mul(grad, table);
    const Spec second = e.narrow(rotated, 3, 0, hd / 2);
    const Spec first = e.narrow(rotated, 3, hd / 2, hd / 2);
    // The buffer (x * cos's gradient) is fresh: 2.x adds the slice gradients into it in place.
    const auto add_into = [&](const Spec& held, const Spec& slice_grad) {
      if (!torch2) return e.add(held, slice_grad);
      e.op("aten::add_.Tensor", {A(held), A(slice_grad), I(1)}, held.dtype);
      return held;
    };
    e.op("aten::slice_backward", {A(second), L({b, heads, s, hd}), I(-1), I(0), I(hd / 2), I(1)}, m);
    buffer = add_into(buffer, full);
    e.op("aten::neg", {A(first)}, m);
    e.op("aten::slice_backward", {A(like_layout(first, m)), L({b, heads, s, hd}), I(-1), I(hd / 2), I(hd), I(1)}, m);
    return add_into(buffer, full);
  };
  auto residual_add_backward = [&]() {
    if (m != a) e.to_dtype(T(a, {b, s, h}), m);  // the gradient of the low-precision branch output
  };
  auto copy_to_tp_backward = [&]() {
    if (!has_tp) return;
    e.tp_clone(T(a, {b, s, h}));
    e.comm("tp_all_reduce", a, b * s * h * static_cast<int64_t>(dtype_bytes(a)));
  };

  GradBuffer top;  // gradients reaching the stage's last residual tensor
  if (layers.has_head) {
    e.op("aten::ones_like", {A(scalar(f32)), N(), N(), N(), N(), I(0)}, f32);
    if (torch2) {  // the loss * 0.25 backward: 2.x multiplies by the wrapped number in the gradient's dtype
      e.op("aten::mul.Tensor", {A(scalar(f32)), A(scalar(f64))}, f32);
    } else {
      e.op("aten::lift_fresh", {A(scalar(f64))}, f64);
      e.op("aten::mul.Tensor", {A(scalar(f32)), A(scalar(f64))}, f64);
      e.op("aten::to.dtype", {A(scalar(f64)), ST(f32), B(false), B(false), N()}, f32);
    }
    e.op("aten::nll_loss_backward", {A(scalar(f32)), A(T(f32, {b * s, v})), A(T(i64, {b * s})), N(), I(1), I(-100), A(scalar(f32))}, f32);
    e.op("aten::_log_softmax_backward_data", {A(T(f32, {b * s, v})), A(T(f32, {b * s, v})), I(1), ST(f32)}, f32);
    e.reshape(T(f32, {b * s, v}), {b, s, v});
    if (m != f32) e.to_layout(T(f32, {b, s, v}), m);
    GradBuffer norm_out;
    linear_backward(T(m, {b, s, v}), h, v, linear_input(norm_out));
    norm_backward(top);
  } else {
    e.op("aten::randn_like", {A(T(a, {b, s, h})), N(), N(), N(), N(), N()}, a);
  }
  const Spec qt = T(m, {b, nh, s, hd}, qs_strides);
  // One decoder layer's backward; `top_fresh`: whether the gradient reaching its output is one the engine
  // alone holds (2.x then accumulates into it in place). On a stage without the loss the top layer's is
  // the caller's gradient (randn_like, or the received one in training), still referenced.
  const auto backward_layer = [&](bool top_fresh) {
    // out = h + mlp(norm2(h))
    residual_add_backward();
    GradBuffer h_buffer{1, top_fresh};
    linear_backward(T(m, {b, s, h}), f, h, no_input);
    const Spec gf = T(m, {b, s, f});
    e.mul(gf, gf);
    e.mul(gf, gf);
    e.op("aten::silu_backward", {A(gf), A(gf)}, m);
    GradBuffer mlp_in;
    linear_backward(gf, h, f, linear_input(mlp_in));
    linear_backward(gf, h, f, linear_input(mlp_in));
    copy_to_tp_backward();
    norm_backward(h_buffer);
    // h = x + attention(norm1(x))
    residual_add_backward();
    GradBuffer x_buffer{1, true};  // holds the MLP block's accumulated input gradient, which the engine owns
    linear_backward(T(m, {b, s, h}), qd, h, no_input);
    const Spec context = e.reshape(T(m, {b, s, qd}), {b, s, nh, hd});
    const Spec gctx = e.transpose(context, 1, 2);
    Spec qgrad, kgrad, vgrad;
    if (sdpa) {
      const Spec out = T(m, {b, nh, s, hd}, qs_strides);
      const Spec logsumexp = T(f32, {b, nh, s}, {s * nh, 1, nh});
      e.op("aten::_scaled_dot_product_flash_attention_for_cpu_backward",
           {A(gctx), A(sdpa_inputs[0]), A(sdpa_inputs[1]), A(sdpa_inputs[2]), A(out), A(logsumexp), D(0.0), B(true), N(), N()}, m);
      qgrad = kgrad = vgrad = out;  // the kernel writes its gradients laid out like its output
    } else {
      const Spec g3 = e.reshape(gctx, {b * nh, s, hd});
      const Spec probs3 = e.transpose(T(m, {b * nh, s, s}), 1, 2);
      const Spec vgrad3 = e.bmm(probs3, g3);
      const Spec v4 = gqa ? T(m, {b, nh, s, hd}) : T(m, {b, nh, s, hd}, ks_strides);
      const Spec v3 = e.transpose(reshaped(v4, {b * nh, s, hd}), 1, 2);
      e.bmm(g3, v3);
      vgrad = e.reshape(vgrad3, {b, nh, s, hd});
      e.reshape(T(m, {b * nh, s, s}), {b, nh, s, s});
      Spec gp = T(m, {b, nh, s, s});
      if (m != f32) gp = e.to_layout(gp, f32);
      e.op("aten::_softmax_backward_data", {A(T(f32, {b, nh, s, s})), A(T(f32, {b, nh, s, s})), I(-1), ST(f32)}, f32);
      if (m != f32) e.to_layout(T(f32, {b, nh, s, s}), m);
      const Spec gs = T(m, {b, nh, s, s});
      e.op("aten::masked_fill.Scalar", {A(gs), A(T(DType::kBool, {s, s})), I(0)}, m);
      if (!torch2) e.op("aten::lift_fresh", {A(scalar(f64))}, f64);
      e.op("aten::div.Tensor", {A(gs), A(scalar(f64))}, m);
      const Spec gs3 = e.reshape(gs, {b * nh, s, s});
      const Spec q3 = e.transpose(reshaped(qt, {b * nh, s, hd}), 1, 2);
      const Spec ktgrad3 = e.bmm(q3, gs3);
      const Spec k4 = gqa ? T(m, {b, nh, s, hd}) : qt;  // k after rotary (or repeat), as used
      const Spec kt3 = e.transpose(reshaped(transposed(k4, 2, 3), {b * nh, hd, s}), 1, 2);
      const Spec qgrad3 = e.bmm(gs3, kt3);
      const Spec ktgrad = e.reshape(ktgrad3, {b, nh, hd, s});
      qgrad = e.reshape(qgrad3, {b, nh, s, hd});
      kgrad = e.transpose(ktgrad, 2, 3);
    }
    Spec vg = vgrad;
    if (gqa) {
      if (torch2) {  // repeat_interleave.self_int's backward: fold the group, sum it, drop it
        for (const Spec& grad : {vgrad, kgrad}) {
          const Spec folded = e.reshape(grad, {b, nkv, nh / nkv, s, hd});
          e.op("aten::sum.dim_IntList", {A(folded), L({2}), B(true), N()}, m);
          e.op("aten::squeeze.dim", {A(T(m, {b, nkv, 1, s, hd})), I(2)}, m);
        }
      } else {
        e.op("aten::index_select_backward", {A(vgrad), L({b, nkv, s, hd}), I(1), A(T(i64, {nh}))}, m);
        e.op("aten::index_select_backward", {A(kgrad), L({b, nkv, s, hd}), I(1), A(T(i64, {nh}))}, m);
      }
      kgrad = T(m, {b, nkv, s, hd});
      vg = T(m, {b, nkv, s, hd});
    }
    const Spec kg = rotary_backward(kgrad, nkv);
    const Spec qg = rotary_backward(qgrad, nh);
    GradBuffer attention_in;
    for (int which = 0; which < 3; ++which) {  // v, k, q: the most recently created first
      const Spec grad = which == 0 ? vg : which == 1 ? kg : qg;
      const int64_t heads = which == 2 ? nh : nkv;
      const Spec g4 = e.transpose(grad, 1, 2);
      const Spec g3v = e.reshape(g4, {b, s, heads * hd});
      linear_backward(g3v, h, heads * hd, linear_input(attention_in));
    }
    copy_to_tp_backward();
    norm_backward(x_buffer);
  };
  if (torch2 && !layers.has_head && layers.num_layers > 0) {
    e.repeat(1);
    backward_layer(false);
    if (layers.num_layers > 1) {
      e.repeat(layers.num_layers - 1);
      backward_layer(true);
    }
  } else if (layers.num_layers > 0) {
    e.repeat(layers.num_layers);
    backward_layer(true);
  }
  e.repeat(1);
  if (layers.has_embedding) {
    e.op("aten::embedding_backward", {A(T(a, {b, s, h})), A(T(i64, {b, s})), I(v), I(-1), B(false), B(false)}, p);
    e.op("aten::detach", {A(T(p, {v, h}))}, p);
  } else {
    e.op("aten::detach", {A(T(a, {b, s, h}))}, a);
  }

  // ---------------- DP buffer and optimizer ----------------
  // Parameters in registration order; `layer` is the layer index of a layer's parameter (-1 otherwise).
  // Calls that depend only on a parameter's shape are emitted for layer 0 and counted for every layer.
  struct Param {
    Dims shape;
    int layer;
  };
  std::vector<Param> params;
  if (layers.has_embedding) params.push_back({{v, h}, -1});
  for (int layer = 0; layer < layers.num_layers; ++layer) {
    for (const Dims& shape : {Dims{h}, Dims{qd, h}, Dims{kvd, h}, Dims{kvd, h}, Dims{h, qd}, Dims{h}, Dims{f, h},
                              Dims{f, h}, Dims{h, f}}) {
      params.push_back({shape, layer});
    }
  }
  if (layers.has_head) {
    params.push_back({{h}, -1});
    params.push_back({{v, h}, -1});
  }
  const auto repeat_for = [&](const Param& param) { return param.layer == 0 ? int64_t{layers.num_layers} : int64_t{1}; };
  int64_t local_params = 0;
  for (const Param& param : params) local_params += T(p, param.shape).numel();
  const DType g = policy.grad_dtype;
  e.phase("dp_buffer");
  std::vector<Spec> flat_parts;
  for (const Param& param : params) {
    flat_parts.push_back(T(g, {T(g, param.shape).numel()}));
    if (param.layer > 0) continue;
    e.repeat(repeat_for(param));
    e.op("aten::reshape", {A(T(g, param.shape)), L({-1})}, g);
  }
  e.repeat(1);
  e.op("aten::cat", {AL(flat_parts), I(0)}, g);
  e.op("aten::div_.Tensor", {A(T(g, {local_params})), A(scalar(f64))}, g);
  int64_t offset = 0;
  for (const Param& param : params) {
    const int64_t n = T(g, param.shape).numel();
    e.repeat(1);
    e.op("aten::narrow", {A(T(g, {local_params})), I(0), I(offset), I(n)}, g);  // a distinct offset each
    offset += n;
    if (param.layer > 0) continue;
    e.repeat(repeat_for(param));
    e.op("aten::view_as", {A(T(g, {n})), A(T(g, param.shape))}, g);
    e.op("aten::copy_", {A(T(g, param.shape)), A(T(g, param.shape)), B(false)}, g);
  }
  e.phase("optimizer");
  // AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01) at its second step (one warm-up step).
  const double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, weight_decay = 0.01;
  const double step = 2.0;
  const double bias_correction1 = 1.0 - std::pow(beta1, step);
  for (const Param& param : params) {
    if (param.layer > 0) continue;
    e.repeat(repeat_for(param));
    const Spec w = T(p, param.shape);
    e.op("aten::mul_.Scalar", {A(w), D(1.0 - lr * weight_decay)}, p);
    e.op("aten::mul_.Scalar", {A(w), D(beta1)}, p);
    e.op("aten::add_.Tensor", {A(w), A(w), D(1.0 - beta1)}, p);
    e.op("aten::mul_.Scalar", {A(w), D(beta2)}, p);
    e.op("aten::addcmul_", {A(w), A(w), A(w), D(1.0 - beta2)}, p);
    e.op("aten::sqrt", {A(w)}, p);
    e.op("aten::div.Tensor", {A(w), A(scalar(f64))}, p);
    e.op("aten::add_.Tensor", {A(w), A(scalar(f64)), I(1)}, p);
    e.op("aten::addcdiv_", {A(w), A(w), A(w), D(-(lr / bias_correction1))}, p);
  }
  e.repeat(1);

  // ---------------- comms appended by trace_stage, then aggregation ----------------
  const int64_t activation_bytes = b * s * h * static_cast<int64_t>(dtype_bytes(a));
  if (stage < pp - 1) e.comms.push_back(CommOp{"forward", "pp_send_forward", to_string(a), activation_bytes, 1});
  if (stage > 0) e.comms.push_back(CommOp{"backward", "pp_send_backward", to_string(a), activation_bytes, 1});
  e.comms.push_back(CommOp{"dp_buffer", "dp_all_reduce", to_string(g), local_params * static_cast<int64_t>(dtype_bytes(g)), 1});

  BuiltStage built;
  built.ops = std::move(e.ops);
  std::map<std::string, std::size_t> comm_position;
  for (const CommOp& c : e.comms) {
    const std::string key = c.phase + "/" + c.kind + "/" + c.dtype + "/" + std::to_string(c.bytes);
    const auto found = comm_position.find(key);
    if (found != comm_position.end()) {
      built.comms[found->second].count += c.count;
      continue;
    }
    comm_position[key] = built.comms.size();
    built.comms.push_back(c);
  }
  built.local_params = local_params;
  built.num_layers = layers.num_layers;
  return built;
}

}  // namespace itertime::predict
