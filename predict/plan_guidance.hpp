// plan_guidance.hpp: when no candidate of a plan fits the device memory, what would make the closest fit.
// Invariants:
//  - Pure: nothing is predicted; each variant's peak memory comes from the caller's function (the plan's
//    own memory model: predict/memory for itertime's trainer, framework/megatron_memory for megatron-te),
//    which returns nullopt for a variant it cannot train (an illegal layout, a refused recipe).
//  - The closest: up to max_candidates candidates with the smallest peak memory, distinct in (layout,
//    micro-batch, precision, recipe) (framework switches collapse to the first, the smallest).
//  - Remedies, each tried alone on each closest candidate, in this order: full recompute, selective
//    recompute, twice the pipeline stages (pp x2 with dp / 2, dp even), the distributed optimizer, fp8
//    (only where fp8_available), sequence parallelism. One that changes nothing is not tried (already on;
//    selective where full is on; dopt at dp*cp 1; sp at tp 1; fp8 already). When none fits alone, those
//    that lowered the memory alone (selective recompute not beside full) are tried together once (`combined`).
//  - The hint names the options that would bring the fitting variants into the search: --recipes with
//    their recipe texts (and --all-recipes), --precisions with fp8; when nothing fits, more GPUs, a shorter
//    sequence or more memory. (A deeper pipeline alone cannot fit where the plan searched every layout with
//    the same recipe: its layout was a candidate too; it shows in the trials and in the combined variant.)
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "predict/framework/framework_types.hpp"

namespace itertime::predict {

// One candidate as the memory model sees it.
struct MemoryCandidate {
  ParallelConfig config;
  PrecisionName precision = PrecisionName::kAmpBf16;
  TrainingTechniques techniques;
  std::string framework_switches;                              // as shown (megatron-te), "" otherwise
  std::optional<framework::FrameworkRecipe> framework_recipe;  // megatron-te: the whole recipe
  double peak_memory_bytes = 0;
};

enum class MemoryRemedy { kFullRecompute, kSelectiveRecompute, kDoublePipeline, kDistributedOptimizer, kFp8, kSequenceParallel };
// "rc-full", "rc-sel", "pp x2", "dopt", "fp8", "sp".
std::string to_string(MemoryRemedy remedy);

struct RemedyTrial {
  std::vector<MemoryRemedy> remedies;  // one, or every one that applies (combined)
  MemoryCandidate variant;             // with the remedies applied and its peak memory
  bool fits = false;
  std::string label() const;  // "rc-full", "pp16,dp8", "fp8", or "rc-full+pp16,dp8+dopt" combined
};

struct MemoryAdvice {
  MemoryCandidate candidate;            // over the limit
  std::vector<RemedyTrial> trials;      // each remedy alone that applies and the memory model accepts
  std::optional<RemedyTrial> combined;  // all together, when none alone fits
  bool fits() const;                    // some trial (or the combined one) fits
};

struct MemoryGuidance {
  double limit_bytes = 0;
  int64_t over_limit = 0;  // candidates over the limit, of which `closest` are the nearest
  std::vector<MemoryAdvice> closest;
  std::string hint;  // "run with --recipes sp+dopt+rc-full (or --all-recipes)", or what else to change
};

using MemoryOf = std::function<std::optional<double>(const MemoryCandidate& variant)>;

MemoryGuidance memory_guidance(const std::vector<MemoryCandidate>& over_limit, double limit_bytes, const MemoryOf& memory_of,
                               bool fp8_available, int max_candidates = 3);

// One line per advice: "dp16-tp8-pp8 mbs1 amp-bf16 plain needs 97.30 GiB of 80.00 GiB: fits with rc-full (61.20 GiB)
// or with pp16,dp8 (52.00 GiB); not with dopt (90.10 GiB)" (or "no single change fits: ..., all together X GiB").
std::string advice_text(const MemoryAdvice& advice, double limit_bytes);

}  // namespace itertime::predict
