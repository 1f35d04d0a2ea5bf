// stage_resolver.cpp: traced and built stages with their operator times (stage_resolver.hpp).
#include "predict/resolver/stage_resolver.hpp"

#include <cstdlib>
#include <limits>
#include <utility>

#include "common/dtype_list.hpp"
#include "common/errors.hpp"
#include "common/ops_store.hpp"
#include "predict/builder/op_builder.hpp"

namespace itertime::predict {
namespace {

constexpr std::size_t kMaxFallbackNotes = 8;

// The regression of (name|input dtypes) at `occupancy`, else at the nearest occupancy that has one;
// negative when there is none.
double regression_us(const FittedModel& model, const std::string& key, double flops, double bytes, int64_t occupancy) {
  const OpRegression* best = nullptr;
  int64_t best_distance = 0;
  for (auto it = model.regressions.lower_bound({key, std::numeric_limits<int64_t>::min()});
       it != model.regressions.end() && it->first.first == key; ++it) {
    const auto& [group_key, regression] = *it;
    const int64_t distance = std::llabs(group_key.second - occupancy);
    if (best == nullptr || distance < best_distance) {
      best = &regression;
      best_distance = distance;
    }
  }
  if (best == nullptr) return -1.0;
  return best->time_us(flops, bytes);
}

struct OpTime {
  double time_us = 0;
  bool extrapolated = false;  // from the regression
};

// The profiled time of a signature at an occupancy: exact, else the nearest profiled occupancy (noted),
// else the regression of its (name, dtypes).
OpTime op_time_us(const FittedModel& model, int64_t signature_id, int64_t occupancy, std::vector<std::string>& notes) {
  const auto exact = model.op_time_us.find({signature_id, occupancy});
  if (exact != model.op_time_us.end()) return {exact->second, false};
  double best = -1;
  int64_t best_distance = 0;
  for (int64_t level : model.occupancies) {
    const auto found = model.op_time_us.find({signature_id, level});
    if (found == model.op_time_us.end()) continue;
    const int64_t distance = std::llabs(level - occupancy);
    if (best < 0 || distance < best_distance) {
      best = found->second;
      best_distance = distance;
    }
  }
  if (best >= 0) {
    if (notes.size() < kMaxFallbackNotes) {
      notes.push_back("occupancy " + std::to_string(occupancy) + " not profiled; used the nearest level");
    }
    return {best, false};
  }
  const auto info = model.signatures.find(signature_id);
  ITERTIME_CHECK(info != model.signatures.end(), "sequence refers to an unknown signature");
  const double t = regression_us(model, regression_key(info->second.name, info->second.input_dtypes), info->second.flops,
                                 info->second.bytes, occupancy);
  return {std::max(0.0, t), true};
}

// A built operator's input dtypes as /ops/signatures stores them (the regression groups' key), whether
// the builder joins them (text) or lists them (common/dtype_list.hpp).
std::string stored_dtypes_of(const std::string& joined) { return store::stored_input_dtypes(joined); }
[[maybe_unused]] std::string stored_dtypes_of(const DTypeList& dtypes) { return store::stored_input_dtypes(to_string(dtypes)); }

void add_calls(ResolvedStage& stage, Phase phase, int64_t count, const OpTime& time) {
  PhaseTotals& totals = stage.phases[phase_index(phase)];
  const auto calls = static_cast<double>(count);
  totals.time_us += time.time_us * calls;
  totals.calls += calls;
  if (time.extrapolated) {
    totals.extrapolated_time_us += time.time_us * calls;
    totals.extrapolated_calls += calls;
  }
}

std::string built_cache_key(const StageQuery& query, PrecisionName built_precision, const StageLayers& layers) {
  const ParallelConfig& c = query.config;
  return query.model->name + "|tp" + std::to_string(c.tp) + "|mbs" + std::to_string(c.micro_batch) + "|seq" +
         std::to_string(c.seq_len) + "|" + to_string(built_precision) + "|layers" + std::to_string(layers.num_layers) +
         (query.stage == 0 ? "|first" : "") + (query.stage == c.pp - 1 ? "|last" : "") + "|" + recipe_text(query.techniques) +
         (query.techniques.distributed_optimizer ? "|dp" + std::to_string(c.reduction_ranks()) : "") +
         (c.cp > 1 ? "|cp" + std::to_string(c.cp) : "") + "@" + std::to_string(query.occupancy);
}

// A built stage timed by the target's operator roofline (the invariants); `failure` says why not.
ResolvedStage time_on_target(const TargetDevice& target, const BuiltStage& built, const StageQuery& query, std::string& failure) {
  ResolvedStage stage;
  stage.built = true;
  stage.described_on = target.hardware.name;
  stage.comms = built.comms;
  stage.operators = built.ops.size();
  const RankRates rates = rank_rates(target.hardware, query.occupancy, 1);
  const PrecisionPolicy& policy = precision_policy(query.precision);
  const bool tf32 = !query.blind && policy.tf32_math;
  const bool fp8 = !query.blind && policy.fp8_matmul;
  const auto add = [&](Phase phase, int64_t count, OperatorClass op_class, ComputeDType math, double flops, double bytes,
                       const std::string& name) {
    const std::optional<double> t = roofline_time_us(target.operators, rates, op_class, math, flops, bytes);
    if (!t) {
      failure = target.hardware.name + " has no " + to_string(op_class) + " time for " + to_string(math) + " math (" + name +
                "): its description lacks that peak, or no efficiency was fitted for the class";
      return;
    }
    add_calls(stage, phase, count, OpTime{*t, false});
  };
  for (const BuiltOp& op : built.ops) {
    const OperatorClass op_class = classify_operator(op.name, op.phase);
    ComputeDType math = math_dtype_of(op.input_dtypes, op_class, tf32);
    const double flops = op_class == OperatorClass::kAttention ? attention_flops(op.name, op.signature) : op.flops;
    double bytes = op.bytes;
    if (fp8 && op_class == OperatorClass::kMatrixProduct && math == ComputeDType::kBf16) {
      // Transformer Engine: the product in fp8 behind its activation's scaling cast (operator_roofline.hpp).
      const Fp8Casts casts = fp8_casts_of(op.signature);
      if (casts.calls > 0) {
        math = ComputeDType::kFp8;
        bytes = std::max(0.0, op.bytes - casts.operand_elements);
        add(op.phase, op.count * casts.calls, OperatorClass::kCopy, ComputeDType::kBf16, 0, casts.bytes, "fp8 cast");
        if (!failure.empty()) return stage;
      }
    }
    add(op.phase, op.count, op_class, math, flops, bytes, op.name);
    if (!failure.empty()) return stage;
  }
  return stage;
}

}  // namespace

std::string to_string(StagePolicy policy) { return policy == StagePolicy::kTracedThenBuilt ? "traced-then-built" : "built-only"; }

StageResolver::StageResolver(const FittedModel& model, StagePolicy policy) : model_(model), policy_(policy) {}

StageResolver::StageResolver(const FittedModel& model, StagePolicy policy, std::set<int64_t> unprofiled_signatures)
    : model_(model), policy_(policy), unprofiled_signatures_(std::move(unprofiled_signatures)) {}

StageResolver::StageResolver(const FittedModel& model, const TargetDevice* target)
    : model_(model), policy_(StagePolicy::kBuiltOnly), target_(target) {}

StageOutcome StageResolver::resolve(const StageQuery& requested) {
  StageQuery query = requested;
  // What the stage runs at its reduction size (dp*cp: the trainer reduces over the DP group with CP).
  const int reduction = requested.config.reduction_ranks();
  query.techniques = at_dp(requested.techniques, reduction);
  const ParallelConfig& c = query.config;
  const std::string key =
      store::stage_key(query.model_name, c.tp, c.pp, query.stage, c.micro_batch, c.seq_len, to_string(query.precision),
                       query.blind ? "blind" : "aware", query.techniques, reduction, c.cp);
  if (policy_ == StagePolicy::kTracedThenBuilt && target_ == nullptr) {
    const auto traced = model_.stages.find(key);
    if (traced != model_.stages.end()) return resolve_traced(key, traced->second, query.occupancy);
    if (query.model == nullptr) {
      return {nullptr,
              "no operator trace for stage " + key + " in " + model_.source_file +
                  "; add the configuration to a job and run `itertime calibrate ops --job JOB --resume` on this cluster"};
    }
  } else if (query.model == nullptr) {
    return {nullptr, "stage " + key + " cannot be built: a built-only prediction needs the model's description"};
  }
  return resolve_built(query);
}

StageOutcome StageResolver::resolve_traced(const std::string& stage_key, const StageOps& ops, int64_t occupancy) {
  const std::string cache_key = stage_key + "@" + std::to_string(occupancy);
  auto cached = traced_.find(cache_key);
  if (cached == traced_.end()) {
    ResolvedStage stage;
    stage.comms = ops.comms;
    for (const SequenceEntry& entry : ops.sequence) {
      add_calls(stage, entry.phase, entry.count, op_time_us(model_, entry.signature_id, occupancy, stage.fallback_notes));
    }
    cached = traced_.emplace(cache_key, std::move(stage)).first;
  }
  return {&cached->second, ""};
}

// Building a stage costs far more than evaluating it: each stage shape is built once per occupancy. A
// bucketed distributed optimizer's stage is built with and without opg at once (they share all but the
// all-gathers: build_stage_ops_gather_pair), and both are kept.
StageOutcome StageResolver::resolve_built(const StageQuery& query) {
  const ParallelConfig& c = query.config;
  const PrecisionName built_precision = query.blind ? PrecisionName::kFp32 : query.precision;
  const std::vector<StageLayers> layer_split = stage_layers(static_cast<int>(query.model->num_layers), c.pp);
  const StageLayers& layers = layer_split[static_cast<std::size_t>(query.stage)];
  const std::string cache_key = built_cache_key(query, built_precision, layers);
  auto cached = built_.find(cache_key);
  if (cached != built_.end()) return {&cached->second, ""};

  const int reduction =
      query.techniques.distributed_optimizer || query.techniques.overlap_gradient_reduction ? c.reduction_ranks() : 1;
  const TrainingTechniques at_reduction = at_dp(query.techniques, reduction);
  const bool gather_pair = at_reduction.distributed_optimizer && at_reduction.overlap_gradient_reduction;
  std::vector<BuiltStage> built;  // the query's stage, or {without opg, with opg}
  try {                           // the builder refuses layouts and recipes it cannot build with a UserError: that is the reason
    StageRecipe recipe{target_ != nullptr ? target_->attention : model_.attention,
                       target_ != nullptr ? target_->dialect : torch_dialect(model_.libtorch_version), query.techniques,
                       reduction};
    recipe.cp = c.cp;
    if (gather_pair) {
      built =
          build_stage_ops_gather_pair(*query.model, c.tp, c.pp, query.stage, c.micro_batch, c.seq_len, built_precision, recipe);
    } else {
      built.push_back(build_stage_ops(*query.model, c.tp, c.pp, query.stage, c.micro_batch, c.seq_len, built_precision, recipe));
    }
  } catch (const UserError& error) {
    return {nullptr, error.what()};
  }
  std::vector<std::string> keys{cache_key};
  std::size_t wanted = 0;
  if (gather_pair) {
    StageQuery other = query;
    other.techniques.overlap_parameter_gather = !query.techniques.overlap_parameter_gather;
    const std::string other_key = built_cache_key(other, built_precision, layers);
    keys = query.techniques.overlap_parameter_gather ? std::vector<std::string>{other_key, cache_key}
                                                     : std::vector<std::string>{cache_key, other_key};
    wanted = query.techniques.overlap_parameter_gather ? 1 : 0;
  }
  for (std::size_t i = 0; i < built.size(); ++i) {
    std::string failure;
    ResolvedStage stage =
        target_ != nullptr ? time_on_target(*target_, built[i], query, failure) : time_on_calibration(built[i], query);
    if (!failure.empty()) {
      if (i == wanted) return {nullptr, failure};
      continue;
    }
    built_.emplace(keys[i], std::move(stage));
  }
  return {&built_.at(cache_key), ""};
}

// A built stage timed by the calibration's profiled signatures, else its operator regression.
ResolvedStage StageResolver::time_on_calibration(const BuiltStage& built, const StageQuery& query) {
  if (signature_ids_.empty()) signature_ids_.insert(model_.signature_ids.begin(), model_.signature_ids.end());
  ResolvedStage stage;
  stage.built = true;
  stage.comms = built.comms;
  stage.operators = built.ops.size();
  constexpr std::size_t kCapacity = sizeof(store::OpSignatureRow::signature);
  for (const BuiltOp& op : built.ops) {
    OpTime time;
    const auto id = op.signature.size() < kCapacity ? signature_ids_.find(op.signature)
                                                    : signature_ids_.find(store::stored_signature(op.signature));
    if (id != signature_ids_.end() && unprofiled_signatures_.count(id->second) == 0) {
      time = op_time_us(model_, id->second, query.occupancy, stage.fallback_notes);
      if (!time.extrapolated) ++stage.profiled;
    } else {
      time.extrapolated = true;
      const double t =
          regression_us(model_, regression_key(op.name, stored_dtypes_of(op.input_dtypes)), op.flops, op.bytes, query.occupancy);
      if (t < 0) ++stage.without_time;
      time.time_us = std::max(0.0, t);
    }
    add_calls(stage, op.phase, op.count, time);
  }
  return stage;
}

}  // namespace itertime::predict
