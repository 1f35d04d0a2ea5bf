// plan_guidance.cpp: what would make the closest over-memory candidates fit (plan_guidance.hpp).
#include "predict/plan_guidance.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

namespace itertime::predict {

namespace {

constexpr double kGiB = static_cast<double>(1ull << 30);

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / kGiB);
  return text;
}

std::string recipe_option(const TrainingTechniques& techniques) {
  const std::string text = recipe_text(techniques);
  return text.empty() ? "plain" : text;
}

// The candidate with `remedy` applied, or nullopt when it changes nothing there.
std::optional<MemoryCandidate> apply(const MemoryCandidate& c, MemoryRemedy remedy, bool fp8_available) {
  MemoryCandidate v = c;
  v.peak_memory_bytes = 0;
  switch (remedy) {
    case MemoryRemedy::kFullRecompute:
      if (c.techniques.recompute == Recompute::kFull) return std::nullopt;
      v.techniques.recompute = Recompute::kFull;
      break;
    case MemoryRemedy::kSelectiveRecompute:
      if (c.techniques.recompute != Recompute::kNone) return std::nullopt;
      v.techniques.recompute = Recompute::kSelective;
      break;
    case MemoryRemedy::kDoublePipeline:
      if (c.config.dp % 2 != 0) return std::nullopt;
      v.config.dp /= 2;
      v.config.pp *= 2;
      break;
    case MemoryRemedy::kDistributedOptimizer:
      if (c.techniques.distributed_optimizer || c.config.reduction_ranks() == 1) return std::nullopt;
      v.techniques.distributed_optimizer = true;
      break;
    case MemoryRemedy::kFp8:
      if (!fp8_available || c.precision == PrecisionName::kFp8) return std::nullopt;
      v.precision = PrecisionName::kFp8;
      break;
    case MemoryRemedy::kSequenceParallel:
      if (c.techniques.sequence_parallel || c.config.tp == 1) return std::nullopt;
      v.techniques.sequence_parallel = true;
      break;
  }
  return v;
}

constexpr MemoryRemedy kRemedies[] = {MemoryRemedy::kFullRecompute,
                                      MemoryRemedy::kSelectiveRecompute,
                                      MemoryRemedy::kDoublePipeline,
                                      MemoryRemedy::kDistributedOptimizer,
                                      MemoryRemedy::kFp8,
                                      MemoryRemedy::kSequenceParallel};

std::string key_of(const MemoryCandidate& c) {
  return c.config.layout_text() + " mbs" + std::to_string(c.config.micro_batch) + " " + to_string(c.precision) + " " +
         recipe_text(c.techniques);
}

}  // namespace

std::string to_string(MemoryRemedy remedy) {
  switch (remedy) {
    case MemoryRemedy::kFullRecompute: return "rc-full";
    case MemoryRemedy::kSelectiveRecompute: return "rc-sel";
    case MemoryRemedy::kDoublePipeline: return "pp x2";
    case MemoryRemedy::kDistributedOptimizer: return "dopt";
    case MemoryRemedy::kFp8: return "fp8";
    case MemoryRemedy::kSequenceParallel: return "sp";
  }
  return "?";
}

std::string RemedyTrial::label() const {
  std::string out;
  for (MemoryRemedy remedy : remedies) {
    if (!out.empty()) out += "+";
    out += remedy == MemoryRemedy::kDoublePipeline
               ? "pp" + std::to_string(variant.config.pp) + ",dp" + std::to_string(variant.config.dp)
               : to_string(remedy);
  }
  return out;
}

bool MemoryAdvice::fits() const {
  if (combined && combined->fits) return true;
  return std::any_of(trials.begin(), trials.end(), [](const RemedyTrial& t) { return t.fits; });
}

MemoryGuidance memory_guidance(const std::vector<MemoryCandidate>& over_limit, double limit_bytes, const MemoryOf& memory_of,
                               bool fp8_available, int max_candidates) {
  MemoryGuidance guidance;
  guidance.limit_bytes = limit_bytes;
  guidance.over_limit = static_cast<int64_t>(over_limit.size());
  std::vector<const MemoryCandidate*> order;
  for (const MemoryCandidate& c : over_limit) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(), [](const MemoryCandidate* a, const MemoryCandidate* b) {
    return a->peak_memory_bytes < b->peak_memory_bytes;
  });
  std::set<std::string> seen;
  for (const MemoryCandidate* c : order) {
    if (static_cast<int>(guidance.closest.size()) >= max_candidates) break;
    if (!seen.insert(key_of(*c)).second) continue;
    MemoryAdvice advice;
    advice.candidate = *c;
    std::vector<MemoryRemedy> lowering;  // the remedies that lower the memory alone, for the combined variant
    for (MemoryRemedy remedy : kRemedies) {
      std::optional<MemoryCandidate> variant = apply(*c, remedy, fp8_available);
      if (!variant) continue;
      const std::optional<double> peak = memory_of(*variant);
      if (!peak) continue;  // not trainable that way
      variant->peak_memory_bytes = *peak;
      if (*peak < c->peak_memory_bytes) lowering.push_back(remedy);
      advice.trials.push_back(RemedyTrial{{remedy}, *variant, *peak <= limit_bytes});
    }
    if (!advice.fits() && lowering.size() > 1) {
      MemoryCandidate all = *c;
      std::vector<MemoryRemedy> used;
      const bool full = std::find(lowering.begin(), lowering.end(), MemoryRemedy::kFullRecompute) != lowering.end();
      for (MemoryRemedy remedy : lowering) {
        if (remedy == MemoryRemedy::kSelectiveRecompute && full) continue;  // full recompute holds less
        std::optional<MemoryCandidate> next = apply(all, remedy, fp8_available);
        if (!next || !memory_of(*next)) continue;
        all = *next;
        used.push_back(remedy);
      }
      if (used.size() > 1) {
        const std::optional<double> peak = memory_of(all);
        all.peak_memory_bytes = peak ? *peak : 0;
        if (peak) advice.combined = RemedyTrial{used, all, *peak <= limit_bytes};
      }
    }
    guidance.closest.push_back(advice);
  }
  // The hint: the recipes and precisions of the variants that fit.
  std::vector<std::string> recipes, precisions;
  auto add = [](std::vector<std::string>& list, const std::string& text) {
    if (std::find(list.begin(), list.end(), text) == list.end()) list.push_back(text);
  };
  for (const MemoryAdvice& advice : guidance.closest) {
    std::vector<const RemedyTrial*> fitting;
    for (const RemedyTrial& t : advice.trials)
      if (t.fits) fitting.push_back(&t);
    if (advice.combined && advice.combined->fits) fitting.push_back(&*advice.combined);
    for (const RemedyTrial* t : fitting) {
      if (t->variant.techniques != advice.candidate.techniques) add(recipes, recipe_option(t->variant.techniques));
      if (t->variant.precision != advice.candidate.precision) {
        add(precisions, to_string(advice.candidate.precision));
        add(precisions, to_string(t->variant.precision));
      }
    }
  }
  std::string hint;
  if (!recipes.empty()) {
    hint = "--recipes ";
    for (std::size_t i = 0; i < recipes.size(); ++i) hint += (i ? "," : "") + recipes[i];
    hint += " (or --all-recipes)";
  }
  if (!precisions.empty()) {
    hint += std::string(hint.empty() ? "" : " with ") + "--precisions ";
    for (std::size_t i = 0; i < precisions.size(); ++i) hint += (i ? "," : "") + precisions[i];
  }
  if (!hint.empty()) {
    guidance.hint = "run with " + hint;
  } else if (std::none_of(guidance.closest.begin(), guidance.closest.end(), [](const MemoryAdvice& a) { return a.fits(); })) {
    guidance.hint = "no change tried makes them fit: more GPUs (--nodes, --gpus), a shorter --seq, or a device with more memory";
  }
  return guidance;
}

std::string advice_text(const MemoryAdvice& advice, double limit_bytes) {
  const MemoryCandidate& c = advice.candidate;
  std::string out = c.config.layout_text() + " mbs" + std::to_string(c.config.micro_batch) + " " + to_string(c.precision) + " " +
                    recipe_option(c.techniques) + (c.framework_switches.empty() ? "" : " " + c.framework_switches) + " needs " +
                    gib(c.peak_memory_bytes) + " of " + gib(limit_bytes);
  std::string fit, not_fit;
  for (const RemedyTrial& t : advice.trials) {
    std::string& list = t.fits ? fit : not_fit;
    list += std::string(list.empty() ? ""
                        : t.fits     ? " or with "
                                     : ", ") +
            t.label() + " (" + gib(t.variant.peak_memory_bytes) + ")";
  }
  if (!fit.empty()) {
    out += ": fits with " + fit;
    if (!not_fit.empty()) out += "; not with " + not_fit;
  } else if (advice.trials.empty()) {
    out += ": no change tried applies";
  } else {
    out += ": no single change fits (" + not_fit + ")";
    if (advice.combined) {
      out += std::string(advice.combined->fits ? "; fits" : "; still over") +
             " with those that lower it, together: " + advice.combined->label() + " (" +
             gib(advice.combined->variant.peak_memory_bytes) + ")";
    }
  }
  return out;
}

}  // namespace itertime::predict
