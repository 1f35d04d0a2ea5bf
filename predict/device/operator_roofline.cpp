// operator_roofline.cpp: the transferable operator model (operator_roofline.hpp).
#include "predict/device/operator_roofline.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "common/errors.hpp"

namespace itertime::predict {
namespace {

struct ClassName {
  OperatorClass op_class;
  const char* name;
};
constexpr ClassName kClassNames[] = {
    {OperatorClass::kMatrixProduct, "matrix_product"},
    {OperatorClass::kAttention, "attention"},
    {OperatorClass::kElementwise, "elementwise"},
    {OperatorClass::kNormalization, "normalization"},
    {OperatorClass::kCopy, "copy"},
    {OperatorClass::kEmbedding, "embedding"},
    {OperatorClass::kOptimizer, "optimizer"},
    {OperatorClass::kView, "view"},
};

// "aten::mul_.Tensor" -> "mul_"; "aten::mul_." -> "mul_".
std::string_view base_name(std::string_view name) {
  const std::size_t colons = name.rfind("::");
  if (colons != std::string_view::npos) name.remove_prefix(colons + 2);
  const std::size_t dot = name.find('.');
  if (dot != std::string_view::npos) name = name.substr(0, dot);
  return name;
}

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A call's time from its floor and its bound: their smooth maximum sqrt(floor^2 + bound^2). A small
// call costs its floor, a large one its bound; on this repository's CPU profiles this fits as well as
// floor + bound (rms log error 0.133 against 0.127 for bf16 matrix products) without pushing the
// efficiency above 1 to make up for the floor added to large calls (0.79 against 1.33).
double combine_us(double floor_us, double bound_us) { return std::sqrt(floor_us * floor_us + bound_us * bound_us); }

// Evaluates the bound (without floor and scale) of one call; negative when it cannot.
double bound_us(const ClassEfficiency& efficiency, double peak_or_bandwidth, double work) {
  if (peak_or_bandwidth <= 0 || efficiency.efficiency <= 0) return -1;
  return work / (efficiency.efficiency * peak_or_bandwidth) * 1e6;
}

// Least squares of log(pred/measured) over (efficiency, floor): coarse log grids, then two refinements.
// `bound_at_unit_efficiency_us[i]` is call i's bound at efficiency 1 (time = floor + bound / efficiency).
ClassEfficiency fit_two_terms(const std::vector<double>& bound_at_unit_efficiency_us, const std::vector<double>& measured_us,
                              bool fit_efficiency) {
  const auto cost = [&](double efficiency, double floor_us) {
    double sum = 0;
    for (std::size_t i = 0; i < measured_us.size(); ++i) {
      const double predicted = combine_us(floor_us, bound_at_unit_efficiency_us[i] / efficiency);
      const double r = std::log(std::max(predicted, 1e-9) / measured_us[i]);
      sum += r * r;
    }
    return sum;
  };
  double best_e = 1, best_f = 0, best_cost = std::numeric_limits<double>::infinity();
  double e_lo = std::log(1e-4), e_hi = std::log(20.0), f_lo = std::log(1e-3), f_hi = std::log(1e5);
  for (int round = 0; round < 3; ++round) {
    constexpr int kSteps = 48;
    for (int i = 0; i <= kSteps; ++i) {
      const double e = fit_efficiency ? std::exp(e_lo + (e_hi - e_lo) * i / kSteps) : 1.0;
      for (int j = -1; j <= kSteps; ++j) {
        const double f = j < 0 ? 0.0 : std::exp(f_lo + (f_hi - f_lo) * j / kSteps);
        const double c = cost(e, f);
        if (c < best_cost) {
          best_cost = c;
          best_e = e;
          best_f = f;
        }
      }
      if (!fit_efficiency) break;
    }
    const double e_step = (e_hi - e_lo) / 48 * 2, f_step = (f_hi - f_lo) / 48 * 2;
    e_lo = std::log(best_e) - e_step;
    e_hi = std::log(best_e) + e_step;
    const double f_center = best_f > 0 ? std::log(best_f) : f_lo;
    f_lo = f_center - f_step;
    f_hi = f_center + f_step;
  }
  ClassEfficiency out;
  out.efficiency = best_e;
  out.floor_us = best_f;
  out.points = static_cast<int64_t>(measured_us.size());
  out.fit_rms_log = measured_us.empty() ? 0.0 : std::sqrt(best_cost / static_cast<double>(measured_us.size()));
  return out;
}

std::pair<OperatorClass, ComputeDType> memory_key(OperatorClass op_class, ComputeDType math) {
  return {op_class, op_class == OperatorClass::kView ? ComputeDType::kFp32 : math};
}

double peak_of(const RankRates& rates, ComputeDType math) {
  const auto found = rates.peak_flops_per_s.find(math);
  return found == rates.peak_flops_per_s.end() ? 0.0 : found->second;
}

}  // namespace

std::string to_string(OperatorClass op_class) {
  for (const ClassName& entry : kClassNames) {
    if (entry.op_class == op_class) return entry.name;
  }
  ITERTIME_CHECK(false, "unknown operator class");
  return "";
}

OperatorClass parse_operator_class(std::string_view text) {
  for (const ClassName& entry : kClassNames) {
    if (text == entry.name) return entry.op_class;
  }
  throw UserError("unknown operator class '" + std::string(text) +
                  "'; expected matrix_product, attention, elementwise, normalization, copy, embedding, optimizer or view");
}

const std::vector<OperatorClass>& all_operator_classes() {
  static const std::vector<OperatorClass> classes = [] {
    std::vector<OperatorClass> out;
    for (const ClassName& entry : kClassNames) out.push_back(entry.op_class);
    return out;
  }();
  return classes;
}

bool is_compute_bound(OperatorClass op_class) {
  return op_class == OperatorClass::kMatrixProduct || op_class == OperatorClass::kAttention;
}

OperatorClass classify_operator(std::string_view name, Phase phase) {
  const std::string_view base = base_name(name);
  if (one_of(base, {"narrow",
                    "reshape",
                    "t",
                    "transpose",
                    "detach",
                    "view",
                    "view_as",
                    "expand",
                    "unsqueeze",
                    "squeeze",
                    "lift_fresh",
                    "empty",
                    "new_empty_strided",
                    "empty_strided",
                    "alias",
                    "permute",
                    "select",
                    "slice",
                    "as_strided",
                    "split",
                    "chunk",
                    "unbind"})) {
    return OperatorClass::kView;
  }
  if (one_of(base, {"mm", "bmm", "matmul", "addmm", "linear", "baddbmm", "addbmm"})) return OperatorClass::kMatrixProduct;
  if (base.find("scaled_dot_product") != std::string_view::npos || base.find("flash_attention") != std::string_view::npos ||
      base.find("efficient_attention") != std::string_view::npos) {
    return OperatorClass::kAttention;
  }
  if (phase == Phase::kOptimizer) return OperatorClass::kOptimizer;
  if (one_of(base, {"to", "_to_copy", "copy_", "clone", "contiguous", "cat", "slice_backward", "select_backward", "stack",
                    "zero_", "zeros", "ones", "ones_like", "zeros_like", "fill_", "new_zeros", "arange"})) {
    return OperatorClass::kCopy;
  }
  if (one_of(base, {"softmax",
                    "_softmax",
                    "_softmax_backward_data",
                    "log_softmax",
                    "_log_softmax",
                    "_log_softmax_backward_data",
                    "mean",
                    "sum",
                    "max",
                    "min",
                    "norm",
                    "rsqrt",
                    "pow",
                    "cross_entropy_loss",
                    "nll_loss",
                    "nll_loss_forward",
                    "nll_loss_backward",
                    "rms_norm",
                    "layer_norm",
                    "native_layer_norm",
                    "native_layer_norm_backward"})) {
    return OperatorClass::kNormalization;
  }
  if (one_of(base, {"embedding", "embedding_backward", "embedding_dense_backward", "index_select", "index_select_backward",
                    "gather", "scatter_add_", "scatter_add", "index_add_", "index"})) {
    return OperatorClass::kEmbedding;
  }
  return OperatorClass::kElementwise;
}

// Not parse_dtype_list (common/dtype_list.hpp): /ops/signatures stores input_dtypes cut at its field's
// capacity, so a long list can end in a partial name, which that parser refuses; unknown items are skipped here.
ComputeDType math_dtype_of(std::string_view input_dtypes, OperatorClass op_class, bool tf32_math) {
  bool fp32 = false, bf16 = false, fp16 = false;
  std::optional<ComputeDType> first;
  std::size_t start = 0;
  while (start <= input_dtypes.size()) {
    const std::size_t comma = input_dtypes.find(',', start);
    const std::string_view item =
        input_dtypes.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    std::optional<ComputeDType> dtype;
    if (item == "fp32" || item == "fp64") dtype = ComputeDType::kFp32;
    if (item == "bf16") dtype = ComputeDType::kBf16;
    if (item == "fp16") dtype = ComputeDType::kFp16;
    if (dtype && !first) first = dtype;
    fp32 = fp32 || dtype == ComputeDType::kFp32;
    bf16 = bf16 || dtype == ComputeDType::kBf16;
    fp16 = fp16 || dtype == ComputeDType::kFp16;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  ComputeDType math = ComputeDType::kFp32;
  if (is_compute_bound(op_class)) {
    math = first.value_or(ComputeDType::kFp32);
  } else if (!fp32 && (bf16 || fp16)) {
    math = bf16 ? ComputeDType::kBf16 : ComputeDType::kFp16;
  }
  return math == ComputeDType::kFp32 && tf32_math && is_compute_bound(op_class) ? ComputeDType::kTf32 : math;
}

namespace {

// The sizes of a signature's first `limit` tensors ("bf16[2,8,128,64]{...}" -> {2, 8, 128, 64}): each
// "[digits and commas]" right after a lowercase letter or digit (a dtype name); a 0-dim tensor ("f32[]")
// has no sizes and is skipped. A hand scan: a plan parses thousands of signatures.
std::vector<std::vector<double>> tensor_shapes(std::string_view text, std::size_t limit) {
  const auto is_name = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  std::vector<std::vector<double>> shapes;
  for (std::size_t open = text.find('['); open != std::string_view::npos && shapes.size() < limit;
       open = text.find('[', open + 1)) {
    if (open == 0 || !is_name(text[open - 1])) continue;
    std::size_t end = open + 1;
    while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') || text[end] == ',')) ++end;
    if (end == open + 1 || end >= text.size() || text[end] != ']') continue;
    std::vector<double> dims;
    double value = 0;
    bool digits = false;
    for (std::size_t i = open + 1; i <= end; ++i) {
      if (i < end && text[i] != ',') {
        value = value * 10 + (text[i] - '0');
        digits = true;
      } else {
        if (digits) dims.push_back(value);
        value = 0;
        digits = false;
      }
    }
    shapes.push_back(std::move(dims));
  }
  return shapes;
}

double elements(const std::vector<double>& shape) {
  double n = 1;
  for (double d : shape) n *= d;
  return n;
}

}  // namespace

Fp8Casts fp8_casts_of(std::string_view signature) {
  const std::vector<std::vector<double>> shapes = tensor_shapes(signature, 2);
  if (shapes.size() < 2) return {};
  return {1, 3.0 * elements(shapes[0]), elements(shapes[0]) + elements(shapes[1])};
}

double attention_flops(std::string_view name, std::string_view signature) {
  const std::string text(signature);
  const std::vector<std::vector<double>> shapes = tensor_shapes(text, 6);
  const bool backward = name.find("backward") != std::string_view::npos;
  // A backward's first tensor is the output gradient, shaped like q: q and k follow it.
  const std::size_t q_index = backward ? 1 : 0;
  if (shapes.size() < q_index + 2 || shapes[q_index].size() != 4 || shapes[q_index + 1].size() != 4) return 0.0;
  const std::vector<double>& q = shapes[q_index];
  const std::vector<double>& k = shapes[q_index + 1];
  double flops = 4.0 * q[0] * q[1] * q[2] * k[2] * q[3];
  // is_causal is the first boolean argument after the tensors and the dropout probability.
  const std::size_t causal_at = text.find(", True");
  const std::size_t first_false = text.find(", False");
  const bool causal = causal_at != std::string::npos && (first_false == std::string::npos || causal_at < first_false);
  if (causal) flops *= 0.5;
  return backward ? 2.5 * flops : flops;
}

RankRates rank_rates(const HardwareSpec& hardware, int64_t occupancy, int threads_per_rank) {
  RankRates rates;
  if (hardware.kind == DeviceKind::kGpu) {
    rates.peak_flops_per_s = hardware.peak_flops_per_s;
    rates.memory_bytes_per_s = hardware.memory_bandwidth_bytes_per_s;
    return rates;
  }
  const double cores = std::max(1, hardware.cores_per_node.value_or(1));
  const double busy = std::max<double>(1, static_cast<double>(occupancy));
  const double threads = std::max(1, threads_per_rank);
  // While it runs, a rank has min(threads, cores / running ranks) cores. Beyond the cores, ranks take
  // turns: /ops times a call while at most `cores` ranks compute (measured: the same medians at 4 busy
  // ranks as at 2 on 2 cores), and the predictor stretches by processor sharing (predictor.hpp).
  const double running = std::min(busy, cores);
  const double share = std::min(threads, cores / running);
  for (const auto& [dtype, node_peak] : hardware.peak_flops_per_s) {
    const auto per_core = hardware.peak_flops_per_s_per_core.find(dtype);
    const double core_peak = per_core != hardware.peak_flops_per_s_per_core.end() ? per_core->second : node_peak / cores;
    rates.peak_flops_per_s[dtype] = core_peak * share;
  }
  rates.memory_bytes_per_s = hardware.memory_bandwidth_bytes_per_s / running;
  return rates;
}

std::optional<double> roofline_time_us(const OperatorRoofline& roofline, const RankRates& rates, OperatorClass op_class,
                                       ComputeDType math, double flops, double bytes) {
  double bound = 0, floor_us = 0;
  if (is_compute_bound(op_class)) {
    const auto& table = op_class == OperatorClass::kMatrixProduct ? roofline.matrix : roofline.attention;
    const auto found = table.find(math);
    if (found == table.end()) return std::nullopt;
    bound = bound_us(found->second, peak_of(rates, math), flops);
    if (bound < 0) return std::nullopt;
    floor_us = found->second.floor_us;
    if (op_class == OperatorClass::kMatrixProduct) {
      const auto memory = roofline.memory.find(memory_key(OperatorClass::kElementwise, math));
      if (memory != roofline.memory.end()) bound = std::max(bound, bound_us(memory->second, rates.memory_bytes_per_s, bytes));
    }
  } else {
    const auto found = roofline.memory.find(memory_key(op_class, math));
    if (found == roofline.memory.end()) return std::nullopt;
    floor_us = found->second.floor_us;
    if (op_class != OperatorClass::kView) {
      bound = bound_us(found->second, rates.memory_bytes_per_s, bytes);
      if (bound < 0) return std::nullopt;
    }
  }
  return combine_us(floor_us, bound);
}

OperatorRoofline fit_operator_roofline(const std::vector<ProfiledCall>& calls, const RankRates& rates, std::size_t min_points) {
  OperatorRoofline out;
  const auto usable = [](const ProfiledCall& call) { return call.time_us > 0 && std::isfinite(call.time_us); };
  // Memory-bound classes first (matrix products use the elementwise efficiency in their memory term).
  std::set<std::pair<OperatorClass, ComputeDType>> memory_keys;
  for (const ProfiledCall& call : calls) {
    if (!is_compute_bound(call.op_class)) memory_keys.insert(memory_key(call.op_class, call.math));
  }
  for (const auto& key : memory_keys) {
    const OperatorClass op_class = key.first;
    std::vector<double> bounds, measured;
    for (const ProfiledCall& call : calls) {
      if (memory_key(call.op_class, call.math) != key || !usable(call)) continue;
      bounds.push_back(op_class == OperatorClass::kView ? 0.0 : call.bytes / rates.memory_bytes_per_s * 1e6);
      measured.push_back(call.time_us);
    }
    if (measured.size() < min_points || (op_class != OperatorClass::kView && rates.memory_bytes_per_s <= 0)) continue;
    out.memory[key] = fit_two_terms(bounds, measured, op_class != OperatorClass::kView);
  }
  for (OperatorClass op_class : {OperatorClass::kMatrixProduct, OperatorClass::kAttention}) {
    std::set<ComputeDType> dtypes;
    for (const ProfiledCall& call : calls) {
      if (call.op_class == op_class) dtypes.insert(call.math);
    }
    for (ComputeDType math : dtypes) {
      const double peak = peak_of(rates, math);
      if (peak <= 0) continue;
      std::vector<double> bounds, measured;
      for (const ProfiledCall& call : calls) {
        if (call.op_class != op_class || call.math != math || !usable(call)) continue;
        bounds.push_back(call.flops / peak * 1e6);
        measured.push_back(call.time_us);
      }
      if (measured.size() < min_points) continue;
      ClassEfficiency fitted = fit_two_terms(bounds, measured, true);
      (op_class == OperatorClass::kMatrixProduct ? out.matrix : out.attention)[math] = fitted;
    }
  }
  return out;
}

OperatorRoofline carry_to(const OperatorRoofline& fitted, const HardwareSpec& target) {
  OperatorRoofline out = fitted;
  const bool gpu = target.kind == DeviceKind::kGpu;
  const auto floor_for = [&](OperatorClass op_class, const ClassEfficiency& source) {
    if (!gpu) return source.floor_us;
    return op_class == OperatorClass::kView ? 0.0 : kGpuKernelFloorUs;
  };
  double best_matrix = 0;
  for (const auto& [dtype, efficiency] : fitted.matrix) best_matrix = std::max(best_matrix, efficiency.efficiency);
  out.matrix.clear();
  out.attention.clear();
  for (const auto& [dtype, peak] : target.peak_flops_per_s) {
    const auto own = fitted.matrix.find(dtype);
    ClassEfficiency matrix;
    if (own != fitted.matrix.end()) {
      matrix = own->second;
    } else if (best_matrix > 0) {
      matrix.efficiency = std::min(1.0, best_matrix);
    } else {
      continue;
    }
    matrix.efficiency = std::min(1.0, matrix.efficiency);  // above 1 on the source: its peak was measured low
    matrix.floor_us = floor_for(OperatorClass::kMatrixProduct, matrix);
    matrix.points = 0;
    out.matrix[dtype] = matrix;
    const auto own_attention = fitted.attention.find(dtype);
    ClassEfficiency attention = own_attention != fitted.attention.end() ? own_attention->second : matrix;
    attention.efficiency = std::min(1.0, attention.efficiency);
    attention.floor_us = floor_for(OperatorClass::kAttention, attention);
    attention.points = 0;
    out.attention[dtype] = attention;
  }
  out.memory.clear();
  std::map<OperatorClass, ClassEfficiency> best_memory;
  for (const auto& [key, efficiency] : fitted.memory) {
    ClassEfficiency& best = best_memory[key.first];
    if (efficiency.efficiency > best.efficiency || best.points == 0) best = efficiency;
  }
  for (auto [op_class, efficiency] : best_memory) {
    // Above 1 on the source, the calls ran from its caches; the target's bound is its memory.
    efficiency.efficiency = std::min(1.0, efficiency.efficiency);
    efficiency.floor_us = floor_for(op_class, efficiency);
    efficiency.points = 0;
    if (op_class == OperatorClass::kView) {
      out.memory[memory_key(op_class, ComputeDType::kFp32)] = efficiency;
      continue;
    }
    for (const auto& [dtype, peak] : target.peak_flops_per_s) {
      const auto own = fitted.memory.find({op_class, dtype});
      ClassEfficiency carried = efficiency;
      if (!gpu && own != fitted.memory.end()) carried = own->second;  // a CPU target keeps the source's own per dtype
      out.memory[{op_class, dtype}] = carried;
    }
  }
  out.fitted_from =
      fitted.fitted_from + (fitted.fitted_on.empty() ? "" : " (" + fitted.fitted_on + "), carried to " + target.name);
  return out;
}

TransferCheck check_transfer(const OperatorRoofline& fitted, const RankRates& check_rates,
                             const std::vector<ProfiledCall>& check_calls, int64_t fit_occupancy, int64_t check_occupancy) {
  TransferCheck out;
  out.fit_occupancy = fit_occupancy;
  out.check_occupancy = check_occupancy;
  double ape_sum = 0, abs_sum = 0, measured_sum = 0;
  std::map<OperatorClass, std::pair<double, double>> per_class;  // |error|, measured
  for (const ProfiledCall& call : check_calls) {
    if (!(call.time_us > 0)) continue;
    const std::optional<double> predicted =
        roofline_time_us(fitted, check_rates, call.op_class, call.math, call.flops, call.bytes);
    if (!predicted) continue;
    const double error = std::fabs(*predicted - call.time_us);
    ape_sum += error / call.time_us;
    abs_sum += error;
    measured_sum += call.time_us;
    per_class[call.op_class].first += error;
    per_class[call.op_class].second += call.time_us;
    ++out.calls;
  }
  if (out.calls > 0) {
    out.mape_pct = 100.0 * ape_sum / static_cast<double>(out.calls);
    out.time_weighted_mape_pct = 100.0 * abs_sum / measured_sum;
  }
  for (const auto& [op_class, sums] : per_class) out.class_time_weighted_mape_pct[op_class] = 100.0 * sums.first / sums.second;
  return out;
}

std::string roofline_to_json(const OperatorRoofline& roofline) {
  nlohmann::ordered_json json;
  json["fitted_on"] = roofline.fitted_on;
  json["fitted_from"] = roofline.fitted_from;
  const auto entry = [](const ClassEfficiency& e) {
    return nlohmann::ordered_json{
        {"efficiency", e.efficiency}, {"floor_us", e.floor_us}, {"points", e.points}, {"fit_rms_log", e.fit_rms_log}};
  };
  for (const auto& [dtype, e] : roofline.matrix) json["matrix_product"][to_string(dtype)] = entry(e);
  for (const auto& [dtype, e] : roofline.attention) json["attention"][to_string(dtype)] = entry(e);
  for (const auto& [key, e] : roofline.memory) json["memory_bound"][to_string(key.first)][to_string(key.second)] = entry(e);
  return json.dump(2) + "\n";
}

OperatorRoofline roofline_from_json(const std::string& text, const std::string& source) {
  OperatorRoofline out;
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    const auto entry = [&](const nlohmann::json& value, const std::string& where) {
      ClassEfficiency e;
      e.efficiency = value.at("efficiency").get<double>();
      e.floor_us = value.at("floor_us").get<double>();
      e.points = value.value("points", int64_t{0});
      e.fit_rms_log = value.value("fit_rms_log", 0.0);
      if (!(e.efficiency > 0) || !std::isfinite(e.efficiency) || !(e.floor_us >= 0) || !std::isfinite(e.floor_us)) {
        throw UserError(source + ": " + where + ": efficiency must be > 0 and floor_us >= 0, finite");
      }
      return e;
    };
    const auto text_of = [&](const char* key) {  // not json.value(): GCC 12 warns of a null dereference in it
      const auto found = json.find(key);
      return found != json.end() && found->is_string() ? *found->get_ptr<const std::string*>() : std::string();
    };
    out.fitted_on = text_of("fitted_on");
    out.fitted_from = text_of("fitted_from");
    if (json.contains("matrix_product")) {
      for (const auto& [key, value] : json.at("matrix_product").items())
        out.matrix[parse_compute_dtype(key)] = entry(value, "matrix_product." + key);
    }
    if (json.contains("attention")) {
      for (const auto& [key, value] : json.at("attention").items())
        out.attention[parse_compute_dtype(key)] = entry(value, "attention." + key);
    }
    if (json.contains("memory_bound")) {
      for (const auto& [class_name, by_dtype] : json.at("memory_bound").items()) {
        for (const auto& [dtype_name, value] : by_dtype.items()) {
          out.memory[{parse_operator_class(class_name), parse_compute_dtype(dtype_name)}] =
              entry(value, "memory_bound." + class_name + "." + dtype_name);
        }
      }
    }
  } catch (const nlohmann::json::exception& error) {
    throw UserError(source + ": not an efficiency file (" + std::string(error.what()) +
                    "); write one with `itertime fit CAL --efficiency-out FILE`");
  }
  if (out.matrix.empty() && out.memory.empty())
    throw UserError(source + ": no efficiencies; write one with `itertime fit CAL --efficiency-out FILE`");
  return out;
}

}  // namespace itertime::predict
