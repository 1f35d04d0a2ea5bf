// plan_report.cpp: console and JSON reporters of plan (see the header).
#include "validate/plan_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/training_techniques.hpp"
#include "predict/plan_ranking.hpp"
#include "validate/duration_text.hpp"

namespace itertime::validate {
namespace {

constexpr double kGiB = static_cast<double>(1ull << 30);

// A plan entry's recipe as shown: the techniques, then the framework-only switches (fp8 scaling, TP overlap).
std::string plan_recipe_label(const predict::PlanEntry& e) {
  return recipe_label(e.techniques) + (e.framework_switches.empty() ? "" : " " + e.framework_switches);
}

std::string rank_label(const predict::PlanEntry& e) {
  if (!e.feasible) return "-";
  return std::to_string(e.rank) + (e.tie ? "=" : "");
}

nlohmann::ordered_json flags_json(const std::vector<predict::Finding>& findings) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const predict::Finding& f : findings) out.push_back({{"code", f.code}, {"message", f.message}, {"hint", f.hint}});
  return out;
}

// The reason an entry was not predicted, then its findings (answer_check.hpp), short: each code, with the
// MFU for faster_than_peak.
std::string note_of(const predict::PlanEntry& e) {
  std::string note = e.feasible ? "" : e.reason;
  for (const predict::Finding& finding : e.findings) {
    std::string text = "FLAG " + finding.code;
    if (finding.code == "faster_than_peak") {
      char mfu[64];
      std::snprintf(mfu, sizeof(mfu), " (MFU %.0f%% of the %s peak)", 100.0 * e.mfu.value_or(0), to_string(e.precision).c_str());
      text += mfu;
    }
    note += std::string(note.empty() ? "" : "; ") + text;
  }
  return note;
}

std::vector<std::string> recipe_labels(const std::vector<TrainingTechniques>& recipes) {
  std::vector<std::string> out;
  for (const TrainingTechniques& t : recipes) out.push_back(recipe_label(t));
  return out;
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ",";
    out += digits[i];
  }
  return out;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / kGiB);
  return text;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f%%", 100.0 * fraction);
  return text;
}

nlohmann::ordered_json guidance_json(const predict::MemoryGuidance& g) {
  nlohmann::ordered_json closest = nlohmann::ordered_json::array();
  auto trial_json = [](const predict::RemedyTrial& t) {
    return nlohmann::ordered_json{{"change", t.label()},
                                  {"layout", t.variant.config.layout_text()},
                                  {"micro_batch", t.variant.config.micro_batch},
                                  {"precision", to_string(t.variant.precision)},
                                  {"recipe", recipe_label(t.variant.techniques)},
                                  {"peak_memory_bytes", t.variant.peak_memory_bytes},
                                  {"fits", t.fits}};
  };
  for (const predict::MemoryAdvice& a : g.closest) {
    nlohmann::ordered_json trials = nlohmann::ordered_json::array();
    for (const predict::RemedyTrial& t : a.trials) trials.push_back(trial_json(t));
    closest.push_back({{"layout", a.candidate.config.layout_text()},
                       {"micro_batch", a.candidate.config.micro_batch},
                       {"precision", to_string(a.candidate.precision)},
                       {"recipe", recipe_label(a.candidate.techniques)},
                       {"framework_switches", a.candidate.framework_switches},
                       {"peak_memory_bytes", a.candidate.peak_memory_bytes},
                       {"text", predict::advice_text(a, g.limit_bytes)},
                       {"trials", trials},
                       {"combined", a.combined ? trial_json(*a.combined) : nlohmann::ordered_json(nullptr)}});
  }
  return {{"device_memory_bytes", g.limit_bytes}, {"over_limit", g.over_limit}, {"closest", closest}, {"hint", g.hint}};
}

// The entries a report shows, at most `top`: the choices (each its representative, plan_ranking.hpp) in
// rank order, then infeasible candidates; variants are shown under their choice, not as rows.
std::vector<const predict::PlanEntry*> shown_entries(const std::vector<predict::PlanEntry>& entries, int top) {
  std::vector<const predict::PlanEntry*> shown;
  for (const predict::PlanEntry& e : entries) {
    if (static_cast<int>(shown.size()) >= top) break;
    if (e.variant_of < 0) shown.push_back(&e);
  }
  return shown;
}

// The other recipes of a representative's choice (they follow it in the ranked entries).
std::vector<const predict::PlanEntry*> variants_of(const std::vector<predict::PlanEntry>& entries, const predict::PlanEntry& e) {
  std::vector<const predict::PlanEntry*> out;
  const auto index = static_cast<std::size_t>(&e - entries.data());
  for (std::size_t i = index + 1; i < entries.size() && entries[i].variant_of == static_cast<int>(index); ++i)
    out.push_back(&entries[i]);
  return out;
}

// "4 other recipes of this choice, +0.6% to +9.9%" ("" without variants).
std::string variants_text(const std::vector<predict::PlanEntry>& entries, const predict::PlanEntry& e) {
  const std::vector<const predict::PlanEntry*> others = variants_of(entries, e);
  if (others.empty()) return "";
  const double low = others.front()->iteration_us / e.iteration_us - 1.0;
  const double high = others.back()->iteration_us / e.iteration_us - 1.0;
  const std::string range = others.size() == 1 ? "+" + percent(low) : "+" + percent(low) + " to +" + percent(high);
  return std::to_string(others.size()) + " other recipe" + (others.size() == 1 ? "" : "s") + " of this choice, " + range;
}

int64_t count_choices(const std::vector<predict::PlanEntry>& entries, bool tied_only) {
  int64_t n = 0;
  for (const predict::PlanEntry& e : entries) n += e.feasible && e.variant_of < 0 && (!tied_only || e.tie) ? 1 : 0;
  return n;
}

// One candidate as JSON (a shown choice, or one of its variants): everything the table shows and more.
nlohmann::ordered_json candidate_json(const predict::PlanEntry& e, const PlanQuestion& question) {
  nlohmann::ordered_json out = {
      {"rank", e.feasible ? nlohmann::ordered_json(e.rank) : nlohmann::ordered_json(nullptr)},
      {"tie", e.tie},
      {"layout", e.config.layout_text()},
      {"dp", e.config.dp},
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
      {"mfu", e.mfu ? nlohmann::ordered_json(*e.mfu) : nlohmann::ordered_json(nullptr)},
      {"mfu_bf16_peak", e.mfu_bf16_peak ? nlohmann::ordered_json(*e.mfu_bf16_peak) : nlohmann::ordered_json(nullptr)},
      {"implausible", e.implausible},
      {"flags", flags_json(e.findings)},
      {"headroom_bytes", e.headroom_bytes >= 0 ? nlohmann::ordered_json(e.headroom_bytes) : nlohmann::ordered_json(nullptr)},
      {"tight_memory", e.tight_memory},
      {"technique_count", e.technique_count},
      {"why", e.why}};
  if (question.launch_line)
    out["megatron_args"] = e.feasible ? nlohmann::ordered_json(question.launch_line(e)) : nlohmann::ordered_json(nullptr);
  return out;
}

const char* const kTieRule =
    "one row per choice (layout, micro-batch, precision), its fastest recipe; choices within best x (1 + fraction) "
    "tie and are ordered by: memory headroom (at least 10% of the device left before less), fewer techniques, time";

}  // namespace

std::string plan_json(const predict::PlanOptions& options, const PlanQuestion& question, const predict::PlanResult& result,
                      int top) {
  const predict::PlanCounts& c = result.counts;
  nlohmann::ordered_json out;
  out["question"] = {
      {"model", options.model.name},
      {"source", question.source},
      {"gpus", options.gpus},
      {"nodes", question.nodes > 0 ? nlohmann::ordered_json(question.nodes) : nlohmann::ordered_json(nullptr)},
      {"hardware", options.hardware ? nlohmann::ordered_json(options.hardware->name) : nlohmann::ordered_json(nullptr)},
      {"framework", question.framework},
      {"global_batch", options.global_batch},
      {"seq_len", options.seq_len},
      {"device_memory_bytes", options.device_memory_bytes},
      {"space",
       {{"micro_batches", options.micro_batches},
        {"context_parallel", options.context_parallel},
        {"virtual_stages", options.virtual_stages},
        {"precisions", nlohmann::ordered_json::array()},
        {"recipes", recipe_labels(options.recipes)},
        {"fp8_recipes", question.fp8_recipes}}}};
  for (PrecisionName p : options.precisions) out["question"]["space"]["precisions"].push_back(to_string(p));
  nlohmann::ordered_json skipped = nlohmann::ordered_json::array();
  for (const auto& [precision, why] : result.skipped_precisions)
    skipped.push_back({{"precision", to_string(precision)}, {"reason", why}});
  out["summary"] = {{"layouts_considered", c.layouts}, {"layouts_legal", c.legal_layouts}, {"candidates", c.candidates},
                    {"fit_memory", c.fitting},         {"predicted", c.predicted},         {"skipped_precisions", skipped},
                    {"folded", result.folded}};
  const std::optional<double> bf16 = options.hardware ? options.hardware->peak(ComputeDType::kBf16) : std::nullopt;
  out["mfu"] = {{"peak", "dense bf16 (the mixed-precision peak), for every precision: mfu_bf16_peak"},
                {"peak_flops_per_s_per_device", bf16 ? nlohmann::ordered_json(*bf16) : nlohmann::ordered_json(nullptr)},
                {"own", "against the dense peak of the precision's own math (fp8: the fp8 peak): mfu"}};
  out["ties"] = {{"fraction", options.tie_fraction},
                 {"source", options.tie_source},
                 {"rule", kTieRule},
                 {"tied_choices", count_choices(result.entries, true)}};
  out["candidates_total"] = result.entries.size();
  out["choices_total"] = count_choices(result.entries, false);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const predict::PlanEntry* shown : shown_entries(result.entries, top)) {
    const predict::PlanEntry& e = *shown;
    nlohmann::ordered_json row = candidate_json(e, question);
    row["variants"] = nlohmann::ordered_json::array();
    for (const predict::PlanEntry* v : variants_of(result.entries, e)) row["variants"].push_back(candidate_json(*v, question));
    list.push_back(std::move(row));
  }
  out["candidates_shown"] = list.size();
  out["candidates"] = list;
  out["guidance"] = result.guidance ? guidance_json(*result.guidance) : nlohmann::ordered_json(nullptr);
  return out.dump(2);
}

std::string plan_progress_line(const predict::PlanProgress& progress, double elapsed_s) {
  std::string line = "plan: " + with_commas(progress.candidates);
  if (progress.layouts_done >= progress.layouts_total) {
    line += " candidates (all " + with_commas(progress.layouts_total) + " layouts)";
  } else {
    const double expected = progress.layouts_done > 0
                                ? static_cast<double>(progress.candidates) * static_cast<double>(progress.layouts_total) /
                                      static_cast<double>(progress.layouts_done)
                                : 0.0;
    line += " of about " + with_commas(static_cast<int64_t>(std::llround(expected))) + " candidates (layouts " +
            with_commas(progress.layouts_done) + " of " + with_commas(progress.layouts_total) + ")";
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), ", %.1f s", elapsed_s);
  line += seconds;
  if (progress.best == nullptr) return line + "; none feasible so far";
  const predict::PlanEntry& e = *progress.best;
  return line + "; fastest so far: " + e.config.layout_text() + " mbs" + std::to_string(e.config.micro_batch) + " " +
         to_string(e.precision) + " " + plan_recipe_label(e) + " " + duration_text(e.iteration_us);
}

void print_plan(const predict::PlanOptions& options, const PlanQuestion& question, const predict::PlanResult& result, int top) {
  const std::vector<predict::PlanEntry>& entries = result.entries;
  const predict::PlanCounts& c = result.counts;
  const bool cpu = options.hardware && options.hardware->kind == DeviceKind::kCpu;
  std::string where = std::to_string(options.gpus) + (cpu ? " ranks" : " GPUs");
  if (question.nodes > 0 && options.hardware)
    where +=
        " (" + std::to_string(question.nodes) + (question.nodes == 1 ? " node of " : " nodes of ") + options.hardware->name + ")";
  else if (options.hardware)
    where += " of " + options.hardware->name;
  std::printf("itertime plan: %s on %s, gbs %d, seq %d, framework %s\n", options.model.name.c_str(), where.c_str(),
              options.global_batch, options.seq_len, question.framework.c_str());
  const std::vector<std::string> recipes = recipe_labels(options.recipes);
  const bool fp8_searched = !question.fp8_recipes.empty() && std::find(options.precisions.begin(), options.precisions.end(),
                                                                       PrecisionName::kFp8) != options.precisions.end();
  const std::string recipe_text =
      recipes.size() <= 4 ? predict::comma_list(recipes) : std::to_string(recipes.size()) + " recipes";
  std::printf("  searched: mbs %s; cp %s; vp %s; precisions %s; recipes %s%s\n",
              predict::comma_list(options.micro_batches).c_str(), predict::comma_list(options.context_parallel).c_str(),
              predict::comma_list(options.virtual_stages).c_str(), predict::comma_list(options.precisions).c_str(),
              recipe_text.c_str(), fp8_searched ? ("; fp8 recipes " + predict::comma_list(question.fp8_recipes)).c_str() : "");
  const std::string memory =
      options.device_memory_bytes > 0 ? "fit in " + gib(options.device_memory_bytes) : "fit (no memory limit)";
  std::printf("  summary: layouts %s considered, %s legal; candidates %s, %s %s, %s predicted\n", with_commas(c.layouts).c_str(),
              with_commas(c.legal_layouts).c_str(), with_commas(c.candidates).c_str(), with_commas(c.fitting).c_str(),
              memory.c_str(), with_commas(c.predicted).c_str());
  for (const auto& [precision, why] : result.skipped_precisions)
    std::printf("  skipped precision %s: %s\n", to_string(precision).c_str(), why.c_str());
  for (const std::string& fold : result.folded) std::printf("  folded: %s\n", fold.c_str());
  if (options.hardware && c.predicted > 0) {
    const std::optional<double> bf16 = options.hardware->peak(ComputeDType::kBf16);
    if (bf16) {
      std::printf(
          "  MFU_bf16: against %s's dense bf16 peak (%.1f TFLOP/s per device, the mixed-precision one) for every "
          "precision; MFU_own: against the peak of the precision's own math (fp8: fp8's); tokens/s per rank\n",
          options.hardware->name.c_str(), *bf16 / 1e12);
    } else {
      std::printf(
          "  MFU_bf16: - (%s has no bf16 peak); MFU_own: against the peak of the precision's own math; tokens/s per rank\n",
          options.hardware->name.c_str());
    }
  }
  if (c.predicted > 0) {
    std::printf("  choices: %s (layout, micro-batch, precision), each shown with its fastest recipe and why it ranks there\n",
                with_commas(count_choices(entries, false)).c_str());
    std::printf(
        "  ties: choices within +%s of the best, the model's stated uncertainty (%s): %s, marked n=, ordered by memory "
        "headroom (at least %s of the device left first), then fewer techniques, then time\n",
        percent(options.tie_fraction).c_str(), options.tie_source.empty() ? "none stated" : options.tie_source.c_str(),
        with_commas(count_choices(entries, true)).c_str(), percent(predict::kTightMemoryFraction).c_str());
  }
  if (result.guidance && c.predicted == 0) {
    const predict::MemoryGuidance& g = *result.guidance;
    std::printf("  none of the %s candidates fits in %s; the %zu closest, and what would make each fit (memory model only):\n",
                with_commas(c.candidates).c_str(), gib(g.limit_bytes).c_str(), g.closest.size());
    for (const predict::MemoryAdvice& a : g.closest) std::printf("    %s\n", predict::advice_text(a, g.limit_bytes).c_str());
    if (!g.hint.empty()) std::printf("  hint: %s\n", g.hint.c_str());
    return;
  }
  // The layout and recipe columns are as wide as their longest shown value, so the columns stay aligned.
  const std::vector<const predict::PlanEntry*> shown = shown_entries(entries, top);
  int layout_width = 6, recipe_width = 14;
  for (const predict::PlanEntry* e : shown) {
    layout_width = std::max(layout_width, static_cast<int>(e->config.layout_text().size()));
    recipe_width = std::max(recipe_width, static_cast<int>(plan_recipe_label(*e).size()));
  }
  std::printf("  %-4s %-*s %5s %-9s %-*s %10s %14s %10s %14s %12s %11s  %s\n", "rank", layout_width, "layout", "mbs", "precision",
              recipe_width, "recipe", "iteration", "memory_GiB", "extrap(%)", "tokens/s/rank", "MFU_bf16(%)", "MFU_own(%)",
              "note");
  for (const predict::PlanEntry* shown_entry : shown) {
    const predict::PlanEntry& e = *shown_entry;
    const std::string iteration = e.iteration_us > 0 ? duration_text(e.iteration_us) : "-";  // "-": not predicted
    char rate[32] = "-";
    if (e.feasible) std::snprintf(rate, sizeof(rate), "%.1f", e.tokens_per_s_per_rank);
    char mfu[32] = "-", mfu_bf16[32] = "-";
    if (e.mfu) std::snprintf(mfu, sizeof(mfu), "%.2f", 100.0 * *e.mfu);
    if (e.mfu_bf16_peak) std::snprintf(mfu_bf16, sizeof(mfu_bf16), "%.2f", 100.0 * *e.mfu_bf16_peak);
    char row[512];
    std::snprintf(row, sizeof(row), "  %-4s %-*s %5d %-9s %-*s %s %14.2f %10.1f %14s %12s %11s  ", rank_label(e).c_str(),
                  layout_width, e.config.layout_text().c_str(), e.config.micro_batch, to_string(e.precision).c_str(),
                  recipe_width, plan_recipe_label(e).c_str(), right_aligned(iteration, 10).c_str(), e.peak_memory_bytes / kGiB,
                  100.0 * e.extrapolated_fraction, rate, mfu_bf16, mfu);
    std::string line = row + note_of(e);
    line.erase(line.find_last_not_of(' ') + 1);  // no trailing blanks when there is no note
    std::printf("%s\n", line.c_str());
    if (e.feasible) {
      const std::string others = variants_text(entries, e);
      std::printf("       why: %s%s\n", e.why.c_str(), others.empty() ? "" : ("; " + others).c_str());
    }
    if (question.launch_line && e.feasible) std::printf("       launch: %s\n", question.launch_line(e).c_str());
  }
}

}  // namespace itertime::validate
