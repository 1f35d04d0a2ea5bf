// plan_ranking.cpp: choices, the tie band's secondary criteria and the reasons (plan_ranking.hpp).
#include "predict/plan_ranking.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

namespace itertime::predict {
namespace {

std::string percent_text(double fraction) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f%%", 100.0 * fraction);
  return text;
}

std::string gib_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", bytes / static_cast<double>(1ull << 30));
  return text;
}

// What makes candidates one choice: the layout, the micro-batch and the precision.
using ChoiceKey = std::tuple<int, int, int, int, int, int, int>;
ChoiceKey choice_key(const PlanEntry& e) {
  const ParallelConfig& c = e.config;
  return {c.dp, c.tp, c.pp, c.cp, c.vp, c.micro_batch, static_cast<int>(e.precision)};
}

// Whether a representative's secondary criteria put it ahead of another in the tie band (time last).
bool ahead_in_band(const PlanEntry& a, const PlanEntry& b) {
  if (a.tight_memory != b.tight_memory) return !a.tight_memory;
  if (a.technique_count != b.technique_count) return a.technique_count < b.technique_count;
  return a.iteration_us < b.iteration_us;
}

// The first criterion that puts `ahead` before `behind` in the band, said from one of them: "ahead of #2 by
// ..." (from_ahead) or "after #1 by ...".
std::string band_reason(const PlanEntry& ahead, const PlanEntry& behind, bool from_ahead, double device_memory_bytes) {
  const std::string lead = from_ahead ? "ahead of #" + std::to_string(behind.rank) : "after #" + std::to_string(ahead.rank);
  if (ahead.tight_memory != behind.tight_memory) {
    return lead + " by memory headroom (" + (from_ahead ? "#" + std::to_string(behind.rank) + " has " : std::string()) +
           gib_text(behind.headroom_bytes) + " left, under " + percent_text(kTightMemoryFraction) + " of " +
           gib_text(device_memory_bytes) + ")";
  }
  if (ahead.technique_count != behind.technique_count) {
    const int own = from_ahead ? ahead.technique_count : behind.technique_count;
    const int other = from_ahead ? behind.technique_count : ahead.technique_count;
    return lead + (from_ahead ? " by fewer techniques (" : " by more techniques (") + std::to_string(own) + " against " +
           std::to_string(other) + ")";
  }
  return lead + (ahead.iteration_us < behind.iteration_us ? " by time" : " by candidate order (the same time)");
}

}  // namespace

int technique_count(const PlanEntry& e) {
  const TrainingTechniques& t = e.techniques;
  const int recompute = t.recompute != Recompute::kNone ? 1 : 0;
  if (e.framework_recipe) {  // beyond NeMo's defaults (sp, dopt, ovl, opg; the vocabulary-parallel head always on)
    return recompute + (e.framework_recipe->tp_comm_overlap ? 1 : 0) +
           (e.framework_recipe->precision == PrecisionName::kFp8 && e.framework_recipe->fp8_param_gather ? 1 : 0);
  }
  return recompute + (t.sequence_parallel ? 1 : 0) + (t.vocab_parallel ? 1 : 0) + (t.distributed_optimizer ? 1 : 0) +
         (t.overlap_gradient_reduction ? 1 : 0) + (t.overlap_parameter_gather ? 1 : 0);
}

namespace {

// Moves entries[order[k]] to position k for every k (order a permutation), along each cycle once:
// no second copy of the entries (a plan holds 100,000). Leaves order as the identity.
void move_into_order(std::vector<PlanEntry>& entries, std::vector<std::size_t>& order) {
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (order[k] == k) continue;
    PlanEntry held = std::move(entries[k]);
    std::size_t j = k;
    while (order[j] != k) {
      const std::size_t next = order[j];
      entries[j] = std::move(entries[next]);
      order[j] = j;
      j = next;
    }
    entries[j] = std::move(held);
    order[j] = j;
  }
}

// Why each shown choice (a feasible representative, in rank order) ranks where it does.
void write_why(std::vector<PlanEntry>& entries, double tie_fraction, double device_memory_bytes) {
  std::vector<PlanEntry*> shown;
  for (PlanEntry& e : entries) {
    if (e.feasible && e.variant_of < 0) shown.push_back(&e);
  }
  if (shown.empty()) return;
  double fastest_us = shown.front()->iteration_us;
  for (const PlanEntry* e : shown) fastest_us = std::min(fastest_us, e->iteration_us);
  const double band_limit_us = fastest_us * (1.0 + tie_fraction);
  const std::string band_text = "the tie band (+" + percent_text(tie_fraction) + ")";
  for (std::size_t k = 0; k < shown.size(); ++k) {
    PlanEntry& e = *shown[k];
    const std::string time = e.iteration_us <= fastest_us
                                 ? std::string("fastest")
                                 : "+" + percent_text(e.iteration_us / fastest_us - 1.0) + " over the fastest";
    if (shown.size() == 1) {
      e.why = "the only feasible choice";
    } else if (!e.tie) {  // ranked by time: alone in the band, or outside it
      e.why = time + (e.iteration_us <= band_limit_us ? "; the next lies outside " : ", outside ") + band_text;
    } else if (k == 0) {
      e.why = time + "; tie, " + band_reason(e, *shown[1], true, device_memory_bytes);
    } else {
      e.why = time + "; tie, " + band_reason(*shown[k - 1], e, false, device_memory_bytes);
    }
  }
}

}  // namespace

void rank_plan_entries(std::vector<PlanEntry>& entries, double tie_fraction, double device_memory_bytes) {
  std::vector<std::size_t> feasible, infeasible;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    PlanEntry& e = entries[i];
    e.rank = 0, e.tie = false, e.variant_of = -1, e.variants = 0, e.why.clear();
    e.technique_count = technique_count(e);
    e.tight_memory = e.feasible && device_memory_bytes > 0 && e.headroom_bytes >= 0 &&
                     e.headroom_bytes < kTightMemoryFraction * device_memory_bytes;
    (e.feasible ? feasible : infeasible).push_back(i);
  }
  std::stable_sort(feasible.begin(), feasible.end(),
                   [&](std::size_t a, std::size_t b) { return entries[a].iteration_us < entries[b].iteration_us; });
  // Choices: the fastest candidate of each stands for it; the rest are its variants, fastest first.
  std::map<ChoiceKey, std::size_t> choice_of;  // key -> position in `representatives`
  std::vector<std::size_t> representatives;
  std::vector<std::vector<std::size_t>> variants;
  for (std::size_t i : feasible) {
    const auto [it, added] = choice_of.emplace(choice_key(entries[i]), representatives.size());
    if (added) {
      representatives.push_back(i);
      variants.emplace_back();
    } else {
      variants[it->second].push_back(i);
    }
  }
  // The tie band, ordered by the secondary criteria; the rest stays in time order.
  std::vector<std::size_t> choices(representatives.size());  // positions in `representatives`, ranked
  std::iota(choices.begin(), choices.end(), 0);
  std::size_t band = 0;
  if (!representatives.empty()) {
    const double limit = entries[representatives.front()].iteration_us * (1.0 + tie_fraction);
    while (band < representatives.size() && entries[representatives[band]].iteration_us <= limit) ++band;
  }
  std::stable_sort(choices.begin(), choices.begin() + static_cast<std::ptrdiff_t>(band), [&](std::size_t a, std::size_t b) {
    return ahead_in_band(entries[representatives[a]], entries[representatives[b]]);
  });
  // Where each entry goes (positions), with its rank, tie and representative, then moved there in place
  // (a plan holds 100,000 entries: no second copy of them).
  std::vector<std::size_t> order;
  order.reserve(entries.size());
  struct Place {
    int rank = 0, variant_of = -1, variants = 0;
    bool tie = false;
  };
  std::vector<Place> places;
  places.reserve(entries.size());
  for (std::size_t k = 0; k < choices.size(); ++k) {
    const std::size_t choice = choices[k];
    const int rank = static_cast<int>(k) + 1;
    const bool tie = k < band && band >= 2;
    const int representative = static_cast<int>(order.size());
    order.push_back(representatives[choice]);
    places.push_back({rank, -1, static_cast<int>(variants[choice].size()), tie});
    for (std::size_t i : variants[choice]) {
      order.push_back(i);
      places.push_back({rank, representative, 0, tie});
    }
  }
  for (std::size_t i : infeasible) {
    order.push_back(i);
    places.emplace_back();
  }
  move_into_order(entries, order);
  for (std::size_t k = 0; k < entries.size(); ++k) {
    PlanEntry& e = entries[k];
    e.rank = places[k].rank, e.tie = places[k].tie, e.variant_of = places[k].variant_of, e.variants = places[k].variants;
  }
  write_why(entries, tie_fraction, device_memory_bytes);
}

}  // namespace itertime::predict
