// plan_report.cpp: console and JSON reporters of plan (see the header).
#include "validate/plan_report.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/training_techniques.hpp"

namespace itertime::validate {
namespace {

constexpr double kGiB = static_cast<double>(1ull << 30);

// A plan entry's recipe as shown: the techniques, then the framework-only switches (fp8 scaling, TP overlap).
std::string plan_recipe_label(const predict::PlanEntry& e) {
  return recipe_label(e.techniques) + (e.framework_switches.empty() ? "" : " " + e.framework_switches);
}

}  // namespace

std::string plan_json(const std::vector<predict::PlanEntry>& entries) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : entries) {
    out.push_back({{"dp", e.config.dp},
                   {"tp", e.config.tp},
                   {"pp", e.config.pp},
                   {"cp", e.config.cp},
                   {"vp", e.config.vp},
                   {"micro_batch", e.config.micro_batch},
                   {"precision", to_string(e.precision)},
                   {"recipe", plan_recipe_label(e)},
                   {"iteration_us", e.iteration_us},
                   {"peak_memory_bytes", e.peak_memory_bytes},
                   {"feasible", e.feasible},
                   {"reason", e.reason},
                   {"extrapolated_fraction", e.extrapolated_fraction},
                   {"tokens_per_s_per_rank", e.tokens_per_s_per_rank},
                   {"mfu", e.mfu ? nlohmann::json(*e.mfu) : nlohmann::json(nullptr)}});
  }
  return out.dump(2);
}

void print_plan(const predict::PlanOptions& options, const std::vector<predict::PlanEntry>& entries, int top) {
  std::printf("itertime plan: %s on %d GPUs, gbs %d, seq %d: %zu candidates\n", options.model.name.c_str(), options.gpus,
              options.global_batch, options.seq_len, entries.size());
  bool extended = false;  // any candidate with cp or vp > 1: the tuples show all five degrees
  for (const auto& e : entries) extended = extended || e.config.extended();
  if (options.hardware) {
    std::printf("  MFU against %s's dense peak per precision; tokens/s per rank\n", options.hardware->name.c_str());
  }
  // The tuple and recipe columns are as wide as their longest shown value, so the columns stay aligned.
  const char* tuple_header = extended ? "(dp,tp,pp[,cp,vp])" : "(dp,tp,pp)";
  int tuple_width = static_cast<int>(std::strlen(tuple_header)), recipe_width = 14;
  for (std::size_t i = 0; i < entries.size() && static_cast<int>(i) < top; ++i) {
    tuple_width = std::max(tuple_width, static_cast<int>(entries[i].config.tuple_string().size()));
    recipe_width = std::max(recipe_width, static_cast<int>(plan_recipe_label(entries[i]).size()));
  }
  std::printf("  %-4s %-*s %5s %-9s %-*s %16s %14s %10s %14s %7s  %s\n", "rank", tuple_width, tuple_header, "mbs", "precision",
              recipe_width, "recipe", "iteration_us", "memory_GiB", "extrap(%)", "tokens/s/rank", "MFU(%)", "note");
  int shown = 0;
  for (const auto& e : entries) {
    if (shown >= top) break;
    ++shown;
    char iteration[32] = "-";  // not predicted (over the device memory, or refused)
    if (e.iteration_us > 0) std::snprintf(iteration, sizeof(iteration), "%.0f", e.iteration_us);
    char rate[32] = "-";
    if (e.feasible) std::snprintf(rate, sizeof(rate), "%.1f", e.tokens_per_s_per_rank);
    char mfu[32] = "-";
    if (e.mfu) std::snprintf(mfu, sizeof(mfu), "%.2f", 100.0 * *e.mfu);
    std::printf("  %-4d %-*s %5d %-9s %-*s %16s %14.2f %10.1f %14s %7s  %s\n", shown, tuple_width,
                e.config.tuple_string().c_str(), e.config.micro_batch, to_string(e.precision).c_str(), recipe_width,
                plan_recipe_label(e).c_str(), iteration, e.peak_memory_bytes / kGiB, 100.0 * e.extrapolated_fraction, rate, mfu,
                e.feasible ? "" : e.reason.c_str());
  }
}

}  // namespace itertime::validate
