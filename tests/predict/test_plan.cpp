// test_plan.cpp: plan()'s recipes: modelled_recipes() and where plan() skips a recipe that equals another
// at the layout, with overlapped parameter gather (opg) searched wherever dopt+ovl is; plan_search()'s
// funnel counts, its reason for an empty space, its memory guidance when none fits (the planners' own
// memory models), ties, the bf16-peak MFU, and the JSON report's header and --top.
// Invariants: the plan runs on a described device (data/hardware/h100-sxm.json, the default efficiencies),
// no calibration; the model is data/models/tiny-llama-gqa.json (8 heads, 4 KV heads, FFN 352, 4 layers)
// unless named; counts are derived by hand in comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/model_spec.hpp"
#include "common/training_techniques.hpp"
#include "predict/framework_plan.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/plan.hpp"
#include "predict/plan_ranking.hpp"
#include "predict/resolver/target_device.hpp"
#include "validate/plan_report.hpp"

namespace itertime::predict {
namespace {

// 3 recompute modes x 8 (sp, vp, dopt) x (without, with ovl) = 48, and with dopt+ovl also opg: 3 x 4 = 12 more.
TEST(Plan, ModelledRecipesSearchOpgWhereverDoptAndOvlAre) {
  const std::vector<TrainingTechniques> recipes = modelled_recipes();
  ASSERT_EQ(recipes.size(), 60u);
  EXPECT_TRUE(recipes.front() == TrainingTechniques{});  // plain first
  std::set<std::string> texts;
  int opg = 0, dopt_ovl = 0;
  for (const TrainingTechniques& t : recipes) {
    texts.insert(recipe_text(t));
    EXPECT_EQ(parse_recipe_text(recipe_text(t)), t) << recipe_text(t);  // a recipe the parser accepts
    if (t.overlap_parameter_gather) ++opg;
    if (t.distributed_optimizer && t.overlap_gradient_reduction && !t.overlap_parameter_gather) ++dopt_ovl;
  }
  EXPECT_EQ(texts.size(), 60u);
  EXPECT_EQ(opg, 12);
  EXPECT_EQ(dopt_ovl, 12);
  EXPECT_EQ(texts.count("sp+vp+dopt+rc-full+ovl+opg"), 1u);
}

// tiny on 2 GPUs, every recipe: (2,1,1) 15 recipes (tp 1: dopt, rc, ovl and with dopt+ovl opg: 2*3*2 + 3),
// (1,2,1) 24 (no ovl, so no opg, at dp 1), (1,1,2) 6: 45 entries, opg only at dp 2. There the opg
// prediction is never slower than its dopt+ovl one (the all-gathers' wait is at most their chain).
TEST(Plan, OpgIsPlannedOnlyWhereOvlIs) {
  const HardwareChoice choice = choose_hardware(nullptr, "h100-sxm", "");
  ASSERT_TRUE(choice.target.has_value());
  PlanOptions options;
  options.model = load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json");
  options.gpus = 2;
  options.global_batch = 8;
  options.seq_len = 32;
  options.micro_batches = {1};
  options.precisions = {PrecisionName::kAmpBf16};
  options.recipes = modelled_recipes();
  options.hardware = choice.hardware;
  options.target = &*choice.target;
  const FittedModel no_calibration;
  const std::vector<PlanEntry> entries = plan(no_calibration, options);
  EXPECT_EQ(entries.size(), 45u);
  std::map<std::string, double> at_dp2;  // recipe -> iteration, at (2,1,1)
  int opg = 0;
  for (const PlanEntry& entry : entries) {
    if (!entry.techniques.overlap_parameter_gather) {
      if (entry.config.dp == 2 && entry.feasible) at_dp2[recipe_text(entry.techniques)] = entry.iteration_us;
      continue;
    }
    ++opg;
    EXPECT_EQ(entry.config.dp, 2) << entry.config.to_string();
    EXPECT_TRUE(entry.feasible) << entry.reason;
  }
  EXPECT_EQ(opg, 3);
  for (const PlanEntry& entry : entries) {
    if (!entry.techniques.overlap_parameter_gather || !entry.feasible) continue;
    TrainingTechniques without = entry.techniques;
    without.overlap_parameter_gather = false;
    ASSERT_EQ(at_dp2.count(recipe_text(without)), 1u) << recipe_text(without);
    EXPECT_LE(entry.iteration_us, at_dp2[recipe_text(without)] * (1 + 1e-12)) << recipe_text(entry.techniques);
  }
}

struct DescribedPlan {
  HardwareChoice choice;
  PlanOptions options;
  FittedModel no_calibration;
};

// tiny on 4 GPUs of `hardware`, gbs 8, seq 32, plain amp-bf16, mbs 1,2,4,8, no memory limit.
DescribedPlan described(const std::string& hardware = "h100-sxm") {
  DescribedPlan p;
  p.choice = choose_hardware(nullptr, hardware, "");
  p.options.model = load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json");
  p.options.gpus = 4;
  p.options.global_batch = 8;
  p.options.seq_len = 32;
  p.options.hardware = p.choice.hardware;
  return p;
}

// 4 GPUs: (dp,tp,pp) = (4,1,1), (2,2,1), (2,1,2), (1,4,1), (1,2,2), (1,1,4): 6 layouts x 4 micro-batches = 24.
// Legal: every tp divides 8 heads, 4 KV heads and 352; pp <= 4 layers; gbs 8 divisible by dp*mbs: dp 4 with
// mbs 1, 2; dp 2 (two layouts) with mbs 1, 2, 4; dp 1 (three) with all four: 2 + 6 + 12 = 20. With amp-bf16
// and fp32 (CUDA runs both) and one recipe: 40 candidates, all fit (no limit), all predicted.
TEST(Plan, SearchCountsTheFunnel) {
  DescribedPlan p = described();
  p.options.target = &*p.choice.target;
  p.options.precisions = {PrecisionName::kAmpBf16, PrecisionName::kFp32};
  const PlanResult all = plan_search(p.no_calibration, p.options);
  EXPECT_EQ(all.counts.layouts, 24);
  EXPECT_EQ(all.counts.legal_layouts, 20);
  EXPECT_EQ(all.counts.candidates, 40);
  EXPECT_EQ(all.counts.fitting, 40);
  EXPECT_EQ(all.counts.predicted, 40);
  EXPECT_TRUE(all.empty_reason.empty());
  EXPECT_FALSE(all.guidance.has_value());
  // A limit between the peaks: those at or under it fit and are predicted, the others not.
  std::vector<double> peaks;
  for (const PlanEntry& e : all.entries) peaks.push_back(e.peak_memory_bytes);
  std::sort(peaks.begin(), peaks.end());
  p.options.device_memory_bytes = peaks[peaks.size() / 2];
  int64_t under = 0;
  for (double peak : peaks) under += peak <= p.options.device_memory_bytes ? 1 : 0;
  const PlanResult limited = plan_search(p.no_calibration, p.options);
  EXPECT_EQ(limited.counts.candidates, 40);
  EXPECT_EQ(limited.counts.fitting, under);
  EXPECT_EQ(limited.counts.predicted, under);
  EXPECT_FALSE(limited.guidance.has_value());  // some fit
}

// Every entry's MFU against the bf16 peak is its own MFU scaled by own peak / bf16 peak (fp32: 67 / 989.4
// TFLOP/s on an H100), and equal to it at amp-bf16.
TEST(Plan, MfuAgainstTheBf16PeakBesideTheOwn) {
  DescribedPlan p = described();
  p.options.target = &*p.choice.target;
  p.options.precisions = {PrecisionName::kAmpBf16, PrecisionName::kFp32};
  const PlanResult result = plan_search(p.no_calibration, p.options);
  const double bf16 = *p.choice.hardware->peak(ComputeDType::kBf16), fp32 = *p.choice.hardware->peak(ComputeDType::kFp32);
  for (const PlanEntry& e : result.entries) {
    ASSERT_TRUE(e.mfu && e.mfu_bf16_peak);
    const double own_peak = e.precision == PrecisionName::kFp32 ? fp32 : bf16;
    EXPECT_NEAR(*e.mfu_bf16_peak, *e.mfu * own_peak / bf16, 1e-12);
    EXPECT_EQ(e.implausible, *e.mfu > 1.0);
  }
}

// fp8 on an A100: no candidate, one line saying why, for both planners.
TEST(Plan, EmptySpaceSaysWhy) {
  DescribedPlan p = described("a100-sxm-80gb");
  p.options.target = &*p.choice.target;
  p.options.precisions = {PrecisionName::kFp8};
  const PlanResult own = plan_search(p.no_calibration, p.options);
  EXPECT_TRUE(own.entries.empty());
  EXPECT_NE(own.empty_reason.find("a100-sxm-80gb has no fp8 peak"), std::string::npos) << own.empty_reason;
  EXPECT_NE(own.empty_reason.find("fp8 needs an fp8 tensor core"), std::string::npos) << own.empty_reason;
  EXPECT_EQ(own.empty_reason.find('\n'), std::string::npos);
  const PlanResult framework = plan_framework_search(p.options, framework_target("a100-sxm-80gb"));
  EXPECT_TRUE(framework.entries.empty());
  EXPECT_NE(framework.empty_reason.find("a100-sxm-80gb has no fp8 peak"), std::string::npos) << framework.empty_reason;
  // With amp-bf16 beside it, fp8 is skipped with the same reason and the rest is planned.
  p.options.precisions = {PrecisionName::kAmpBf16, PrecisionName::kFp8};
  const PlanResult some = plan_search(p.no_calibration, p.options);
  EXPECT_FALSE(some.entries.empty());
  ASSERT_EQ(some.skipped_precisions.size(), 1u);
  EXPECT_EQ(some.skipped_precisions[0].first, PrecisionName::kFp8);
  EXPECT_NE(some.skipped_precisions[0].second.find("has no fp8 peak"), std::string::npos);
  // 7 GPUs and gbs 8: dp 7 does not divide the batch, tp 7 the heads, pp 7 exceeds the layers.
  DescribedPlan seven = described();
  seven.options.target = &*seven.choice.target;
  seven.options.gpus = 7;
  const PlanResult none = plan_search(seven.no_calibration, seven.options);
  EXPECT_EQ(none.counts.layouts, 12);  // 3 layouts x 4 micro-batches
  EXPECT_EQ(none.counts.legal_layouts, 0);
  EXPECT_NE(none.empty_reason.find("none of the 12 layouts of 7 GPUs"), std::string::npos) << none.empty_reason;
  seven.options.context_parallel = {2};
  EXPECT_NE(plan_search(seven.no_calibration, seven.options).empty_reason.find("no --cp value given (2) divides the 7 GPUs"),
            std::string::npos);
}

// On one GPU, a limit between the plain peak and the full-recompute peak: nothing plain fits, and the
// guidance says full recompute would (the own memory model; seq 512, mbs 8 so activations dominate).
TEST(Plan, GuidanceWhenNothingFitsNamesFullRecompute) {
  DescribedPlan p = described();
  p.options.target = &*p.choice.target;
  p.options.gpus = 1;
  p.options.seq_len = 512;
  p.options.micro_batches = {8};
  p.options.global_batch = 8;
  TrainingTechniques full;
  full.recompute = Recompute::kFull;
  p.options.recipes = {TrainingTechniques{}, full};
  double plain_min = 1e30, full_min = 1e30;
  for (const PlanEntry& e : plan_search(p.no_calibration, p.options).entries)
    (e.techniques.recompute == Recompute::kFull ? full_min : plain_min) =
        std::min(e.techniques.recompute == Recompute::kFull ? full_min : plain_min, e.peak_memory_bytes);
  ASSERT_LT(full_min, plain_min);
  p.options.recipes = {TrainingTechniques{}};
  p.options.device_memory_bytes = (full_min + plain_min) / 2;
  const PlanResult result = plan_search(p.no_calibration, p.options);
  EXPECT_EQ(result.counts.fitting, 0);
  ASSERT_TRUE(result.guidance.has_value());
  ASSERT_FALSE(result.guidance->closest.empty());
  bool rc_full = false;
  for (const RemedyTrial& t : result.guidance->closest[0].trials)
    rc_full = rc_full || (t.fits && t.remedies[0] == MemoryRemedy::kFullRecompute);
  EXPECT_TRUE(rc_full) << advice_text(result.guidance->closest[0], result.guidance->limit_bytes);
  EXPECT_NE(result.guidance->hint.find("--recipes rc-full"), std::string::npos) << result.guidance->hint;
}

// A megatron-te plan on DGX H100s (data/models/<model>.json, GPUs, global batch, sequence): NeMo's recipes,
// the H100's memory.
struct H100FrameworkPlan {
  framework::FrameworkTarget target = framework_target("h100-sxm");
  PlanOptions options;
};
H100FrameworkPlan h100_framework_plan(const std::string& model, int gpus, int global_batch, int seq_len) {
  H100FrameworkPlan p;
  p.options.model = load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/" + model + ".json");
  p.options.hardware = p.target.hardware;
  p.options.gpus = gpus;
  p.options.global_batch = global_batch;
  p.options.seq_len = seq_len;
  p.options.recipes = megatron_recipes();
  p.options.device_memory_bytes = static_cast<double>(p.target.hardware.memory_bytes);
  return p;
}

// What a framework plan's row has left of the device: the memory less the allocated peak, the runtime
// reserve and the plan's margin (what the fit check added up); the tight ones have under 10% of it.
TEST(Plan, FrameworkHeadroomIsWhatTheFitCheckLeaves) {
  const H100FrameworkPlan p = h100_framework_plan("llama3.1-8b", 8, 128, 8192);
  const FrameworkPlanSpace space;
  const PlanResult result = plan_framework_search(p.options, p.target, space);
  int feasible = 0, tight = 0;
  for (const PlanEntry& e : result.entries) {
    if (!e.feasible) continue;
    ++feasible;
    const double reserve = static_cast<double>(runtime_reserve(p.target, e.config).total_bytes());
    const double left = p.options.device_memory_bytes - e.peak_memory_bytes - reserve - space.memory_margin_bytes;
    EXPECT_NEAR(e.headroom_bytes, left, 1.0) << e.config.layout_text();
    EXPECT_GE(e.headroom_bytes, 0.0);
    EXPECT_EQ(e.tight_memory, left < kTightMemoryFraction * p.options.device_memory_bytes) << e.config.layout_text();
    tight += e.tight_memory ? 1 : 0;
  }
  EXPECT_GT(feasible, 0);
  EXPECT_GT(tight, 0) << "some 8B layouts on one node come within 10% of 80 GiB";
}

// LLaMA 3.1-405B on 8 DGX H100 nodes with megatron-te's default recipes: nothing fits 80 GiB, and no
// change tried fits either (memory only: nothing is predicted).
TEST(Plan, FrameworkGuidanceWhenNothingCanFit) {
  const H100FrameworkPlan p = h100_framework_plan("llama3.1-405b", 64, 512, 8192);
  const PlanResult result = plan_framework_search(p.options, p.target);
  EXPECT_GT(result.counts.candidates, 0);
  EXPECT_EQ(result.counts.fitting, 0);
  EXPECT_EQ(result.counts.predicted, 0);
  ASSERT_TRUE(result.guidance.has_value());
  EXPECT_EQ(result.guidance->closest.size(), 3u);
  for (const MemoryAdvice& a : result.guidance->closest) EXPECT_FALSE(a.fits()) << advice_text(a, result.guidance->limit_bytes);
  EXPECT_NE(result.guidance->hint.find("more GPUs"), std::string::npos);
}

// The progress hook: once per layout of the 24 (SearchCountsTheFunnel's space), in order; the candidates so
// far never shrink and end at the plan's 40; the best so far is feasible, comes from a layout already done
// (plan_layouts' order), only gets faster, and ends as the plan's fastest; the result is the one of a plan
// without the hook.
TEST(Plan, ProgressOncePerLayoutWithTheFastestSoFar) {
  DescribedPlan p = described();
  p.options.target = &*p.choice.target;
  p.options.precisions = {PrecisionName::kAmpBf16, PrecisionName::kFp32};
  const PlanResult quiet = plan_search(p.no_calibration, p.options);
  const std::vector<ParallelConfig> layouts = plan_layouts(p.options);
  std::vector<PlanProgress> calls;
  std::vector<double> best_us;  // the best's time at each call, 0 when none
  p.options.on_progress = [&](const PlanProgress& progress) {
    calls.push_back(progress);
    best_us.push_back(progress.best ? progress.best->iteration_us : 0.0);
    if (progress.best == nullptr) return;
    EXPECT_TRUE(progress.best->feasible);
    bool done_layout = false;
    for (int64_t i = 0; i < progress.layouts_done; ++i) {
      const ParallelConfig& done = layouts[static_cast<std::size_t>(i)];
      done_layout = done_layout || (done.to_string() == progress.best->config.to_string() &&
                                    done.vp == progress.best->config.vp && done.cp == progress.best->config.cp);
    }
    EXPECT_TRUE(done_layout) << progress.best->config.to_string() << " after " << progress.layouts_done << " layouts";
  };
  const PlanResult reported = plan_search(p.no_calibration, p.options);
  ASSERT_EQ(calls.size(), 24u);
  int64_t previous = 0;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].layouts_done, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(calls[i].layouts_total, 24);
    EXPECT_GE(calls[i].candidates, previous);
    previous = calls[i].candidates;
    if (i > 0 && best_us[i - 1] > 0) {
      EXPECT_LE(best_us[i], best_us[i - 1]);  // the best so far only improves
    }
  }
  EXPECT_EQ(calls.back().candidates, 40);
  ASSERT_FALSE(reported.entries.empty());
  EXPECT_EQ(best_us.back(), reported.entries.front().iteration_us);  // ranked: the fastest first
  ASSERT_EQ(quiet.entries.size(), reported.entries.size());
  for (std::size_t i = 0; i < quiet.entries.size(); ++i) {
    EXPECT_EQ(quiet.entries[i].iteration_us, reported.entries[i].iteration_us);
    EXPECT_EQ(quiet.entries[i].config.to_string(), reported.entries[i].config.to_string());
  }
}

// The same for the framework planner: one call per layout, the final count its candidates, the final best
// its fastest.
TEST(Plan, FrameworkProgressOncePerLayout) {
  H100FrameworkPlan p = h100_framework_plan("llama3.1-8b", 16, 64, 4096);
  std::vector<PlanProgress> calls;
  double last_best_us = 0;
  p.options.on_progress = [&](const PlanProgress& progress) {
    calls.push_back(progress);
    if (progress.best) last_best_us = progress.best->iteration_us;
  };
  const PlanResult result = plan_framework_search(p.options, p.target);
  ASSERT_EQ(static_cast<int64_t>(calls.size()), result.counts.layouts);
  EXPECT_EQ(calls.back().layouts_done, result.counts.layouts);
  EXPECT_EQ(calls.back().candidates, result.counts.candidates);
  ASSERT_GT(result.counts.predicted, 0);
  EXPECT_EQ(last_best_us, result.entries.front().iteration_us);
}

// The progress line, by hand: 41,200 candidates after 120 of 330 layouts -> about 41,200 x 330 / 120 =
// 113,300; none feasible so far; all layouts done: the exact count; a best so far: its layout, micro-batch,
// precision, recipe and time (duration_text: 3.21 s).
TEST(Plan, ProgressLineByHand) {
  PlanProgress progress;
  progress.layouts_done = 120;
  progress.layouts_total = 330;
  progress.candidates = 41200;
  EXPECT_EQ(validate::plan_progress_line(progress, 2.06),
            "plan: 41,200 of about 113,300 candidates (layouts 120 of 330), 2.1 s; none feasible so far");
  PlanEntry best;
  best.config = ParallelConfig{64, 8, 4, 1, 2048, 8192};
  best.precision = PrecisionName::kAmpBf16;
  best.iteration_us = 3.21e6;
  best.feasible = true;
  progress.best = &best;
  progress.layouts_done = 330;
  progress.candidates = 112545;
  const std::string line = validate::plan_progress_line(progress, 5.4);
  EXPECT_EQ(line.rfind("plan: 112,545 candidates (all 330 layouts), 5.4 s; fastest so far: dp64-tp8-pp4 mbs1 amp-bf16 ", 0), 0u)
      << line;
  EXPECT_NE(line.find("3.21 s"), std::string::npos) << line;
}

// megatron-te's head is vocabulary-parallel at every tp > 1: "sp+dopt" and "sp+vp+dopt" are one candidate
// there (shown with vp), the fold said once; at tp 1 the one candidate is plain TP's (neither token).
TEST(Plan, FrameworkFoldsTheVocabularyParallelToken) {
  H100FrameworkPlan p = h100_framework_plan("llama3.1-8b", 8, 32, 4096);
  p.options.micro_batches = {1};
  p.options.recipes = {parse_recipe_text("sp+dopt"), parse_recipe_text("sp+vp+dopt")};
  const PlanResult both = plan_framework_search(p.options, p.target);
  p.options.recipes = {parse_recipe_text("sp+vp+dopt")};
  const PlanResult one = plan_framework_search(p.options, p.target);
  EXPECT_EQ(both.counts.candidates, one.counts.candidates);
  for (const PlanEntry& e : both.entries) {
    EXPECT_EQ(e.techniques.vocab_parallel, e.config.tp > 1) << e.config.layout_text();
    EXPECT_EQ(e.techniques.sequence_parallel, e.config.tp > 1) << e.config.layout_text();
  }
  ASSERT_EQ(both.folded.size(), 1u);
  EXPECT_EQ(both.folded[0], kFoldedVocabParallel);
  EXPECT_TRUE(one.folded.empty());  // every recipe given has the token: nothing was folded
  // On one GPU every layout has tp 1: the token was dropped there as plain TP, not folded.
  p.options.gpus = 1;
  p.options.global_batch = 8;
  p.options.recipes = {parse_recipe_text("sp+dopt"), parse_recipe_text("sp+vp+dopt")};
  const PlanResult tp1 = plan_framework_search(p.options, p.target);
  EXPECT_GT(tp1.counts.candidates, 0);
  EXPECT_TRUE(tp1.folded.empty());
}

// Hand-built entries on a device of 80 GiB (plan_ranking.hpp): three choices in a 10% tie band, one of
// them tight on memory and with a slower variant, one choice outside the band, one infeasible candidate.
std::vector<PlanEntry> ranking_entries() {
  const double gib = static_cast<double>(1ull << 30);
  auto entry = [&](int dp, int tp, int mbs, double time_us, double headroom_gib, const char* recipe) {
    PlanEntry e;
    e.config = ParallelConfig{dp, tp, 1, mbs, 8, 128};
    e.precision = PrecisionName::kAmpBf16;
    e.techniques = std::string(recipe).empty() ? TrainingTechniques{} : parse_recipe_text(recipe);
    e.iteration_us = time_us;
    e.headroom_bytes = headroom_gib * gib;
    e.feasible = e.fits_memory = true;
    return e;
  };
  std::vector<PlanEntry> entries;
  entries.push_back(entry(2, 1, 1, 100, 1.0, "dopt"));          // A: fastest, tight (1 GiB < 8 GiB)
  entries.push_back(entry(1, 2, 1, 104, 20.0, "sp+dopt+ovl"));  // B: 3 techniques
  entries.push_back(entry(1, 2, 2, 105, 20.0, "dopt"));         // C: 1 technique
  entries.push_back(entry(2, 1, 1, 103, 1.0, "dopt+ovl"));      // D: A's choice, another recipe
  entries.push_back(entry(1, 2, 4, 130, 20.0, ""));             // E: outside the band
  PlanEntry infeasible = entry(1, 2, 8, 0, -1, "");             // F
  infeasible.feasible = infeasible.fits_memory = false;
  infeasible.headroom_bytes = -1;
  entries.push_back(infeasible);
  return entries;
}

TEST(Plan, RankingBreaksTiesByHeadroomThenTechniquesThenTime) {
  std::vector<PlanEntry> e = ranking_entries();
  rank_plan_entries(e, 0.10, 80.0 * static_cast<double>(1ull << 30));
  ASSERT_EQ(e.size(), 6u);
  // C and B have room and C fewer techniques; A is tight; D follows A as its variant; E by time; F last.
  const double order[] = {105, 104, 100, 103, 130, 0};
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].iteration_us, order[i]) << i;
  const int ranks[] = {1, 2, 3, 3, 4, 0};
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].rank, ranks[i]) << i;
  const int variant_of[] = {-1, -1, -1, 2, -1, -1};
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].variant_of, variant_of[i]) << i;
  EXPECT_EQ(e[2].variants, 1);
  EXPECT_EQ(e[0].variants, 0);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(e[i].tie) << i;
  EXPECT_FALSE(e[4].tie || e[5].tie);
  EXPECT_TRUE(e[2].tight_memory && e[3].tight_memory);
  EXPECT_FALSE(e[0].tight_memory || e[1].tight_memory || e[4].tight_memory);
  EXPECT_EQ(e[0].technique_count, 1);
  EXPECT_EQ(e[1].technique_count, 3);
  EXPECT_EQ(e[0].why, "+5.0% over the fastest; tie, ahead of #2 by fewer techniques (1 against 3)");
  EXPECT_EQ(e[1].why, "+4.0% over the fastest; tie, after #1 by more techniques (3 against 1)");
  EXPECT_EQ(e[2].why, "fastest; tie, after #2 by memory headroom (1.0 GiB left, under 10.0% of 80.0 GiB)");
  EXPECT_EQ(e[3].why, "");  // a variant: shown under its choice
  EXPECT_EQ(e[4].why, "+30.0% over the fastest, outside the tie band (+10.0%)");
  EXPECT_EQ(e[5].why, "");
}

TEST(Plan, TechniquesCountedBeyondTheFrameworksDefaults) {
  PlanEntry own;
  own.techniques = parse_recipe_text("sp+vp+dopt+rc-sel+ovl+opg");
  EXPECT_EQ(technique_count(own), 6);  // itertime's own trainer: every switch
  PlanEntry nemo = own;                // megatron-te: NeMo's sp, dopt, ovl, opg (vp always on) count nothing
  nemo.framework_recipe = framework::FrameworkRecipe{};
  nemo.framework_recipe->techniques = own.techniques;
  EXPECT_EQ(technique_count(nemo), 1);  // the recompute
  nemo.framework_recipe->tp_comm_overlap = true;
  nemo.framework_recipe->fp8_param_gather = true;  // only with fp8
  EXPECT_EQ(technique_count(nemo), 2);
  nemo.framework_recipe->precision = PrecisionName::kFp8;
  EXPECT_EQ(technique_count(nemo), 3);
}

TEST(Plan, MegatronDefaultAxes) {
  EXPECT_EQ(megatron_default_context_parallel(8192), (std::vector<int>{1, 2}));
  EXPECT_EQ(megatron_default_context_parallel(8191), (std::vector<int>{1}));
  EXPECT_EQ(megatron_default_context_parallel(4096), (std::vector<int>{1}));
  EXPECT_EQ(megatron_default_context_parallel(16384), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(megatron_default_context_parallel(131072), (std::vector<int>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(megatron_default_context_parallel(1 << 20), (std::vector<int>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(megatron_default_virtual_stages(), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(Plan, RankingWithoutATieBandIsByTime) {
  std::vector<PlanEntry> e = ranking_entries();
  rank_plan_entries(e, 0.0, 80.0 * static_cast<double>(1ull << 30));
  const double order[] = {100, 103, 104, 105, 130, 0};
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].iteration_us, order[i]) << i;
  const int ranks[] = {1, 1, 2, 3, 4, 0};
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].rank, ranks[i]) << i;
  for (const PlanEntry& x : e) EXPECT_FALSE(x.tie);
  EXPECT_EQ(e[0].why, "fastest; the next lies outside the tie band (+0.0%)");
  EXPECT_EQ(e[2].why, "+4.0% over the fastest, outside the tie band (+0.0%)");
  // No device memory: nothing is tight, and the band is ordered by techniques, then time.
  std::vector<PlanEntry> f = ranking_entries();
  rank_plan_entries(f, 0.10, 0.0);
  EXPECT_EQ(f[0].iteration_us, 100);  // A (1 technique, faster than C)
  EXPECT_EQ(f[2].iteration_us, 105);  // C
  EXPECT_EQ(f[3].iteration_us, 104);  // B (3 techniques)
  EXPECT_EQ(f[0].why, "fastest; tie, ahead of #2 by time");
}

TEST(Plan, JsonHasTheQuestionAndRespectsTop) {
  DescribedPlan p = described();
  p.options.target = &*p.choice.target;
  p.options.tie_fraction = 0.129;
  p.options.tie_source = "a test";
  const PlanResult result = plan_search(p.no_calibration, p.options);
  validate::PlanQuestion question;
  question.nodes = 0;
  const nlohmann::json json = nlohmann::json::parse(validate::plan_json(p.options, question, result, 3));
  EXPECT_EQ(json.at("question").at("model"), "tiny-llama-gqa");
  EXPECT_EQ(json.at("question").at("gpus"), 4);
  EXPECT_EQ(json.at("question").at("hardware"), "h100-sxm");
  EXPECT_EQ(json.at("question").at("framework"), "itertime");
  EXPECT_EQ(json.at("question").at("global_batch"), 8);
  EXPECT_EQ(json.at("question").at("seq_len"), 32);
  EXPECT_EQ(json.at("question").at("space").at("micro_batches"), nlohmann::json({1, 2, 4, 8}));
  EXPECT_EQ(json.at("question").at("space").at("recipes"), nlohmann::json({"plain"}));
  EXPECT_EQ(json.at("summary").at("layouts_considered"), 24);
  EXPECT_EQ(json.at("summary").at("layouts_legal"), 20);
  EXPECT_EQ(json.at("summary").at("candidates"), 20);
  EXPECT_EQ(json.at("summary").at("predicted"), 20);
  EXPECT_DOUBLE_EQ(json.at("mfu").at("peak_flops_per_s_per_device").get<double>(), *p.choice.hardware->peak(ComputeDType::kBf16));
  EXPECT_DOUBLE_EQ(json.at("ties").at("fraction").get<double>(), 0.129);
  EXPECT_EQ(json.at("ties").at("source"), "a test");
  EXPECT_EQ(json.at("candidates_total"), 20);
  EXPECT_EQ(json.at("candidates_shown"), 3);
  ASSERT_EQ(json.at("candidates").size(), 3u);
  const nlohmann::json& first = json.at("candidates").at(0);
  EXPECT_EQ(first.at("layout"), result.entries[0].config.layout_text());
  EXPECT_EQ(first.at("rank"), 1);
  EXPECT_TRUE(first.contains("mfu_bf16_peak") && first.contains("mfu") && first.contains("tie") && first.contains("implausible"));
  EXPECT_TRUE(json.at("guidance").is_null());
}

}  // namespace
}  // namespace itertime::predict
