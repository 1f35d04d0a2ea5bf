// test_answer_pieces.cpp: the small pieces an answer is made of, field by field and at their boundaries
// (issue 45): the memory split of both memory models (every field, fp8 included, adding up to the
// unchanged peak), the quoted range's value and basis text, the answer check just above and at each
// threshold (MFU, zero-priced share, extrapolated fraction and reach, the ratio's printed form), and the
// plan's memory remedies at their boundaries (exactly at the limit, the conditions that skip a remedy,
// the combined variant, the hint with recipes and precisions together).
// Invariants: pure; no file is read; every expected value is written by hand from the header's rule.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "predict/answer_check.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/memory_split.hpp"
#include "predict/plan_guidance.hpp"
#include "predict/prediction_range.hpp"

namespace itertime::predict {
namespace {

// --- memory_split ---------------------------------------------------------------------------------

TEST(MemorySplitFields, FrameworkFieldsMapOneToOneAndFp8JoinsOther) {
  framework::FrameworkMemory m;
  m.pipeline_rank = 3;
  m.weights_bytes = 1000, m.main_grad_bytes = 2000, m.optimizer_bytes = 6000, m.fp8_bytes = 300;
  m.activations_bytes = 40000, m.other_bytes = 7, m.total_bytes = 1000 + 2000 + 6000 + 300 + 40000 + 7;
  const MemorySplit s = memory_split(m);
  EXPECT_EQ(s.pipeline_rank, 3);
  EXPECT_EQ(s.weights_bytes, 1000);
  EXPECT_EQ(s.gradients_bytes, 2000);
  EXPECT_EQ(s.optimizer_bytes, 6000);
  EXPECT_EQ(s.activations_bytes, 40000);
  EXPECT_EQ(s.other_bytes, 307);  // fp8 caches 300 + the transient 7
  EXPECT_EQ(s.total_bytes, 49307);
  EXPECT_NE(s.other_holds.find("fp8 weight caches"), std::string::npos) << s.other_holds;
  m.fp8_bytes = 0;
  const MemorySplit b = memory_split(m);
  EXPECT_EQ(b.other_bytes, 7);
  EXPECT_EQ(b.other_holds.find("fp8"), std::string::npos) << b.other_holds;
}

TEST(MemorySplitFields, TrainerOtherIsBuffersPlusTheWorkspaceBeyondTheActivations) {
  MemoryBreakdown m;
  m.stage = 1;
  m.weights_bytes = 10, m.gradients_bytes = 20, m.optimizer_bytes = 40, m.activations_bytes = 500, m.buffers_bytes = 3;
  m.optimizer_workspace_bytes = 500;  // equal to the activations: nothing beyond them
  m.total_bytes = 10 + 20 + 40 + 500 + 3;
  MemorySplit s = memory_split(m);
  EXPECT_EQ(s.pipeline_rank, 1);
  EXPECT_EQ(s.weights_bytes, 10);
  EXPECT_EQ(s.gradients_bytes, 20);
  EXPECT_EQ(s.optimizer_bytes, 40);
  EXPECT_EQ(s.activations_bytes, 500);
  EXPECT_EQ(s.other_bytes, 3);
  EXPECT_EQ(s.total_bytes, 573);
  EXPECT_EQ(s.other_holds.find("workspace"), std::string::npos) << s.other_holds;
  m.optimizer_workspace_bytes = 501;  // one byte beyond
  s = memory_split(m);
  EXPECT_EQ(s.other_bytes, 4);
  EXPECT_NE(s.other_holds.find("AdamW step's workspace"), std::string::npos) << s.other_holds;
}

TEST(MemorySplitFields, Fp8SplitsAddUpToTheFrameworksPeak) {
  framework::TransformerShape shape;
  shape.name = "split-fp8";
  shape.hidden = 1024, shape.ffn = 2816, shape.layers = 8, shape.heads = 16, shape.kv_heads = 4, shape.head_dim = 64;
  shape.vocab = 32000;
  for (bool params : {false, true}) {
    for (int pp : {1, 2}) {
      ParallelConfig c{2, 2, pp, 1, 8, 2048};
      framework::FrameworkRecipe r;
      r.precision = PrecisionName::kFp8;
      r.fp8_param_gather = params;
      r.techniques = parse_recipe_text("sp+dopt");
      const framework::FrameworkMemory m = framework::megatron_te_peak_memory(shape, c, r);
      ASSERT_GT(m.fp8_bytes, 0);
      const MemorySplit s = memory_split(m);
      EXPECT_EQ(s.total_bytes, framework::megatron_te_peak_memory_bytes(shape, c, r));
      EXPECT_EQ(s.weights_bytes + s.gradients_bytes + s.optimizer_bytes + s.activations_bytes + s.other_bytes, s.total_bytes)
          << "fp8 params " << params << " pp " << pp;
      EXPECT_GE(s.other_bytes, m.fp8_bytes);
    }
  }
}

// --- prediction_range -----------------------------------------------------------------------------

TEST(PredictionRangeText, FrameworkQuotesItsGenerationsPublishedCheck) {
  // Each generation's check, by its GPUs' names; the text names the runs, the generation and the sources.
  for (const FrameworkCheck& check : kFrameworkChecks) {
    const std::string gpus = check.gpus;
    const std::string first = gpus.substr(0, gpus.find(' '));
    const PredictionRange r = framework_range(first);
    ASSERT_TRUE(r.pct.has_value()) << first;
    EXPECT_DOUBLE_EQ(*r.pct, check.mape_pct) << first;
    EXPECT_EQ(r.basis, "the described framework model's MAPE on " + std::to_string(check.runs) + " published " +
                           check.generation + " runs (" + check.sources + "; itertime score-published); typical, not a bound");
  }
  EXPECT_DOUBLE_EQ(*framework_range("h200-sxm").pct, *framework_range("h100-sxm").pct);  // one generation
  // A generation no published run backs: no number, and how to get one.
  const PredictionRange b200 = framework_range("b200");
  EXPECT_FALSE(b200.pct.has_value());
  EXPECT_EQ(b200.basis,
            "none: no published run of b200's GPU generation backs the described framework model (itertime "
            "score-published); fit it on your own logs (itertime fit --framework megatron-te) for one");
  // Fitted: the fit's leave-one-model-out figure, or none with one model.
  const PredictionRange fitted = framework_fitted_range(1.4, 26, 2, "t.json");
  ASSERT_TRUE(fitted.pct.has_value());
  EXPECT_DOUBLE_EQ(*fitted.pct, 1.4);
  EXPECT_EQ(fitted.basis, "the fit's leave-one-model-out MAPE on 26 logged runs of 2 models (t.json); typical, not a bound");
  EXPECT_FALSE(framework_fitted_range(NAN, 3, 1, "t.json").pct.has_value());
  // Plan's ties: the generation's range, else every run's.
  EXPECT_DOUBLE_EQ(framework_tie_fraction("h100-sxm"), *framework_range("h100-sxm").pct / 100.0);
  EXPECT_DOUBLE_EQ(framework_tie_fraction("b200"), kFrameworkPublishedMapePct / 100.0);
}

TEST(PredictionRangeText, CalibratedQuotesTheStoredValidation) {
  const PredictionRange none = calibrated_range(std::nullopt, 0, "overall", false);
  EXPECT_FALSE(none.pct.has_value());
  EXPECT_EQ(none.basis, "none: this file holds no validation; run `itertime validate CAL` on the calibration to measure one");
  const PredictionRange overall = calibrated_range(6.5, 12, "overall", false);
  ASSERT_TRUE(overall.pct.has_value());
  EXPECT_DOUBLE_EQ(*overall.pct, 6.5);
  EXPECT_EQ(overall.basis,
            "the calibration's validation: its predictions' MAPE overall over 12 ground-truth configurations; typical for "
            "configurations like those, not a bound");
  const PredictionRange built = calibrated_range(9.25, 7, "amp-bf16", true);
  EXPECT_DOUBLE_EQ(*built.pct, 9.25);
  EXPECT_EQ(built.basis,
            "the calibration's validation: its builder-only predictions' MAPE at amp-bf16 over 7 ground-truth "
            "configurations; typical for configurations like those, not a bound");
  const PredictionRange described = described_range("h100-sxm");
  EXPECT_FALSE(described.pct.has_value());
  EXPECT_EQ(described.basis,
            "none: no measurement checks itertime's trainer described on h100-sxm; the framework model "
            "(--framework megatron-te) quotes its published check");
}

// --- answer_check -------------------------------------------------------------------------------------

std::vector<std::string> codes(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const Finding& f : findings) out.push_back(f.code);
  return out;
}

TEST(AnswerCheckBoundary, MfuAtThePeakPassesJustAboveIsRefused) {
  AnswerFacts f;
  f.mfu = 1.0;
  EXPECT_TRUE(check_answer(f).empty());
  f.mfu = 1.0 + 1e-9;
  const std::vector<Finding> found = check_answer(f);
  ASSERT_EQ(codes(found), std::vector<std::string>{"faster_than_peak"});
  EXPECT_TRUE(found[0].refuse);
  EXPECT_NE(found[0].message.find("MFU 100 % of the dense peak"), std::string::npos) << found[0].message;
  f.mfu = 1.02;  // printed rounded: 102 %
  EXPECT_NE(check_answer(f)[0].message.find("MFU 102 %"), std::string::npos);
  f.mfu = 0.999;
  EXPECT_TRUE(check_answer(f).empty());
}

TEST(AnswerCheckBoundary, ZeroPricedOperatorsRefuseAboveATenth) {
  AnswerFacts f;
  f.operators = 100;
  f.operators_without_time = 10;  // exactly a tenth: shown, not refused
  std::vector<Finding> found = check_answer(f);
  ASSERT_EQ(codes(found), std::vector<std::string>{"operators_without_time"});
  EXPECT_FALSE(found[0].refuse);
  EXPECT_EQ(found[0].message, "10 of 100 operators have neither a profile nor a regression and are priced at zero");
  f.operators_without_time = 11;
  EXPECT_TRUE(check_answer(f)[0].refuse);
  f.operators = 0;  // no count of operators: the share is taken as all of them
  f.operators_without_time = 1;
  EXPECT_TRUE(check_answer(f)[0].refuse);
  f.operators_without_time = 0;
  EXPECT_TRUE(check_answer(f).empty());
}

TEST(AnswerCheckBoundary, FarExtrapolationNeedsMoreThanHalfAndMoreThanEightTimes) {
  AnswerFacts f;
  f.largest_profiled_flops = 1e9;
  f.extrapolated_fraction = 0.5;
  f.largest_matmul_flops = 9e9;
  EXPECT_TRUE(check_answer(f).empty()) << "exactly half the time is not most of it";
  f.extrapolated_fraction = 0.51;
  f.largest_matmul_flops = 8e9;
  EXPECT_TRUE(check_answer(f).empty()) << "exactly 8x is not beyond it";
  f.largest_matmul_flops = 9e9;
  std::vector<Finding> found = check_answer(f);
  ASSERT_EQ(codes(found), std::vector<std::string>{"far_extrapolation"});
  EXPECT_EQ(found[0].message,
            "51 % of the compute time comes from the operator regression, at matrix products 9.0x the largest profiled "
            "operator");
  f.largest_matmul_flops = 2.5e11;  // 250x
  EXPECT_NE(check_answer(f)[0].message.find("at matrix products 250x the"), std::string::npos);
  f.largest_matmul_flops = 2e14;  // 2e5 x
  EXPECT_NE(check_answer(f)[0].message.find("at matrix products 2.0e+05x the"), std::string::npos);
  f.largest_profiled_flops = 0;  // no reach without a profiled operator
  EXPECT_TRUE(check_answer(f).empty());
}

TEST(AnswerCheckBoundary, PrecisionCheckSkipsTheBlindBaselineAndNamesWhatRan) {
  AnswerFacts f;
  f.precision = "amp-fp16";
  f.calibrated_precisions = {"fp32", "amp-bf16"};
  const std::vector<Finding> found = check_answer(f);
  ASSERT_EQ(codes(found), std::vector<std::string>{"precision_not_calibrated"});
  EXPECT_EQ(found[0].message, "the calibration never ran amp-fp16 (it traced amp-bf16, fp32)");
  f.blind = true;
  EXPECT_TRUE(check_answer(f).empty());
  f.blind = false;
  f.precision = "fp32";
  EXPECT_TRUE(check_answer(f).empty());
}

// --- plan_guidance at its boundaries ------------------------------------------------------------------

constexpr double kGiB = static_cast<double>(1ull << 30);

MemoryCandidate candidate(int dp, int tp, int pp, double gib, const std::string& recipe = "", int cp = 1) {
  MemoryCandidate c;
  c.config = ParallelConfig{dp, tp, pp, 1, 64, 4096};
  c.config.cp = cp;
  if (!recipe.empty()) c.techniques = parse_recipe_text(recipe);
  c.peak_memory_bytes = gib * kGiB;
  return c;
}

// 100 GiB, less: rc-full 30, rc-sel 10, pp x2 20, dopt 15, fp8 12, sp 5 (each alone; together they add).
std::optional<double> savings(const MemoryCandidate& v) {
  double gib = 100;
  if (v.techniques.recompute == Recompute::kFull) gib -= 30;
  if (v.techniques.recompute == Recompute::kSelective) gib -= 10;
  if (v.config.pp == 2 * 2) gib -= 20;  // candidates below start at pp 2
  if (v.techniques.distributed_optimizer) gib -= 15;
  if (v.precision == PrecisionName::kFp8) gib -= 12;
  if (v.techniques.sequence_parallel) gib -= 5;
  return gib * kGiB;
}

std::vector<std::string> labels(const MemoryAdvice& a) {
  std::vector<std::string> out;
  for (const RemedyTrial& t : a.trials) out.push_back(t.label());
  return out;
}

TEST(PlanGuidanceBoundary, ExactlyAtTheLimitFits) {
  const MemoryGuidance g = memory_guidance({candidate(2, 2, 2, 100)}, 70 * kGiB, savings, true);
  const MemoryAdvice& a = g.closest.at(0);
  EXPECT_EQ(labels(a), (std::vector<std::string>{"rc-full", "rc-sel", "pp4,dp1", "dopt", "fp8", "sp"}));
  EXPECT_TRUE(a.trials[0].fits) << "70 GiB of 70 GiB fits";
  EXPECT_FALSE(a.trials[2].fits) << "80 GiB does not";
  EXPECT_TRUE(a.fits());
  EXPECT_FALSE(a.combined.has_value());
  EXPECT_EQ(g.hint, "run with --recipes rc-full (or --all-recipes)");
  const MemoryGuidance below = memory_guidance({candidate(2, 2, 2, 100)}, 70 * kGiB - 1, savings, true);
  EXPECT_FALSE(below.closest.at(0).trials[0].fits);
}

TEST(PlanGuidanceBoundary, RemediesThatChangeNothingAreNotTried) {
  // dp 1 (odd: no pp x2), tp 1 (no sp), dp x cp 1 (no dopt), fp8 already, rc-sel on (rc-sel not again,
  // rc-full still tried).
  MemoryCandidate c = candidate(1, 1, 2, 100, "rc-sel");
  c.precision = PrecisionName::kFp8;
  EXPECT_EQ(labels(memory_guidance({c}, 50 * kGiB, savings, true).closest.at(0)), std::vector<std::string>{"rc-full"});
  // dp 3 is odd: no pp x2; cp 2 makes dopt apply at dp 1.
  EXPECT_EQ(labels(memory_guidance({candidate(3, 1, 2, 100)}, 50 * kGiB, savings, false).closest.at(0)),
            (std::vector<std::string>{"rc-full", "rc-sel", "dopt"}));
  EXPECT_EQ(labels(memory_guidance({candidate(1, 1, 2, 100, "", 2)}, 50 * kGiB, savings, false).closest.at(0)),
            (std::vector<std::string>{"rc-full", "rc-sel", "dopt"}));
  // rc-full on: neither recompute is tried.
  EXPECT_EQ(labels(memory_guidance({candidate(1, 2, 2, 100, "rc-full")}, 50 * kGiB, savings, false).closest.at(0)),
            (std::vector<std::string>{"sp"}));
  // A variant the memory model cannot train (nullopt) is left out.
  const MemoryOf no_pipeline = [](const MemoryCandidate& v) -> std::optional<double> {
    if (v.config.pp == 4) return std::nullopt;
    return savings(v);
  };
  EXPECT_EQ(labels(memory_guidance({candidate(2, 1, 2, 100)}, 50 * kGiB, no_pipeline, false).closest.at(0)),
            (std::vector<std::string>{"rc-full", "rc-sel", "dopt"}));
}

TEST(PlanGuidanceBoundary, CombinedTakesTheLoweringOnesFullRecomputeInsteadOfSelective) {
  // dp 2, tp 2, pp 2 at 100 GiB against 20 GiB: nothing alone; together rc-full + pp4,dp1 + sp (dopt
  // does not apply at dp 1 after the pipeline doubled) = 100 - 30 - 20 - 5 = 45 GiB: still over.
  const MemoryGuidance g = memory_guidance({candidate(2, 2, 2, 100)}, 20 * kGiB, savings, false);
  const MemoryAdvice& a = g.closest.at(0);
  EXPECT_FALSE(a.fits());
  ASSERT_TRUE(a.combined.has_value());
  EXPECT_EQ(a.combined->label(), "rc-full+pp4,dp1+sp");
  EXPECT_DOUBLE_EQ(a.combined->variant.peak_memory_bytes, 45 * kGiB);
  EXPECT_FALSE(a.combined->fits);
  EXPECT_EQ(g.hint, "no change tried makes them fit: more GPUs (--nodes, --gpus), a shorter --seq, or a device with more memory");
  // At 45 GiB the combined one fits and names its recipe.
  const MemoryGuidance fits = memory_guidance({candidate(2, 2, 2, 100)}, 45 * kGiB, savings, false);
  ASSERT_TRUE(fits.closest.at(0).combined.has_value());
  EXPECT_TRUE(fits.closest.at(0).combined->fits);
  EXPECT_TRUE(fits.closest.at(0).fits());
  EXPECT_EQ(fits.hint, "run with --recipes sp+rc-full (or --all-recipes)");
  EXPECT_NE(advice_text(fits.closest.at(0), 45 * kGiB).find("; fits with those that lower it, together: rc-full+pp4,dp1+sp"),
            std::string::npos);
}

TEST(PlanGuidanceBoundary, HintNamesRecipesAndPrecisionsTogether) {
  // 100 GiB against 88: fits with rc-full (70), rc-sel (90: no), pp x2 (80), dopt (85), fp8 (88: exactly).
  const MemoryGuidance g = memory_guidance({candidate(2, 1, 2, 100)}, 88 * kGiB, savings, true);
  EXPECT_EQ(labels(g.closest.at(0)), (std::vector<std::string>{"rc-full", "rc-sel", "pp4,dp1", "dopt", "fp8"}));
  EXPECT_EQ(g.hint, "run with --recipes rc-full,dopt (or --all-recipes) with --precisions amp-bf16,fp8");
  EXPECT_EQ(advice_text(g.closest.at(0), 88 * kGiB),
            "dp2-tp1-pp2 mbs1 amp-bf16 plain needs 100.00 GiB of 88.00 GiB: fits with rc-full (70.00 GiB) or with pp4,dp1 "
            "(80.00 GiB) or with dopt (85.00 GiB) or with fp8 (88.00 GiB); not with rc-sel (90.00 GiB)");
  // Only fp8 fits: the precisions alone.
  const MemoryOf only_fp8 = [](const MemoryCandidate& v) -> std::optional<double> {
    return (v.precision == PrecisionName::kFp8 ? 60 : 100) * kGiB;
  };
  EXPECT_EQ(memory_guidance({candidate(2, 1, 2, 100)}, 88 * kGiB, only_fp8, true).hint, "run with --precisions amp-bf16,fp8");
}

TEST(PlanGuidanceBoundary, TheClosestAreAtMostMaxCandidatesInPeakOrder) {
  const std::vector<MemoryCandidate> over = {candidate(2, 1, 2, 130), candidate(1, 2, 2, 110), candidate(2, 2, 2, 120),
                                             candidate(1, 2, 2, 110)};
  const MemoryGuidance g = memory_guidance(over, 50 * kGiB, savings, false, 2);
  EXPECT_EQ(g.over_limit, 4);
  ASSERT_EQ(g.closest.size(), 2u);
  EXPECT_DOUBLE_EQ(g.closest[0].candidate.peak_memory_bytes, 110 * kGiB);
  EXPECT_DOUBLE_EQ(g.closest[1].candidate.peak_memory_bytes, 120 * kGiB) << "the duplicate of 110 is skipped";
}

}  // namespace
}  // namespace itertime::predict
