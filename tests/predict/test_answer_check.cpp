// test_answer_check.cpp: predict/answer_check (issue 33): each finding, its threshold and order, and the
// facts read from a fitted model and a layout.
#include <gtest/gtest.h>

#include "predict/answer_check.hpp"
#include "tests/predict/fixtures.hpp"

namespace itertime::predict {
namespace {

std::vector<std::string> codes(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const Finding& f : findings) out.push_back(f.code);
  return out;
}

AnswerFacts plausible() {
  AnswerFacts f;
  f.mfu = 0.45;
  f.operators = 300;
  f.precision = "fp32";
  f.calibrated_precisions = {"fp32", "amp-bf16"};
  f.extrapolated_fraction = 0.1;
  f.largest_matmul_flops = 4e9;
  f.largest_profiled_flops = 1e9;
  return f;
}

TEST(AnswerCheck, APlausibleAnswerHasNoFinding) { EXPECT_TRUE(check_answer(plausible()).empty()); }

TEST(AnswerCheck, UnknownFactsPass) {
  AnswerFacts f;  // nothing known: no MFU, no calibration, no FLOPs
  f.precision = "fp16";
  f.extrapolated_fraction = 1.0;
  EXPECT_TRUE(check_answer(f).empty());
}

TEST(AnswerCheck, FasterThanThePeakIsRefused) {
  AnswerFacts f = plausible();
  f.mfu = 1.0;  // exactly the peak: possible in principle
  EXPECT_TRUE(check_answer(f).empty());
  f.mfu = 47.4;  // the 70B-on-a-CPU-calibration case of issue 33
  const std::vector<Finding> found = check_answer(f);
  ASSERT_EQ(codes(found), std::vector<std::string>{"faster_than_peak"});
  EXPECT_TRUE(found[0].refuse);
  EXPECT_NE(found[0].message.find("4740 %"), std::string::npos) << found[0].message;
  EXPECT_FALSE(found[0].hint.empty());
}

TEST(AnswerCheck, OperatorsPricedAtZeroRefuseAboveTheirShare) {
  AnswerFacts f = plausible();
  f.operators = 283;
  f.operators_without_time = 242;  // fp16 on a calibration that skipped it
  std::vector<Finding> found = check_answer(f);
  ASSERT_EQ(codes(found), std::vector<std::string>{"operators_without_time"});
  EXPECT_TRUE(found[0].refuse);
  EXPECT_NE(found[0].message.find("242 of 283"), std::string::npos) << found[0].message;
  f.operators = 219;
  f.operators_without_time = 1;  // a recipe's rare operator: shown, not refused
  found = check_answer(f);
  ASSERT_EQ(codes(found), std::vector<std::string>{"operators_without_time"});
  EXPECT_FALSE(found[0].refuse);
  f.operators_without_time = static_cast<int64_t>(kMaxZeroPricedShare * 219) + 1;
  EXPECT_TRUE(check_answer(f)[0].refuse);
}

TEST(AnswerCheck, APrecisionTheCalibrationNeverRanIsRefused) {
  AnswerFacts f = plausible();
  f.precision = "fp16";
  const std::vector<Finding> found = check_answer(f);
  ASSERT_EQ(codes(found), std::vector<std::string>{"precision_not_calibrated"});
  EXPECT_NE(found[0].message.find("amp-bf16, fp32"), std::string::npos) << found[0].message;
  f.blind = true;  // the blind baseline runs the fp32 traces whatever the precision
  EXPECT_TRUE(check_answer(f).empty());
  f.blind = false;
  f.calibrated_precisions.clear();  // a described device: no calibration to have run it
  EXPECT_TRUE(check_answer(f).empty());
}

TEST(AnswerCheck, FarExtrapolationNeedsBothMostTimeFromTheRegressionAndShapesFarBeyond) {
  AnswerFacts f = plausible();
  f.extrapolated_fraction = 0.9;
  f.largest_matmul_flops = kFarShapeReach * f.largest_profiled_flops;  // at the reach limit: passes
  EXPECT_TRUE(check_answer(f).empty());
  f.largest_matmul_flops = 1e6 * f.largest_profiled_flops;
  ASSERT_EQ(codes(check_answer(f)), std::vector<std::string>{"far_extrapolation"});
  f.extrapolated_fraction = kFarExtrapolatedFraction;  // far shapes, but half of the time profiled: passes
  EXPECT_TRUE(check_answer(f).empty());
}

TEST(AnswerCheck, CausesComeBeforeTheSymptom) {
  AnswerFacts f = plausible();
  f.mfu = 47.4;
  f.precision = "fp16";
  f.operators_without_time = 200;
  f.extrapolated_fraction = 1.0;
  f.largest_matmul_flops = 1e15;
  EXPECT_EQ(codes(check_answer(f)), (std::vector<std::string>{"precision_not_calibrated", "operators_without_time",
                                                              "far_extrapolation", "faster_than_peak"}));
}

TEST(AnswerCheck, CalibratedPrecisionsAreTheAwareStageKeys) {
  FittedModel model;
  model.stages["tiny/tp1/pp1/s0/mbs1/seq64/amp-bf16/aware"] = {};
  model.stages["tiny/tp1/pp1/s0/mbs1/seq64/bf16/blind"] = {};
  model.stages["tiny/tp2/pp1/s0/mbs1/seq64/fp32/aware/sp"] = {};
  EXPECT_EQ(calibrated_precisions(model), (std::set<std::string>{"amp-bf16", "fp32"}));
  EXPECT_TRUE(calibrated_precisions(FittedModel{}).empty());
}

TEST(AnswerCheck, LargestProfiledAndMatmulFlops) {
  FittedModel model;
  model.signatures[1].flops = 5.0;
  model.signatures[2].flops = 7.0;
  EXPECT_EQ(largest_profiled_flops(model), 7.0);
  const LlamaSpec spec = fixtures::small_model();  // hidden 64, ffn 128, 4 heads of 16, vocabulary 100
  ParallelConfig c;
  c.seq_len = 32;
  // The MLP's GEMMs are the largest: 2 * 32 tokens * 64 * 128 (the head's 2*32*64*100 below them).
  EXPECT_EQ(largest_matmul_flops(spec, c, {}), 2.0 * 32 * 64 * 128);
  c.tp = 2;  // the MLP over tp (64 columns): the head, whole on every TP rank, is now the largest
  EXPECT_EQ(largest_matmul_flops(spec, c, {}), 2.0 * 32 * 64 * 100);
  TrainingTechniques vocab;
  vocab.vocab_parallel = true;  // the head over tp too (50 rows): the MLP again
  EXPECT_EQ(largest_matmul_flops(spec, c, vocab), 2.0 * 32 * 64 * 64);
}

}  // namespace
}  // namespace itertime::predict
