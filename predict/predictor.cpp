#include "predict/predictor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "common/errors.hpp"
#include "common/ops_store.hpp"
#include "common/stats.hpp"
#include "predict/op_builder.hpp"
#include "predict/schedule.hpp"

namespace itertime::predict {
namespace {

// The regression of (name|input dtypes) at `occupancy`, else at the nearest occupancy that has one;
// negative when there is none.
double regression_us(const FittedModel& model, const std::string& key, double flops, double bytes, int64_t occupancy) {
  const OpRegression* best = nullptr;
  int64_t best_distance = 0;
  for (auto it = model.regressions.lower_bound({key, std::numeric_limits<int64_t>::min()});
       it != model.regressions.end() && it->first.first == key; ++it) {
    const auto& [regression_key, regression] = *it;
    const int64_t distance = std::llabs(regression_key.second - occupancy);
    if (best == nullptr || distance < best_distance) {
      best = &regression;
      best_distance = distance;
    }
  }
  if (best == nullptr) return -1.0;
  return best->time_us(flops, bytes);
}

// The profiled time of a signature at an occupancy: exact, else the nearest profiled occupancy, else
// the regression of its (name, dtypes). `extrapolated` is set for the regression.
double op_time_us(const FittedModel& model, int64_t signature_id, int64_t occupancy, bool& extrapolated,
                  std::vector<std::string>& notes) {
  extrapolated = false;
  const auto exact = model.op_time_us.find({signature_id, occupancy});
  if (exact != model.op_time_us.end()) return exact->second;
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
    if (notes.size() < 8) notes.push_back("occupancy " + std::to_string(occupancy) + " not profiled; used the nearest level");
    return best;
  }
  const auto info = model.signatures.find(signature_id);
  ITERTIME_CHECK(info != model.signatures.end(), "sequence refers to an unknown signature");
  extrapolated = true;
  const double t = regression_us(model, info->second.name + "|" + info->second.input_dtypes, info->second.flops,
                                 info->second.bytes, occupancy);
  return std::max(0.0, t);
}

DType dtype_of(const std::string& name) { return parse_dtype(name); }

// One stage's operators with their times, whether traced or built, summed per phase: what the
// per-stage time, the call count (for the per-call overhead, which varies with the calibration) and the
// extrapolated share need. A phase's time at overhead o is time_us + o * calls.
enum Phase : std::size_t { kForwardPhase, kBackwardPhase, kDpBufferPhase, kOptimizerPhase, kPhases };

Phase phase_of(const std::string& phase) {
  if (phase == "forward") return kForwardPhase;
  if (phase == "backward") return kBackwardPhase;
  if (phase == "dp_buffer") return kDpBufferPhase;
  if (phase == "optimizer") return kOptimizerPhase;
  throw InternalError("unknown operator phase '" + phase + "'", __FILE__, __LINE__);
}

struct PhaseTotals {
  double time_us = 0;               // sum of count * profiled (or regressed) time per call
  double calls = 0;                 // sum of counts
  double extrapolated_time_us = 0;  // the part of time_us from the regression
  double extrapolated_calls = 0;
  double at_overhead(double overhead_us) const { return time_us + overhead_us * calls; }
  double extrapolated_at_overhead(double overhead_us) const { return extrapolated_time_us + overhead_us * extrapolated_calls; }
};

struct ResolvedStage {
  std::array<PhaseTotals, kPhases> phases;
  std::vector<CommOp> comms;
  void add(const std::string& phase, int64_t count, double time_us, bool extrapolated) {
    PhaseTotals& totals = phases[phase_of(phase)];
    const auto calls = static_cast<double>(count);
    totals.time_us += time_us * calls;
    totals.calls += calls;
    if (extrapolated) {
      totals.extrapolated_time_us += time_us * calls;
      totals.extrapolated_calls += calls;
    }
  }
};

ResolvedStage resolve_traced(const FittedModel& model, const StageOps& ops, int64_t occupancy, std::vector<std::string>& notes) {
  ResolvedStage out;
  out.comms = ops.comms;
  for (const SequenceEntry& entry : ops.sequence) {
    bool extrapolated = false;
    const double time_us = op_time_us(model, entry.signature_id, occupancy, extrapolated, notes);
    out.add(entry.phase, entry.count, time_us, extrapolated);
  }
  return out;
}

// A built stage resolved at one occupancy, with how its operator times were found.
struct ResolvedBuilt {
  ResolvedStage stage;
  std::size_t operators = 0, profiled = 0, without_time = 0;
};

using SignatureIndex = std::unordered_map<std::string, int64_t>;  // stored signature text -> id

ResolvedBuilt resolve_built(const FittedModel& model, const SignatureIndex& signature_ids, const BuiltStage& built,
                            int64_t occupancy, std::vector<std::string>& notes) {
  ResolvedBuilt resolved;
  ResolvedStage& out = resolved.stage;
  out.comms = built.comms;
  std::size_t& profiled = resolved.profiled;
  std::size_t& without_time = resolved.without_time;
  resolved.operators = built.ops.size();
  for (const BuiltOp& op : built.ops) {
    struct {
      double time_us = 0;
      bool extrapolated = false;
    } e;
    constexpr std::size_t kCapacity = sizeof(store::OpSignatureRow::signature);
    const auto id = op.signature.size() < kCapacity ? signature_ids.find(op.signature)
                                                    : signature_ids.find(store::stored_signature(op.signature));
    if (id != signature_ids.end()) {
      e.time_us = op_time_us(model, id->second, occupancy, e.extrapolated, notes);
      if (!e.extrapolated) ++profiled;
    } else {
      e.extrapolated = true;
      const std::string regression_key = op.name + "|" + store::stored_input_dtypes(op.input_dtypes);
      const double t = regression_us(model, regression_key, op.flops, op.bytes, occupancy);
      if (t < 0) ++without_time;
      e.time_us = std::max(0.0, t);
    }
    out.add(op.phase, op.count, e.time_us, e.extrapolated);
  }
  return resolved;
}

std::string built_note(const std::string& key, const ResolvedBuilt& resolved) {
  return "stage " + key + " built from the model (not traced): " + std::to_string(resolved.profiled) + " of " +
         std::to_string(resolved.operators) + " operators profiled, the rest from the regression" +
         (resolved.without_time ? " (" + std::to_string(resolved.without_time) + " without a regression, counted as 0)" : "");
}

}  // namespace

// Keyed by what a built stage depends on: model, tp, micro-batch, sequence, built precision, its number
// of layers, whether it is the first and/or the last stage, and the occupancy. Stages of one pipeline
// with equal layer counts share an entry, so a 64-stage pipeline builds at most four.
struct BuiltStageCache {
  struct Entry {
    ResolvedBuilt resolved;
    std::vector<std::string> notes;  // occupancy fallbacks met while resolving
  };
  std::map<std::string, Entry> by_key;
  SignatureIndex signature_ids;  // a hashed copy of FittedModel::signature_ids (copied: copies of a model share this)
};

std::string tuple_of(const store::GroundTruthRow& row) {
  return "(" + std::to_string(row.dp) + "," + std::to_string(row.tp) + "," + std::to_string(row.pp) + ")";
}

Prediction predict(const FittedModel& model, const PredictRequest& request) {
  const ParallelConfig& c = request.config;
  if (c.dp < 1 || c.tp < 1 || c.pp < 1 || c.micro_batch < 1 || c.global_batch % (c.dp * c.micro_batch) != 0) {
    throw UserError("configuration " + c.to_string() + " is not legal: dp, tp, pp, micro_batch must be positive and global_batch divisible by dp*micro_batch");
  }
  const PrecisionPolicy& policy = precision_policy(request.precision);
  const std::string variant = request.blind ? "blind" : "aware";
  const int64_t occupancy = c.world_size();
  const int m = c.num_micro_batches();
  // Oversubscribed CPU ranks (more ranks than the node's rank slots): operators take their time as
  // profiled with every slot busy (the profile's median leaves time-sharing out), and the schedule
  // stretches them by processor sharing (predict/schedule.hpp), the tail by ranks / slots.
  // Only configurations that fit on the calibrated node (at most the ranks it ran) are modelled so.
  const double slots = model.rank_slots;
  const bool shared = slots > 0 && static_cast<double>(occupancy) > slots && static_cast<double>(occupancy) <= model.node_ranks;
  const int64_t profile_occupancy = shared ? static_cast<int64_t>(slots) : occupancy;
  const double tail_stretch = shared ? static_cast<double>(occupancy) / slots : 1.0;
  Prediction out;
  const Calibration identity;
  const Calibration& calibration = request.override_calibration != nullptr ? *request.override_calibration
                                   : request.calibrated ? (request.blind ? model.calibration_blind : model.calibration).for_occupancy(occupancy)
                                                        : identity;
  const double overhead_us = calibration.op_overhead_us;
  std::vector<int64_t> stage_calls(static_cast<std::size_t>(c.pp), 0);

  std::vector<StageTimes> stages, stages_raw;  // with and without the per-call overhead
  std::vector<double> p2p_forward(static_cast<std::size_t>(c.pp - 1), 0.0);
  std::vector<double> p2p_backward(static_cast<std::size_t>(c.pp - 1), 0.0);
  double extrapolated_us = 0, compute_total_us = 0;
  std::vector<double> stage_compute(static_cast<std::size_t>(c.pp)), stage_tp(static_cast<std::size_t>(c.pp)),
      stage_tail(static_cast<std::size_t>(c.pp)), stage_dp(static_cast<std::size_t>(c.pp)),
      stage_opt(static_cast<std::size_t>(c.pp)), stage_tail_raw(static_cast<std::size_t>(c.pp));
  std::vector<StageLayers> layer_split;  // filled when a stage must be built
  for (int s = 0; s < c.pp; ++s) {
    const std::string key = store::stage_key(request.model_name, c.tp, c.pp, s, c.micro_batch, c.seq_len,
                                             to_string(request.precision), variant);
    const auto found = model.stages.find(key);
    ResolvedStage traced;
    const ResolvedStage* ops = &traced;
    if (found != model.stages.end()) {
      traced = resolve_traced(model, found->second, profile_occupancy, out.notes);
    } else if (request.model != nullptr) {
      // Building a stage costs far more than evaluating it: resolve each stage shape once per occupancy.
      if (!model.built_cache) {
        model.built_cache = std::make_shared<BuiltStageCache>();
        model.built_cache->signature_ids.insert(model.signature_ids.begin(), model.signature_ids.end());
      }
      if (layer_split.empty()) layer_split = stage_layers(static_cast<int>(request.model->num_layers), c.pp);
      const PrecisionName built_precision = request.blind ? PrecisionName::kFp32 : request.precision;
      const std::string cache_key = request.model->name + "|tp" + std::to_string(c.tp) + "|mbs" + std::to_string(c.micro_batch) +
                                    "|seq" + std::to_string(c.seq_len) + "|" + to_string(built_precision) + "|layers" +
                                    std::to_string(layer_split[static_cast<std::size_t>(s)].num_layers) +
                                    (s == 0 ? "|first" : "") + (s == c.pp - 1 ? "|last" : "") + "@" + std::to_string(profile_occupancy);
      auto cached = model.built_cache->by_key.find(cache_key);
      if (cached == model.built_cache->by_key.end()) {
        BuiltStageCache::Entry entry;
        const StageRecipe recipe{parse_attention(model.attention), torch_dialect(model.libtorch_version)};
        const BuiltStage built = build_stage_ops(*request.model, c.tp, c.pp, s, c.micro_batch, c.seq_len, built_precision, recipe);
        entry.resolved = resolve_built(model, model.built_cache->signature_ids, built, profile_occupancy, entry.notes);
        cached = model.built_cache->by_key.emplace(cache_key, std::move(entry)).first;
      }
      ops = &cached->second.resolved.stage;
      for (const auto& note : cached->second.notes) {
        if (out.notes.size() < 16) out.notes.push_back(note);
      }
      if (out.notes.size() < 16) out.notes.push_back(built_note(key, cached->second.resolved));
    } else {
      throw UserError("no operator trace for stage " + key + " in " + model.source_file +
                      "; add the configuration to a job and run `itertime calibrate ops --job JOB --resume` on this cluster");
    }
    std::array<double, kPhases> phase_us{}, phase_raw_us{};
    for (std::size_t phase = 0; phase < kPhases; ++phase) {
      const PhaseTotals& totals = ops->phases[phase];
      phase_us[phase] = totals.at_overhead(overhead_us);
      phase_raw_us[phase] = totals.at_overhead(0.0);
      const bool per_micro_batch = phase == kForwardPhase || phase == kBackwardPhase;
      if (per_micro_batch || phase == kOptimizerPhase || c.dp > 1) {
        stage_calls[static_cast<std::size_t>(s)] += static_cast<int64_t>(totals.calls) * (per_micro_batch ? m : 1);
      }
      // The share is of compute_total_us (forward, backward, optimizer); dp_buffer work is not in it.
      if (phase != kDpBufferPhase) extrapolated_us += totals.extrapolated_at_overhead(overhead_us) * (per_micro_batch ? m : 1);
    }
    double tp_forward = 0, tp_backward = 0, dp_comm = 0;
    for (const CommOp& comm : ops->comms) {
      const DType dtype = dtype_of(comm.dtype);
      if (comm.kind == "tp_all_reduce") {
        const double t = model.comm.predict_us("all_reduce", dtype, c.tp, "consecutive", comm.bytes).time_us * static_cast<double>(comm.count);
        (comm.phase == "backward" ? tp_backward : tp_forward) += t;
      } else if (comm.kind == "pp_send_forward" || comm.kind == "pp_send_backward") {
        // Neighbouring stages are dp*tp ranks apart: consecutive ranks only when dp*tp == 1.
        const std::string layout = c.dp * c.tp == 1 ? "consecutive" : "strided";
        const double t = c.pp > 1 ? model.comm.predict_us("send", dtype, 2, layout, comm.bytes).time_us : 0.0;
        if (comm.kind == "pp_send_forward" && s < c.pp - 1) p2p_forward[static_cast<std::size_t>(s)] = t;
        if (comm.kind == "pp_send_backward" && s > 0) p2p_backward[static_cast<std::size_t>(s - 1)] = t;
      } else if (comm.kind == "dp_all_reduce" && c.dp > 1) {
        const std::string layout = c.tp == 1 ? "consecutive" : "strided";
        dp_comm += model.comm.predict_us("all_reduce", dtype, c.dp, layout, comm.bytes).time_us;
      }
    }
    const double forward = phase_us[kForwardPhase] + tp_forward;
    const double backward = phase_us[kBackwardPhase] + tp_backward;
    stages.push_back(StageTimes{forward, backward, tp_forward, tp_backward});
    if (shared) {  // only a shared schedule needs a second simulation for the raw time
      stages_raw.push_back(StageTimes{phase_raw_us[kForwardPhase] + tp_forward, phase_raw_us[kBackwardPhase] + tp_backward,
                                      tp_forward, tp_backward});
    }
    out.stage_forward_us.push_back(forward);
    out.stage_backward_us.push_back(backward);
    const auto idx = static_cast<std::size_t>(s);
    stage_compute[idx] = m * (phase_us[kForwardPhase] + phase_us[kBackwardPhase]);
    stage_tp[idx] = m * (tp_forward + tp_backward);
    stage_dp[idx] = (c.dp > 1 ? phase_us[kDpBufferPhase] * tail_stretch : 0.0) + dp_comm;
    stage_opt[idx] = phase_us[kOptimizerPhase] * tail_stretch;
    stage_tail[idx] = stage_dp[idx] + stage_opt[idx];
    stage_tail_raw[idx] = (c.dp > 1 ? phase_raw_us[kDpBufferPhase] * tail_stretch : 0.0) + dp_comm +
                          phase_raw_us[kOptimizerPhase] * tail_stretch;
    compute_total_us += stage_compute[idx] + phase_us[kOptimizerPhase];
  }

  ScheduleInput schedule_input;
  schedule_input.stages = stages;
  schedule_input.p2p_forward_us = p2p_forward;
  schedule_input.p2p_backward_us = p2p_backward;
  schedule_input.num_micro_batches = m;
  schedule_input.blocking_send = true;
  schedule_input.rank_slots = shared ? slots : 0.0;
  schedule_input.ranks_per_stage = static_cast<double>(c.dp * c.tp);
  const ScheduleResult schedule = simulate_1f1b(schedule_input);
  std::size_t busiest = 0;
  for (std::size_t s = 0; s < schedule.busy_us.size(); ++s) {
    if (schedule.busy_us[s] > schedule.busy_us[busiest]) busiest = s;
  }
  const double tail = *std::max_element(stage_tail.begin(), stage_tail.end());
  const double total_with_overhead = schedule.makespan_us + tail;
  out.tp_comm_us = stage_tp[busiest];
  out.compute_us = shared ? std::max(0.0, schedule.busy_us[busiest] - out.tp_comm_us) : stage_compute[busiest];
  out.pp_comm_us = schedule.send_us.empty() ? 0.0 : schedule.send_us[busiest];
  out.bubble_us = std::max(0.0, schedule.makespan_us - out.compute_us - out.tp_comm_us - out.pp_comm_us);
  out.dp_comm_us = stage_dp[busiest];
  out.optimizer_us = stage_opt[busiest];
  out.extrapolated_fraction = compute_total_us > 0 ? extrapolated_us / compute_total_us : 0.0;
  (void)policy;

  out.op_calls = stage_calls[busiest];
  out.op_overhead_us = overhead_us;
  if (shared) {  // the overhead is stretched with the operators: simulate again without it
    schedule_input.stages = stages_raw;
    out.raw_total_us = simulate_1f1b(schedule_input).makespan_us + *std::max_element(stage_tail_raw.begin(), stage_tail_raw.end());
    out.notes.push_back(std::to_string(occupancy) + " ranks share " + std::to_string(static_cast<int64_t>(slots)) +
                        " rank slots (cores / threads per rank): operators timed at occupancy " +
                        std::to_string(profile_occupancy) + ", stretched by processor sharing");
  } else {
    out.raw_total_us = total_with_overhead - overhead_us * static_cast<double>(out.op_calls);
  }
  out.calibration_factor = calibration.factor;
  out.total_us = total_with_overhead * calibration.factor;
  return out;
}

CalibrationSet fit_calibration(const FittedModel& model, const std::vector<store::GroundTruthRow>& rows, bool blind,
                               const std::set<std::string>& exclude_tuples) {
  struct Sample {
    PredictRequest request;
    double measured_us;
    int64_t occupancy;
  };
  std::vector<Sample> samples;
  for (const store::GroundTruthRow& row : rows) {
    if (h5::get_string(row.status) != "ok" || exclude_tuples.count(tuple_of(row))) continue;
    Sample sample;
    sample.request.model_name = h5::get_string(row.model);
    sample.request.config = ParallelConfig{static_cast<int>(row.dp), static_cast<int>(row.tp), static_cast<int>(row.pp),
                                           static_cast<int>(row.micro_batch), static_cast<int>(row.global_batch),
                                           static_cast<int>(row.seq_len)};
    sample.request.precision = parse_precision(h5::get_string(row.precision)).name;
    sample.request.blind = blind;
    sample.measured_us = row.time_us_median;
    sample.occupancy = row.dp * row.tp * row.pp;
    // Only configurations the model can predict contribute (every stage traced, or buildable).
    try {
      PredictRequest probe = sample.request;
      const Calibration identity;
      probe.override_calibration = &identity;
      predict(model, probe);
      samples.push_back(sample);
    } catch (const UserError&) {
    }
  }
  // Per occupancy (and globally, over every row): the per-operator-call overhead by grid search and, for
  // each candidate, the factor = the median ratio measured / predicted; the candidate with the lowest
  // MAPE on those rows wins. Contention changes both terms with the number of busy ranks.
  auto fit_subset = [&](const std::vector<const Sample*>& subset) {
    Calibration best;
    double best_mape = -1;
    for (double overhead = 0.0; overhead <= 100.0; overhead += overhead < 10.0 ? 0.5 : 2.0) {
      Calibration candidate;
      candidate.op_overhead_us = overhead;
      std::vector<double> predicted, ratios, measured;
      for (const Sample* sample : subset) {
        PredictRequest request = sample->request;
        request.override_calibration = &candidate;
        const double p = predict(model, request).total_us;
        predicted.push_back(p);
        ratios.push_back(p > 0 ? sample->measured_us / p : 1.0);
        measured.push_back(sample->measured_us);
      }
      candidate.factor = stats::median(ratios);
      for (double& p : predicted) p *= candidate.factor;
      const double mape = stats::mape_pct(predicted, measured);
      if (best_mape < 0 || mape < best_mape - 1e-9) {
        best_mape = mape;
        best = candidate;
      }
    }
    best.rows = static_cast<int64_t>(subset.size());
    return best;
  };
  CalibrationSet set;
  if (samples.empty()) return set;
  std::map<int64_t, std::vector<const Sample*>> by_occupancy;
  std::vector<const Sample*> all;
  for (const Sample& sample : samples) {
    by_occupancy[sample.occupancy].push_back(&sample);
    all.push_back(&sample);
  }
  for (const auto& [occupancy, subset] : by_occupancy) set.per_occupancy[occupancy] = fit_subset(subset);
  set.global = fit_subset(all);
  return set;
}

}  // namespace itertime::predict
