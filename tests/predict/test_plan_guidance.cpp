// test_plan_guidance.cpp: memory_guidance() (predict/plan_guidance.hpp) on synthetic memory functions:
// which remedy makes the closest candidate fit (full recompute, a deeper pipeline), none does (the
// combined variant, the hint), which candidates are the closest, and that fp8 is tried only where the
// device has it.
// Invariants: pure; no file is read; memory in GiB-sized round numbers so the texts are exact.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "predict/plan_guidance.hpp"

namespace itertime::predict {
namespace {

constexpr double kGiB = static_cast<double>(1ull << 30);

MemoryCandidate candidate(int dp, int tp, int pp, double peak_gib, TrainingTechniques techniques = {}) {
  MemoryCandidate c;
  c.config = ParallelConfig{dp, tp, pp, 1, 64, 4096};
  c.techniques = techniques;
  c.peak_memory_bytes = peak_gib * kGiB;
  return c;
}

// Full recompute takes 40 GiB off; nothing else changes the memory.
std::optional<double> recompute_saves(const MemoryCandidate& v) {
  const double base = 100 * kGiB;  // whatever the layout
  return v.techniques.recompute == Recompute::kFull ? base - 40 * kGiB : base;
}

TEST(PlanGuidance, FullRecomputeMakesItFit) {
  const MemoryGuidance g = memory_guidance({candidate(4, 2, 2, 100)}, 80 * kGiB, recompute_saves, false);
  ASSERT_EQ(g.closest.size(), 1u);
  const MemoryAdvice& a = g.closest[0];
  EXPECT_TRUE(a.fits());
  EXPECT_FALSE(a.combined.has_value());  // a single change fits
  int fitting = 0;
  for (const RemedyTrial& t : a.trials) {
    if (!t.fits) continue;
    ++fitting;
    ASSERT_EQ(t.remedies.size(), 1u);
    EXPECT_EQ(t.remedies[0], MemoryRemedy::kFullRecompute);
    EXPECT_DOUBLE_EQ(t.variant.peak_memory_bytes, 60 * kGiB);
  }
  EXPECT_EQ(fitting, 1);
  // rc-full, rc-sel, pp x2 (dp 4 even), dopt (dp 4), sp (tp 2); no fp8 (not available).
  EXPECT_EQ(a.trials.size(), 5u);
  for (const RemedyTrial& t : a.trials) EXPECT_NE(t.remedies[0], MemoryRemedy::kFp8);
  EXPECT_EQ(g.hint, "run with --recipes rc-full (or --all-recipes)");
  const std::string text = advice_text(a, g.limit_bytes);
  EXPECT_NE(text.find("dp4-tp2-pp2 mbs1 amp-bf16 plain needs 100.00 GiB of 80.00 GiB: fits with rc-full (60.00 GiB)"),
            std::string::npos)
      << text;
}

TEST(PlanGuidance, DoublingThePipelineMakesItFit) {
  const MemoryOf by_pipeline = [](const MemoryCandidate& v) -> std::optional<double> {
    if (v.config.pp > 4) return std::nullopt;  // deeper than the model allows
    return 200 * kGiB / v.config.pp;
  };
  // dp8-tp1-pp2 at 100 GiB: pp4 (dp4) holds 50 GiB.
  const MemoryGuidance g = memory_guidance({candidate(8, 1, 2, 100)}, 80 * kGiB, by_pipeline, true);
  ASSERT_EQ(g.closest.size(), 1u);
  const MemoryAdvice& a = g.closest[0];
  ASSERT_TRUE(a.fits());
  bool pipeline = false;
  for (const RemedyTrial& t : a.trials) {
    if (!t.fits) continue;
    EXPECT_EQ(t.remedies[0], MemoryRemedy::kDoublePipeline);
    EXPECT_EQ(t.variant.config.pp, 4);
    EXPECT_EQ(t.variant.config.dp, 4);
    EXPECT_EQ(t.label(), "pp4,dp4");
    pipeline = true;
  }
  EXPECT_TRUE(pipeline);
  // No sp at tp 1; fp8 tried (available).
  for (const RemedyTrial& t : a.trials) EXPECT_NE(t.remedies[0], MemoryRemedy::kSequenceParallel);
  EXPECT_NE(advice_text(a, g.limit_bytes).find("fits with pp4,dp4 (50.00 GiB)"), std::string::npos);
  // At pp 4 the deeper pipeline is refused by the memory function: not a trial.
  const MemoryGuidance deep = memory_guidance({candidate(2, 1, 4, 100)}, 80 * kGiB, by_pipeline, true);
  for (const RemedyTrial& t : deep.closest.at(0).trials) EXPECT_NE(t.remedies[0], MemoryRemedy::kDoublePipeline);
}

TEST(PlanGuidance, NothingFitsTriesTheLoweringOnesTogetherAndSaysWhatElse) {
  // Each of rc-full and sp takes 10%; dopt changes nothing; nothing reaches 50 GiB.
  const MemoryOf memory = [](const MemoryCandidate& v) -> std::optional<double> {
    double gib = 100;
    if (v.techniques.recompute == Recompute::kFull) gib *= 0.9;
    if (v.techniques.sequence_parallel) gib *= 0.9;
    return gib * kGiB;
  };
  const MemoryGuidance g = memory_guidance({candidate(1, 2, 1, 100)}, 50 * kGiB, memory, false);
  ASSERT_EQ(g.closest.size(), 1u);
  const MemoryAdvice& a = g.closest[0];
  EXPECT_FALSE(a.fits());
  ASSERT_TRUE(a.combined.has_value());
  EXPECT_EQ(a.combined->label(), "rc-full+sp");  // rc-sel changed nothing; dopt does not apply at dp 1
  EXPECT_NEAR(a.combined->variant.peak_memory_bytes, 81 * kGiB, 1);
  EXPECT_FALSE(a.combined->fits);
  EXPECT_NE(g.hint.find("more GPUs"), std::string::npos) << g.hint;
  EXPECT_NE(advice_text(a, g.limit_bytes).find("no single change fits"), std::string::npos);
}

TEST(PlanGuidance, TheClosestAreTheSmallestDistinctOnes) {
  std::vector<MemoryCandidate> over = {candidate(4, 2, 2, 300), candidate(2, 2, 4, 120), candidate(2, 2, 4, 120),
                                       candidate(8, 1, 2, 200), candidate(1, 8, 2, 150)};
  over[2].framework_switches = "tp-overlap";  // the same layout and recipe: collapses to the first
  const MemoryGuidance g = memory_guidance(over, 80 * kGiB, recompute_saves, false, 3);
  EXPECT_EQ(g.over_limit, 5);
  ASSERT_EQ(g.closest.size(), 3u);
  EXPECT_EQ(g.closest[0].candidate.config.layout_text(), "dp2-tp2-pp4");
  EXPECT_EQ(g.closest[0].candidate.framework_switches, "");
  EXPECT_EQ(g.closest[1].candidate.config.layout_text(), "dp1-tp8-pp2");
  EXPECT_EQ(g.closest[2].candidate.config.layout_text(), "dp8-tp1-pp2");
}

TEST(PlanGuidance, Fp8OnlyWhereTheDeviceHasIt) {
  const MemoryOf halves_in_fp8 = [](const MemoryCandidate& v) -> std::optional<double> {
    return (v.precision == PrecisionName::kFp8 ? 50 : 100) * kGiB;
  };
  const MemoryGuidance with = memory_guidance({candidate(1, 1, 1, 100)}, 80 * kGiB, halves_in_fp8, true);
  ASSERT_TRUE(with.closest.at(0).fits());
  EXPECT_EQ(with.hint, "run with --precisions amp-bf16,fp8");
  const MemoryGuidance without = memory_guidance({candidate(1, 1, 1, 100)}, 80 * kGiB, halves_in_fp8, false);
  EXPECT_FALSE(without.closest.at(0).fits());
}

}  // namespace
}  // namespace itertime::predict
