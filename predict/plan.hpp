// plan.hpp: the fastest legal, memory-feasible configurations of a model on N GPUs.
// Invariants:
//  - Candidates: for every cp given that divides gpus, every (dp, tp, pp) with dp*cp*tp*pp == gpus that is
//    legal for the model (illegal ones are not
//    listed), every micro-batch size given (dividing the global batch per DP rank), every vp given (vp > 1
//    only where pp > 1 and the layout stays legal: m a multiple of pp, a layer per chunk), every precision given
//    the calibrated backend can run, and every training recipe given; a recipe with sequence parallelism or
//    the vocabulary-parallel head only where tp > 1 (at tp 1 it is plain training, listed once).
//  - Each candidate's peak memory comes from the memory model with its recipe. One over the device memory
//    is infeasible and not predicted (iteration_us 0): a plan over thousands of candidates costs the memory
//    model for most and a prediction (predictor.hpp, with the recipe) only for those that fit.
//  - A recipe the trainer would refuse for the layout (sp with tp not dividing the sequence, vp with tp not
//    dividing the vocabulary) and a candidate the predictor cannot predict (a technique it does not model,
//    no trace and no way to build one) are infeasible with the reason.
//  - With options.target, the model's traces, profiles and backend are not used (resolver/target_device.hpp).
//  - A feasible entry carries its tokens per second per rank, and its MFU when the options name a
//    hardware description (predict/throughput.hpp): against the description's dense bf16 peak (the
//    mixed-precision one, the same for every precision: mfu_bf16_peak) and against its precision's own
//    math (mfu). A feasible entry carries answer_check.hpp's findings, flagged (not refused): faster than
//    the device's peak; with a calibration also far extrapolation and operators priced at zero. A precision
//    the calibration never ran is not planned (skipped with the reason, as `predict` refuses it).
//  - Entries come back as plan_ranking.hpp ranks them: distinct choices (layout, micro-batch, precision),
//    each its fastest recipe followed by its other recipes (variants); those within options.tie_fraction
//    of the best ordered by stated secondary criteria (memory headroom, fewer techniques, time), each
//    with why it ranks where it does; infeasible entries last, in candidate order, rank 0.
//  - Progress (options.on_progress, when set): plan_search() and plan_framework_search() call it once
//    after each layout of plan_layouts(), in order (layouts_done 1..layouts_total), with the candidates
//    listed so far and the fastest feasible one so far; the call changes nothing of the result.
//  - plan_search() also counts the funnel (PlanCounts), says why when the space holds no candidate
//    (empty_reason, one line), and when no candidate fits the memory, what would make the closest fit
//    (plan_guidance.hpp, the memory model only).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "common/hardware_spec.hpp"
#include "predict/framework/framework_types.hpp"
#include "predict/answer_check.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/plan_guidance.hpp"
#include "predict/resolver/target_device.hpp"

namespace itertime::predict {

struct PlanEntry;

// Where a plan's search stands (the invariant above). `best` points into the plan's entries and is valid
// only during the call; null while no candidate so far is feasible.
struct PlanProgress {
  int64_t layouts_done = 0;
  int64_t layouts_total = 0;  // plan_layouts(), legal or not
  int64_t candidates = 0;     // listed so far
  const PlanEntry* best = nullptr;
};

struct PlanOptions {
  LlamaSpec model;
  int gpus = 1;
  int global_batch = 1;
  int seq_len = 1;
  std::vector<int> micro_batches = {1, 2, 4, 8};
  std::vector<int> virtual_stages = {1};    // vp values; > 1 (interleaved 1F1B) only where pp > 1
  std::vector<int> context_parallel = {1};  // cp values; each that divides gpus, with (dp, tp, pp) factorizing gpus / cp
  std::vector<PrecisionName> precisions = {PrecisionName::kAmpBf16};
  std::vector<TrainingTechniques> recipes = {TrainingTechniques{}};  // plain training only by default
  double device_memory_bytes = 0;                                    // 0: no memory check
  std::optional<HardwareSpec> hardware;                              // for MFU (predict::choose_hardware); none: no MFU
  // A described device (resolver/target_device.hpp; not owned): every candidate built and timed on it, its
  // attention kernel in the memory model, the precisions its backend (CUDA for a GPU) can run.
  const TargetDevice* target = nullptr;
  // The model's uncertainty as a fraction of the iteration time: feasible candidates whose prediction is
  // within best x (1 + tie_fraction) rank 1 with the best (ties). 0: only equal times tie. tie_source says
  // where the figure comes from (reports print it).
  double tie_fraction = 0;
  std::string tie_source;
  // On a calibration: world ranks per node, filled in rank order (PredictRequest::ranks_per_node); 0: one node.
  int64_t ranks_per_node = 0;
  // Called after each layout (the invariant above); none: no report. A front end decides what to show.
  std::function<void(const PlanProgress&)> on_progress;
};

struct PlanEntry {
  ParallelConfig config;
  PrecisionName precision = PrecisionName::kFp32;
  TrainingTechniques techniques;
  double iteration_us = 0;
  double peak_memory_bytes = 0;
  double extrapolated_fraction = 0;
  double tokens_per_s_per_rank = 0;     // feasible entries
  std::optional<double> mfu;            // feasible entries: against the precision's own peak (fp8: the fp8 peak)
  std::optional<double> mfu_bf16_peak;  // feasible entries: against the dense bf16 peak, whatever the precision
  // answer_check.hpp's findings for a feasible entry (faster than the peak; with a calibration also far
  // extrapolation and operators priced at zero): flagged, not refused, as a plan ranks many candidates.
  std::vector<Finding> findings;
  bool implausible = false;  // any finding
  bool feasible = false;
  bool over_memory = false;  // its peak memory exceeds the device memory (not predicted)
  bool fits_memory = false;  // its peak memory was computed and is within the device memory
  // What is left of the device memory (after the peak, and for a framework plan the runtime reserve and
  // the margin) where it fits; -1 when not computed (no device memory, or not within it).
  double headroom_bytes = -1;
  std::string reason;  // why infeasible
  // plan_ranking.hpp: the rank of its choice (1-based; 0 when infeasible), in the tie band with at least
  // one other choice, the index of its choice's representative (-1: it is one, or infeasible), the other
  // recipes of its choice (on a representative), its techniques, tight memory, and why it ranks there.
  int rank = 0;
  bool tie = false;
  int variant_of = -1;
  int variants = 0;
  int technique_count = 0;
  bool tight_memory = false;
  std::string why;
  // Framework-only switches of the recipe (--framework megatron-te), e.g. "fp8-current+tp-overlap"; "" otherwise.
  std::string framework_switches;
  std::optional<framework::FrameworkRecipe> framework_recipe;  // --framework megatron-te: the whole recipe
};

// The funnel of a plan: layouts considered and legal, candidates (legal layouts x the precisions the
// device runs x the recipes distinct at the layout, x framework switches), those that fit the memory
// (and the trainer accepts), those predicted.
struct PlanCounts {
  int64_t layouts = 0;        // plan_layouts(): (dp, tp, pp, cp, vp, micro-batch) combinations
  int64_t legal_layouts = 0;  // of them legal for the model (and the framework)
  int64_t candidates = 0;     // == entries.size()
  int64_t fitting = 0;        // candidates within the device memory that the trainer accepts
  int64_t predicted = 0;      // fitting candidates the predictor predicted (feasible)
};

struct PlanResult {
  std::vector<PlanEntry> entries;  // as plan() returns them, ranked
  PlanCounts counts;
  std::string empty_reason;  // with no candidate: why, one line (the CLI refuses with it, exit 2)
  // Precisions given that the device cannot run, each with why (listed nowhere else when others run).
  std::vector<std::pair<PrecisionName, std::string>> skipped_precisions;
  std::optional<MemoryGuidance> guidance;  // when candidates exist and none fits the device memory
  // Recipe tokens that change nothing at some layouts and were folded there (each candidate listed once),
  // each a sentence saying which and why (reports print them once).
  std::vector<std::string> folded;
};

// plan_framework_search's fold of the vocabulary-parallel head (megatron-te).
inline constexpr const char* kFoldedVocabParallel =
    "vp (the vocabulary-parallel head) is always on at tp > 1 in Megatron-LM (no switch): recipes with and without it "
    "are one candidate there, shown with vp";

std::vector<PlanEntry> plan(const FittedModel& model, const PlanOptions& options);  // plan_search(...).entries
PlanResult plan_search(const FittedModel& model, const PlanOptions& options);

// The layouts a plan considers, in candidate order: for each cp given that divides gpus, each (dp, tp, pp)
// with dp*cp*tp*pp == gpus (common/job.hpp factorizations), each micro-batch given, each vp given (> 1 only
// where pp > 1); legal or not: plan() and plan_framework() (framework_plan.hpp) each apply their own rules.
// Throws UserError where gpus, the global batch or the sequence length is not positive.
std::vector<ParallelConfig> plan_layouts(const PlanOptions& options);

// Tracks the fastest feasible entry of a plan's growing entry list and reports progress to
// options.on_progress after each layout (the invariant above); does nothing without a callback.
class PlanProgressReporter {
 public:
  PlanProgressReporter(const PlanOptions& options, int64_t layouts_total);
  // The layout just considered is done; entries holds every candidate listed so far.
  void layout_done(const std::vector<PlanEntry>& entries);

 private:
  const PlanOptions& options_;
  PlanProgress progress_;
  std::size_t scanned_ = 0;  // entries already looked at for the best
  std::size_t best_index_ = 0;
  bool has_best_ = false;
};

// What plan_search and plan_framework_search do once the entries are listed: rank them (plan_ranking.hpp), count
// candidates, fitting and predicted ones, and when none fits, the guidance (memory_of: the planner's memory
// model of a variant; fp8_available: whether the device plans fp8).
void finish_plan(PlanResult& result, const PlanOptions& options, const MemoryOf& memory_of, bool fp8_available);

// A feasible entry's tokens per second per rank, its MFU against its precision's peak and against the
// dense bf16 peak, and the faster-than-peak finding (throughput.hpp). `hardware` may be null (no MFU).
void set_rates(PlanEntry& entry, const LlamaSpec& model, const HardwareSpec* hardware);

// Adds answer_check's findings to a feasible entry (each code once) and sets `implausible`.
void flag_entry(PlanEntry& entry, const std::vector<Finding>& findings);

// Why fp8 cannot be planned on a device without an fp8 peak: "<name> has no fp8 peak (<the description's
// reason>): fp8 needs an fp8 tensor core (Hopper or later)".
std::string fp8_absent_reason(const HardwareSpec& hardware);

// One line on why a plan holds no candidate: no layout (no cp dividing the GPUs), none legal (the nearest
// layout and the rules it breaks), no precision the device runs (each one's reason), or no recipe that
// applies at the legal layouts. `violations` gives a layout's broken rules (the planner's own).
std::string empty_plan_reason(const PlanOptions& options, const std::vector<ParallelConfig>& layouts,
                              const std::function<std::vector<std::string>(const ParallelConfig&)>& violations,
                              const std::vector<std::pair<PrecisionName, std::string>>& precision_refusals);

// Every recipe the predictor models (predictor.hpp): sequence parallelism, the vocabulary-parallel head and
// the distributed optimizer on or off, recompute none, selective or full, overlapped reduction (default
// buckets) on or off, and with both the distributed optimizer and overlapped reduction, overlapped
// parameter gather on or off (60, plain first). plan() skips a recipe that equals another at the layout
// (sp or vp at tp 1, ovl, and with it opg, at dp*cp 1).
std::vector<TrainingTechniques> modelled_recipes();

// A plan's search values as reports and reasons write them: "1,2,4" (ints, names, or values with a
// to_string).
template <typename T>
std::string comma_list(const std::vector<T>& values) {
  std::string out;
  for (const T& v : values) {
    if (!out.empty()) out += ",";
    if constexpr (std::is_same_v<T, int>) {
      out += std::to_string(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      out += v;
    } else {
      out += to_string(v);
    }
  }
  return out;
}

}  // namespace itertime::predict
