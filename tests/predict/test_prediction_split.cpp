// test_prediction_split.cpp: the breakdown and the memory split of a prediction add up (issue 33), and a
// described GPU prices fp16 and bf16 alike where its description gives both the same peak.
// The breakdown's parts (on the critical rank, without overhead and factor) sum to split_raw_us, and with
// the overhead's and the factor's shares to total_us, for plain, dp2-tp2, ovl, opg, vp > 1 and cp > 1
// layouts on a described h100-sxm (stages built, communication from the description), on a synthetic
// calibration with a per-call overhead and a factor (dedicated and shared cores), and for the framework
// model; tests/e2e/predict_answers.sh checks the same on a real calibration file.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "common/calibration_records.hpp"
#include "predict/builder/op_builder.hpp"
#include "predict/framework/framework_predictor.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/framework_plan.hpp"
#include "predict/memory/memory_model.hpp"
#include "predict/memory_split.hpp"
#include "predict/predictor.hpp"
#include "predict/resolver/target_device.hpp"
#include "tests/predict/comm_rows.hpp"
#include "tests/predict/fixtures.hpp"

namespace itertime::predict {
namespace {

double parts(const Prediction& p) {
  double sum = p.compute_us + p.tp_comm_us + p.cp_comm_us + p.pp_comm_us + p.bubble_us + p.dp_comm_us + p.optimizer_us;
  for (const auto& [name, us] : p.training_costs_us) sum += us;  // the framework model's training-condition lines
  return sum;
}

// A request for `spec` at `config` in `precision`, plain recipe.
PredictRequest request_of(const LlamaSpec& spec, const ParallelConfig& config, PrecisionName precision) {
  PredictRequest request;
  request.model_name = spec.name;
  request.model = &spec;
  request.config = config;
  request.precision = precision;
  return request;
}

// A described h100-sxm and a resolver on it without a calibration (stages built, every operator timed by
// the operator roofline); resolver is null when the description is missing. Built in place: the resolver
// points into it.
struct DescribedH100 {
  const HardwareChoice choice = choose_hardware(nullptr, "h100-sxm", "");
  const FittedModel empty;
  const std::unique_ptr<StageResolver> resolver =
      choice.target ? std::make_unique<StageResolver>(empty, &*choice.target) : nullptr;
};

struct Layout {
  const char* name;
  int dp, tp, pp, cp, vp, gbs;
  const char* recipe;
};

TEST(PredictionSplit, BreakdownAddsUpToTheIterationOnADescribedGpu) {
  const DescribedH100 h100;
  ASSERT_NE(h100.resolver, nullptr);
  const LlamaSpec spec = fixtures::llama_of("split", 256, 512, 8, 8, 4, 32, 1000);
  for (const Layout& l : {Layout{"plain", 1, 1, 1, 1, 1, 4, ""}, Layout{"dp2-tp2", 2, 2, 1, 1, 1, 8, ""},
                          Layout{"ovl", 2, 1, 1, 1, 1, 8, "ovl"}, Layout{"opg", 2, 1, 2, 1, 1, 8, "dopt+ovl+opg"},
                          Layout{"vp2", 1, 1, 2, 1, 2, 4, ""}, Layout{"vp2-ovl", 2, 1, 2, 1, 2, 8, "ovl"},
                          Layout{"cp2", 1, 1, 1, 2, 1, 4, ""}, Layout{"cp2-tp2-pp2", 2, 2, 2, 2, 1, 8, "sp"}}) {
    // ParallelConfig's fields in order: dp, tp, pp, micro_batch, global_batch, seq_len, cp, vp.
    PredictRequest request =
        request_of(spec, ParallelConfig{l.dp, l.tp, l.pp, 1, l.gbs, 256, l.cp, l.vp}, PrecisionName::kAmpBf16);
    if (std::string(l.recipe) != "") request.techniques = parse_recipe_text(l.recipe);
    const PredictOutcome outcome = predict(*h100.resolver, request);
    ASSERT_TRUE(outcome.ok()) << l.name << ": " << outcome.reason;
    const Prediction& p = *outcome.prediction;
    EXPECT_NEAR(parts(p), p.split_raw_us, 1e-9 * p.total_us) << l.name;
    EXPECT_NEAR(p.split_raw_us + p.overhead_total_us + p.calibration_adjust_us, p.total_us, 1e-9 * p.total_us) << l.name;
    EXPECT_EQ(p.overhead_total_us, 0.0) << l.name;  // a described device: no per-call overhead, no factor
    for (double part : {p.compute_us, p.tp_comm_us, p.cp_comm_us, p.pp_comm_us, p.dp_comm_us, p.optimizer_us}) {
      EXPECT_GE(part, 0.0) << l.name;
    }
    EXPECT_GE(p.bubble_us, -1e-9 * p.total_us) << l.name;
    EXPECT_GT(p.compute_us, 0.0) << l.name;
    if (l.cp > 1) {
      EXPECT_GT(p.cp_comm_us, 0.0) << l.name;
    }
    if (l.pp > 1 && l.gbs / l.dp < 8) {
      EXPECT_GT(p.bubble_us, 0.0) << l.name;
    }
    EXPECT_EQ(p.stages_described, l.pp * l.vp) << l.name;
    EXPECT_TRUE(p.communication_described) << l.name;
  }
}

// A synthetic calibration: every built operator of the fp32 two-stage pipeline regressed at occupancies
// 1 and 2, sends over 2 ranks, and a fitted overhead (3 us per call) and factor (0.8) at occupancy 2.
FittedModel calibrated_pipeline(const LlamaSpec& spec, double rank_slots) {
  FittedModel model;
  model.source_file = "synthetic.h5";
  model.occupancies = {1, 2};
  for (int stage = 0; stage < 2; ++stage) {
    for (const BuiltOp& op : build_stage_ops(spec, 1, 2, stage, 1, 16, PrecisionName::kFp32).ops) {
      for (int64_t occupancy : {1, 2}) {
        model.regressions[{regression_key(op.name, op.input_dtypes), occupancy}] = OpRegression{2.0, 1e-6, 0.0, 3};
      }
    }
  }
  std::vector<store::CommRow> rows = test_rows::synthetic_rows("send", "fp32", 2, "consecutive", 5.0, 1e-4, 1024, 1 << 20);
  model.comm = CommModel(store::to_records(rows));
  model.calibration.per_occupancy[2] = Calibration{3.0, 0.8, 5};
  model.rank_slots = rank_slots;
  model.node_ranks = 2;
  return model;
}

TEST(PredictionSplit, BreakdownAddsUpWithTheFittedOverheadAndFactor) {
  const LlamaSpec spec = load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json");
  for (double slots : {0.0, 1.0}) {  // dedicated cores; two ranks sharing one core (processor sharing)
    const FittedModel model = calibrated_pipeline(spec, slots);
    StageResolver resolver(model, StagePolicy::kBuiltOnly);
    const PredictOutcome outcome = predict(resolver, request_of(spec, ParallelConfig{1, 1, 2, 1, 4, 16}, PrecisionName::kFp32));
    ASSERT_TRUE(outcome.ok()) << outcome.reason;
    const Prediction& p = *outcome.prediction;
    EXPECT_NEAR(parts(p), p.split_raw_us, 1e-9 * p.total_us) << "slots " << slots;
    EXPECT_NEAR(p.split_raw_us + p.overhead_total_us + p.calibration_adjust_us, p.total_us, 1e-9 * p.total_us);
    EXPECT_GT(p.overhead_total_us, 0.0);
    EXPECT_NEAR(p.calibration_adjust_us, -0.2 / 0.8 * p.total_us, 1e-9 * p.total_us);  // x 0.8 took a fifth away
    EXPECT_GT(p.bubble_us, 0.0);
    EXPECT_GT(p.pp_comm_us, 0.0);
    EXPECT_EQ(p.stages_built, 2);
    EXPECT_EQ(p.calibration_rows, 5);
    EXPECT_FALSE(p.communication_described);
  }
}

TEST(PredictionSplit, BreakdownAddsUpForTheFrameworkModel) {
  const framework::FrameworkTarget target = framework_target("h100-sxm");
  const LlamaSpec spec = fixtures::llama_of("split", 1024, 4096, 8, 16, 8, 64, 32000);
  for (const Layout& l : {Layout{"plain", 1, 1, 1, 1, 1, 4, ""}, Layout{"dp2-tp2", 2, 2, 1, 1, 1, 8, "sp"},
                          Layout{"ovl", 2, 1, 2, 1, 1, 8, "dopt+ovl+opg"}, Layout{"vp2", 2, 2, 2, 1, 2, 8, "sp+dopt+ovl+opg"},
                          Layout{"cp2", 1, 2, 1, 2, 1, 4, "sp"}}) {
    framework::FrameworkRequest request;
    request.shape = framework::shape_of(spec);
    request.config = ParallelConfig{l.dp, l.tp, l.pp, 1, l.gbs, 2048};
    request.config.cp = l.cp;
    request.config.vp = l.vp;
    request.recipe.precision = PrecisionName::kAmpBf16;
    if (std::string(l.recipe) != "")
      request.recipe.techniques = at_dp(parse_recipe_text(l.recipe), request.config.reduction_ranks());
    const framework::FrameworkOutcome outcome = framework::predict_framework(target, request);
    ASSERT_TRUE(outcome.ok()) << l.name << ": " << outcome.reason;
    const framework::FrameworkPrediction& f = *outcome.prediction;
    const Prediction p = to_prediction(f);
    EXPECT_NEAR(parts(p), f.total_us, 1e-9 * f.total_us) << l.name;
    EXPECT_GE(p.bubble_us, -1e-9 * f.total_us) << l.name;
    // The memory split adds up to the framework's peak.
    const MemorySplit m = memory_split(framework::megatron_te_peak_memory(request.shape, request.config, request.recipe));
    EXPECT_EQ(m.total_bytes, f.peak_memory_bytes) << l.name;
    EXPECT_EQ(m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.activations_bytes + m.other_bytes, m.total_bytes)
        << l.name;
  }
}

TEST(PredictionSplit, MemorySplitAddsUpToTheUnchangedPeak) {
  const LlamaSpec spec = fixtures::llama_of("split", 256, 512, 8, 8, 4, 32, 1000);
  for (const Layout& l : {Layout{"plain", 1, 1, 1, 1, 1, 4, ""}, Layout{"dp2-tp2", 2, 2, 1, 1, 1, 8, "sp"},
                          Layout{"dopt", 2, 1, 2, 1, 1, 8, "dopt"}, Layout{"opg", 2, 1, 2, 1, 1, 8, "dopt+ovl+opg"},
                          Layout{"vp2", 1, 1, 2, 1, 2, 4, "rc-full"}, Layout{"cp2", 2, 1, 1, 2, 1, 8, "ovl"}}) {
    ParallelConfig c{l.dp, l.tp, l.pp, 1, l.gbs, 256};
    c.cp = l.cp;
    c.vp = l.vp;
    const TrainingTechniques techniques = std::string(l.recipe) != "" ? parse_recipe_text(l.recipe) : TrainingTechniques{};
    for (PrecisionName precision : {PrecisionName::kFp32, PrecisionName::kAmpBf16}) {
      const PrecisionPolicy& policy = precision_policy(precision);
      const int64_t peak = peak_memory_bytes(spec, c, policy, AttentionKernel::kEager, techniques);
      const MemorySplit m = memory_split(peak_memory_breakdown(spec, c, policy, AttentionKernel::kEager, techniques));
      EXPECT_EQ(m.total_bytes, peak) << l.name;
      EXPECT_EQ(m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.activations_bytes + m.other_bytes, peak) << l.name;
      for (int64_t part : {m.weights_bytes, m.gradients_bytes, m.optimizer_bytes, m.activations_bytes, m.other_bytes}) {
        EXPECT_GE(part, 0) << l.name;
      }
    }
  }
}

// With published kernel figures (the default on a GPU) fp16 and bf16 run the same kernels at the same
// peak: the same time. (Issue 33: CPU-fitted efficiencies once made fp16 faster on h100-sxm.)
TEST(PredictionSplit, Fp16AndBf16CostTheSameOnAGpuWithOnePeakForBoth) {
  const DescribedH100 h100;
  ASSERT_NE(h100.resolver, nullptr);
  const LlamaSpec spec = fixtures::llama_of("split", 1024, 4096, 4, 16, 8, 64, 32000);
  const auto total = [&](PrecisionName precision) {
    const PredictOutcome outcome = predict(*h100.resolver, request_of(spec, ParallelConfig{1, 2, 1, 1, 4, 1024}, precision));
    EXPECT_TRUE(outcome.ok()) << outcome.reason;
    return outcome.ok() ? outcome.prediction->total_us : 0.0;
  };
  EXPECT_EQ(total(PrecisionName::kFp16), total(PrecisionName::kBf16));
  EXPECT_EQ(total(PrecisionName::kAmpFp16), total(PrecisionName::kAmpBf16));
}

}  // namespace
}  // namespace itertime::predict
