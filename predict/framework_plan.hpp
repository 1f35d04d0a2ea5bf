// framework_plan.hpp: `predict` and `plan` with a framework model (issue 32, --framework megatron-te):
// the target from a hardware description and its published kernel figures, a framework prediction as the
// reporters' Prediction, and the plan over the framework's layouts and recipes.
// Invariants:
//  - A framework target is a GPU description with kernel figures (data/kernels); a CPU node or a GPU
//    without figures is a UserError naming what exists. No calibration is used.
//  - Plan candidates: every cp given dividing gpus, (dp, tp, pp) factorizing gpus / cp, each micro-batch
//    and vp given (vp > 1 only where pp > 1), precision given the GPU has the math for (fp8: an fp8 peak),
//    each recipe given (sequence parallelism on only where tp > 1, as Megatron needs; overlap only where
//    dp*cp > 1), each fp8 scaling recipe with fp8, TP comm overlap on and off where sequence parallelism
//    is on, fp8 parameters (--fp8-param-gather) on and off with fp8; the layer split the one rule set
//    (framework/megatron_layout_rules.hpp) resolves, fixed in the recipe so that --emit states it. Each
//    candidate's memory (framework/megatron_memory.hpp) plus the runtime reserve plus
//    FrameworkPlanSpace::memory_margin_bytes is checked against the device before it is predicted; the
//    layouts and recipes Megatron-LM refuses come back infeasible with the reason.
//  - Entries: ranked as plan() ranks them (plan_ranking.hpp: choices, ties by stated criteria, why),
//    counted, explained when empty, with memory guidance when none fits.
//  - Candidates that differ only in what follows the pipeline schedule share its simulation
//    (FrameworkPassCache's ScheduleCache); each candidate's figures are its own.
#pragma once

#include <string>
#include <vector>

#include "common/hardware_spec.hpp"
#include "predict/framework/framework_predictor.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/plan.hpp"
#include "predict/predictor.hpp"

namespace itertime::predict {

// The target for --hardware NAME: the description (from `dir`) and its kernel figures.
framework::FrameworkTarget framework_target(const std::string& hardware_name, const std::string& dir = hardware_dir());

// The framework a question that names none gets (issue 44): megatron-te on a GPU description
// (`hardware_name`, a data/hardware file of kind gpu) when no calibration of itertime's own trainer is
// given (`calibration_given`: a calibration or model file, --efficiency, --blind); itertime otherwise
// (no --hardware, a CPU node, or a calibration). A name with no description is left to the caller's own
// error (itertime: it names the descriptions).
framework::Framework default_framework(const std::string& hardware_name, bool calibration_given,
                                       const std::string& dir = hardware_dir());

// The reporters' record of a framework prediction (no calibration factor, no extrapolation).
Prediction to_prediction(const framework::FrameworkPrediction& prediction);

// The framework-only switches of a recipe as text: "fp8-delayed", "fp8-current+fp8-params", "tp-overlap"
// joined by '+' ("" when none).
std::string framework_switches(const framework::FrameworkRecipe& recipe);

// The recipes Megatron-LM users run (NeMo's defaults): sequence parallelism, the distributed optimizer,
// overlapped gradient reduction and parameter gather, with recompute none, selective and full.
std::vector<TrainingTechniques> megatron_recipes();

// megatron-te's default search axes (plan without --cp / --vp): what Megatron-LM runs and NeMo's LLaMA
// recipes use. Context parallelism: the powers of two up to kMaxDefaultContextParallel that leave each CP
// rank at least kMinTokensPerContextRank tokens of the sequence (cp 1 and 2 at 8,192 tokens, as NeMo's
// 8B/70B/405B recipes at that length; more for longer sequences), a stated policy. Virtual stages 1 to
// kMaxDefaultVirtualStages (NeMo's 70B uses 5, its 405B 8); the layout rules keep only the legal ones
// (illegal layouts are not listed).
inline constexpr int kMaxDefaultContextParallel = 32;
inline constexpr int kMinTokensPerContextRank = 4096;
inline constexpr int kMaxDefaultVirtualStages = 8;
std::vector<int> megatron_default_context_parallel(int seq_len);
std::vector<int> megatron_default_virtual_stages();

// The headroom plan keeps beside the runtime reserve (framework/megatron_memory.hpp RuntimeReserve) for
// the caching allocator's fragmentation, which no public figure bounds: a stated policy, 1 GiB.
inline constexpr double kDefaultPlanMemoryMarginBytes = 1024.0 * 1024.0 * 1024.0;

struct FrameworkPlanSpace {
  std::vector<framework::Fp8Recipe> fp8_recipes = {framework::Fp8Recipe::kDelayed};
  std::vector<bool> tp_comm_overlap = {false, true};
  std::vector<bool> fp8_param_gather = {false, true};  // with fp8 only
  // A candidate fits when its allocated peak + the runtime reserve + this margin <= the device memory.
  double memory_margin_bytes = kDefaultPlanMemoryMarginBytes;
};

// The runtime reserve of a layout on the target (CUDA context, cuBLAS workspace, NCCL buffers).
framework::RuntimeReserve runtime_reserve(const framework::FrameworkTarget& target, const ParallelConfig& config);

std::vector<PlanEntry> plan_framework(const PlanOptions& options, const framework::FrameworkTarget& target,
                                      const FrameworkPlanSpace& space = {});  // plan_framework_search(...).entries
// The plan with its counts, empty-space reason and memory guidance (plan.hpp's PlanResult). The guidance's
// variants keep each candidate's framework switches; an fp8 variant of a bf16 candidate gathers fp8
// parameters where the space tries them.
PlanResult plan_framework_search(const PlanOptions& options, const framework::FrameworkTarget& target,
                                 const FrameworkPlanSpace& space = {});

}  // namespace itertime::predict
