// answer_check.cpp: the plausibility checks of a prediction (answer_check.hpp).
#include "predict/answer_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace itertime::predict {
namespace {

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// A ratio as people read it: "3.2x", "1200x", "4.1e+05x".
std::string times(double ratio) {
  if (ratio < 100) return fixed(ratio, 1) + "x";
  if (ratio < 1e5) return fixed(ratio, 0) + "x";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1ex", ratio);
  return text;
}

}  // namespace

std::vector<Finding> check_answer(const AnswerFacts& f) {
  std::vector<Finding> out;
  if (!f.blind && !f.calibrated_precisions.empty() && f.calibrated_precisions.count(f.precision) == 0) {
    out.push_back({"precision_not_calibrated", true,
                   "the calibration never ran " + f.precision + " (it traced " + join(f.calibrated_precisions) + ")",
                   "predict one of those precisions, or calibrate " + f.precision +
                       " where it runs (a GPU, or LibTorch 2.x for fp16 on CPU)"});
  }
  if (f.operators_without_time > 0) {
    const double share = f.operators > 0 ? static_cast<double>(f.operators_without_time) / static_cast<double>(f.operators) : 1.0;
    out.push_back({"operators_without_time", share > kMaxZeroPricedShare,
                   std::to_string(f.operators_without_time) + " of " + std::to_string(f.operators) +
                       " operators have neither a profile nor a regression and are priced at zero",
                   "profile these operators (`itertime calibrate ops` with this configuration or precision)"});
  }
  const double reach =
      f.largest_profiled_flops > 0 && f.largest_matmul_flops > 0 ? f.largest_matmul_flops / f.largest_profiled_flops : 0.0;
  if (f.extrapolated_fraction > kFarExtrapolatedFraction && reach > kFarShapeReach) {
    out.push_back({"far_extrapolation", true,
                   fixed(100.0 * f.extrapolated_fraction, 0) +
                       " % of the compute time comes from the operator regression, at matrix products " + times(reach) +
                       " the largest profiled operator",
                   "calibrate a model and shapes near this one (`itertime calibrate ops`), or predict a described "
                   "device (--hardware NAME)"});
  }
  if (f.mfu && *f.mfu > kMaxPlausibleMfu) {
    out.push_back(
        {"faster_than_peak", true,
         "the prediction is faster than the device can compute: MFU " + fixed(100.0 * *f.mfu, 0) + " % of the dense peak",
         "the figures it rests on do not hold for this configuration: predict one nearer the calibration, "
         "or calibrate the device it is for"});
  }
  const double needed = static_cast<double>(f.peak_memory_bytes + f.memory_reserve_bytes);
  if (f.device_memory_bytes > 0 && f.peak_memory_bytes > 0 && needed > f.device_memory_bytes) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    out.push_back({"exceeds_device_memory", true,
                   "the layout needs " + fixed(needed / gib, 2) + " GiB per GPU (peak " +
                       fixed(static_cast<double>(f.peak_memory_bytes) / gib, 2) + " GiB + " +
                       fixed(static_cast<double>(f.memory_reserve_bytes) / gib, 2) +
                       " GiB of CUDA context, workspaces and NCCL buffers), more than the device's " +
                       fixed(f.device_memory_bytes / gib, 2) + " GiB: the run would stop out of memory",
                   "lower the memory: raise --tp, --pp or --cp, use a recipe with dopt (the distributed optimizer) or "
                   "rc-sel / rc-full (recompute), or a smaller --mbs; itertime plan lists the layouts that fit"});
  }
  return out;
}

std::set<std::string> calibrated_precisions(const FittedModel& model) {
  std::set<std::string> out;
  for (const auto& [key, stage] : model.stages) {
    // model/tpT/ppP/sS/mbsB/seqN/PRECISION/aware[/...] (common/ops_store.hpp stage_key)
    std::vector<std::string> fields;
    std::stringstream in(key);
    for (std::string field; std::getline(in, field, '/');) fields.push_back(field);
    if (fields.size() >= 8 && fields[7] == "aware") out.insert(fields[6]);
  }
  return out;
}

double largest_profiled_flops(const FittedModel& model) {
  double largest = 0;
  for (const auto& [id, info] : model.signatures) largest = std::max(largest, info.flops);
  return largest;
}

double largest_matmul_flops(const LlamaSpec& model, const ParallelConfig& config, const TrainingTechniques& techniques) {
  const double tokens = static_cast<double>(config.micro_batch) * static_cast<double>(config.seq_len) / config.cp;
  const double h = static_cast<double>(model.hidden_size), tp = config.tp;
  const double head_vocab = static_cast<double>(model.vocab_size) / (techniques.vocab_parallel && config.tp > 1 ? tp : 1.0);
  const double q_out = static_cast<double>(model.num_heads * model.head_dim) / tp;
  const double ffn = static_cast<double>(model.intermediate_size) / tp;
  const double heads = static_cast<double>(model.num_heads) / tp;
  const double scores = 2.0 * config.micro_batch * heads * (static_cast<double>(config.seq_len) / config.cp) *
                        static_cast<double>(config.seq_len) * static_cast<double>(model.head_dim);
  return std::max({2.0 * tokens * h * q_out, 2.0 * tokens * h * ffn, 2.0 * tokens * h * head_vocab, scores});
}

}  // namespace itertime::predict
