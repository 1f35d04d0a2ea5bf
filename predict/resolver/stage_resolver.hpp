// stage_resolver.hpp: one pipeline stage's operators and communications, with each operator's time at
// an occupancy, found the way a StagePolicy says: from the stage's trace, or built from the model
// (predict/builder/op_builder.hpp). The resolver owns what it has resolved (a cache per stage shape and
// occupancy); a FittedModel stays immutable.
// Invariants:
//  - kTracedThenBuilt (what `predict` and `plan` do): the stage's trace when the calibration has one,
//    else the stage built from the query's LlamaSpec; with no spec, a missing trace is a failure whose
//    reason says which `calibrate ops` job would add it. kBuiltOnly: every stage built from the spec,
//    no trace used (how validation scores untraced configurations); with no spec, a failure.
//  - A traced operator takes its profiled time at the occupancy, else at the nearest profiled occupancy
//    (noted), else the regression of its (name, input dtypes) at the nearest occupancy with one
//    (extrapolated). A built operator takes the profiled time of its signature when that was profiled
//    (and is not among the resolver's unprofiled signatures), else the regression (extrapolated; none
//    at all counts 0 and is counted in without_time).
//  - Totals per phase: time_us = sum of count * time per call, calls = sum of counts; a phase's time
//    at a per-call overhead o is time_us + o * calls.
//  - With a TargetDevice (a described device nobody calibrated, target_device.hpp), every stage is built
//    with the target's attention kernel and dialect, and every operator takes its roofline time on the
//    target (one rank's share of it at the occupancy); no profile, trace or regression of the
//    calibration is used. An operator whose math the target has no peak for fails the stage.
//  - A failure is a value (StageOutcome::reason), never an exception. Resolving the same query twice
//    gives the same stage. Not thread-safe: one resolver per thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/phase.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/resolver/target_device.hpp"

namespace itertime::predict {

enum class StagePolicy {
  kTracedThenBuilt,  // traced stages first, built stages for the rest (needs the spec for those)
  kBuiltOnly,        // every stage built from the model's spec; no trace used
};
std::string to_string(StagePolicy policy);  // "traced-then-built" | "built-only"

struct PhaseTotals {
  double time_us = 0;               // sum of count * profiled (or regressed) time per call
  double calls = 0;                 // sum of counts
  double extrapolated_time_us = 0;  // the part of time_us from the regression
  double extrapolated_calls = 0;
  double at_overhead(double overhead_us) const { return time_us + overhead_us * calls; }
  double extrapolated_at_overhead(double overhead_us) const { return extrapolated_time_us + overhead_us * extrapolated_calls; }
};

struct ResolvedStage {
  std::array<PhaseTotals, kPhaseCount> phases;  // indexed by phase_index()
  std::vector<CommOp> comms;
  std::vector<std::string> fallback_notes;                    // occupancies not profiled (at most 8)
  bool built = false;                                         // built from the model rather than traced
  std::string described_on;                                   // set when timed by a described device's roofline: its name
  std::size_t operators = 0, profiled = 0, without_time = 0;  // built stages: how operator times were found

  const PhaseTotals& phase(Phase p) const { return phases[phase_index(p)]; }
};

// Which stage, at which occupancy (the busy ranks its operator times are taken at).
struct StageQuery {
  std::string model_name;
  const LlamaSpec* model = nullptr;  // needed to build a stage; not owned
  ParallelConfig config;
  int stage = 0;
  PrecisionName precision = PrecisionName::kFp32;
  bool blind = false;  // the precision-blind variant (fp32 traces; built stages in fp32)
  int64_t occupancy = 1;
  TrainingTechniques techniques;  // the recipe trained with; the stage is resolved with at_dp(techniques, dp * cp)
};

// The resolved stage (owned by the resolver, valid while it lives), or why there is none.
struct StageOutcome {
  const ResolvedStage* stage = nullptr;
  std::string reason;  // set when stage is null
};

class StageResolver {
 public:
  explicit StageResolver(const FittedModel& model, StagePolicy policy = StagePolicy::kTracedThenBuilt);
  // Built stages take the regression for these signature ids, as if they had never been profiled (how
  // validation predicts a layout as if it had never been traced or profiled). Traced stages ignore it.
  StageResolver(const FittedModel& model, StagePolicy policy, std::set<int64_t> unprofiled_signatures);
  // Every stage built and timed on `target` (not owned; outlives the resolver), as the invariants say.
  StageResolver(const FittedModel& model, const TargetDevice* target);
  StageResolver(const StageResolver&) = delete;
  StageResolver& operator=(const StageResolver&) = delete;

  const FittedModel& model() const { return model_; }
  StagePolicy policy() const { return policy_; }
  const TargetDevice* target() const { return target_; }
  StageOutcome resolve(const StageQuery& query);
  std::size_t cached_stages() const { return traced_.size() + built_.size(); }

 private:
  StageOutcome resolve_traced(const std::string& stage_key, const StageOps& ops, int64_t occupancy);
  StageOutcome resolve_built(const StageQuery& query);
  ResolvedStage time_on_calibration(const BuiltStage& built, const StageQuery& query);

  const FittedModel& model_;
  StagePolicy policy_;
  const TargetDevice* target_ = nullptr;
  std::set<int64_t> unprofiled_signatures_;
  std::map<std::string, ResolvedStage> traced_;  // "stage key@occupancy"
  // Built stages keyed by what they depend on (model, tp, micro-batch, sequence, built precision,
  // layers, first/last stage, occupancy): stages of one pipeline with equal layer counts share one.
  std::map<std::string, ResolvedStage> built_;
  std::unordered_map<std::string, int64_t> signature_ids_;  // hashed copy of model_.signature_ids, made on first build
};

}  // namespace itertime::predict
