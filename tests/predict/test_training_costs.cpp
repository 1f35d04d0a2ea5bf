// test_training_costs.cpp: what training costs beyond the kernel figures (predict/framework/
// training_conditions.hpp) and the framework model fitted on logs (framework_fit.hpp, validate/
// published_score.hpp): hand-derived figures of each rule, the shipped files' values, and properties of the
// predictor's new breakdown lines (each >= 0, zero under neutral conditions, adding up, growing with what
// drives them); the fit recovering a known efficiency; the constant-MFU baseline by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "common/errors.hpp"
#include "common/training_techniques.hpp"
#include "fixtures.hpp"
#include "predict/framework/framework_fit.hpp"
#include "predict/framework/framework_predictor.hpp"
#include "predict/framework/training_conditions.hpp"
#include "predict/framework_plan.hpp"
#include "validate/published_score.hpp"

namespace itertime::predict {
namespace {

namespace fw = framework;

TEST(TrainingCosts, ExpectedMaximumOfNormalDraws) {
  EXPECT_EQ(fw::expected_max_standard_normal(1), 0.0);
  // Exact expected maxima: n = 8: 1.4236; n = 100: 2.5076 (order-statistics tables); Blom within 1 %.
  EXPECT_NEAR(fw::expected_max_standard_normal(8), 1.4236, 0.01 * 1.4236);
  EXPECT_NEAR(fw::expected_max_standard_normal(100), 2.5076, 0.01 * 2.5076);
  double previous = 0.0;
  for (int64_t n : {2, 4, 16, 128, 1024, 16384}) {
    const double z = fw::expected_max_standard_normal(n);
    EXPECT_GT(z, previous) << n;
    previous = z;
  }
}

TEST(TrainingCosts, OverlapBesideComputeByHand) {
  // c = 10, k = 5, slowdown 0.2: f = 1.2, k f = 6 <= c: the kernel is overlapped throughout: exposed
  // c - k f = 4, contention k (f - 1) = 1; the pair ends at 5 + 4 + 1 = 10 = c.
  fw::OverlapCost o = fw::overlap_beside_compute(10, 5, 0.2);
  EXPECT_NEAR(o.exposed_us, 4.0, 1e-12);
  EXPECT_NEAR(o.contention_us, 1.0, 1e-12);
  // c = 3 < k f: nothing exposed, the kernel loses c (1 - 1/f) = 3 / 6 = 0.5.
  o = fw::overlap_beside_compute(3, 5, 0.2);
  EXPECT_NEAR(o.exposed_us, 0.0, 1e-12);
  EXPECT_NEAR(o.contention_us, 0.5, 1e-12);
  // Continuous at c = k f = 6: both forms give contention 1.
  EXPECT_NEAR(fw::overlap_beside_compute(6, 5, 0.2).contention_us, 1.0, 1e-12);
  // Without slowdown, the old rule: max(0, c - k), no contention.
  EXPECT_NEAR(fw::overlap_beside_compute(10, 5, 0).exposed_us, 5.0, 1e-12);
  EXPECT_NEAR(fw::overlap_beside_compute(3, 5, 0).exposed_us, 0.0, 1e-12);
  EXPECT_NEAR(fw::overlap_beside_compute(3, 5, 0).contention_us, 0.0, 1e-12);
}

TEST(TrainingCosts, ShippedH100Conditions) {
  const fw::FrameworkTarget target = framework_target("h100-sxm");
  const fw::TrainingConditions& c = target.conditions;
  ASSERT_FALSE(c.is_neutral());
  EXPECT_DOUBLE_EQ(c.sustained_clock_fraction, 0.9924);  // 1965 / 1980 MHz
  EXPECT_DOUBLE_EQ(c.overlap_compute_slowdown, 0.189);
  EXPECT_EQ(c.tp_overlap_sms, 16);
  EXPECT_EQ(c.sm_count, 132);
  EXPECT_NEAR(c.userbuffers_slowdown(), 132.0 / 116.0 - 1.0, 1e-12);  // 0.1379
  EXPECT_DOUBLE_EQ(c.host_us_per_kernel, 13.48);
  EXPECT_DOUBLE_EQ(c.gpu_speed_sigma, 0.01756);
  EXPECT_NEAR(c.straggler_slowdown(8), 0.01756 * fw::expected_max_standard_normal(8), 1e-15);
  EXPECT_EQ(c.straggler_slowdown(1), 0.0);
  for (const char* term :
       {"sustained_clock", "overlap_compute_slowdown", "tp_overlap_sms", "host_us_per_kernel", "gpu_speed_sigma"})
    EXPECT_FALSE(c.sources.at(term).empty()) << term;
  // Every GPU with kernel figures has its training conditions.
  for (const char* gpu : {"a100-sxm-80gb", "h200-sxm", "b200", "gb200-nvl72"})
    EXPECT_FALSE(framework_target(gpu).conditions.is_neutral()) << gpu;
}

TEST(TrainingCosts, ABadConditionsFileIsOneLineNamingTheField) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "itertime_training_conditions_test";
  std::filesystem::create_directories(dir);
  const HardwareSpec h100 = framework_target("h100-sxm").hardware;
  std::ifstream shipped(std::string(ITERTIME_SOURCE_DIR) + "/data/training/h100-sxm.json");
  std::string text((std::istreambuf_iterator<char>(shipped)), std::istreambuf_iterator<char>());
  const std::string bad = std::regex_replace(text, std::regex("\"value\": 0.9924"), "\"value\": 1.3");
  std::ofstream(dir / "h100-sxm.json") << bad;
  const std::string error = fixtures::user_error_of([&] { fw::load_training_conditions(h100, dir.string()); });
  EXPECT_NE(error.find("sustained_clock.value"), std::string::npos) << error;
  std::filesystem::remove(dir / "h100-sxm.json");
  EXPECT_TRUE(fw::load_training_conditions(h100, dir.string()).is_neutral());  // no file: neutral, said in the notes
  std::filesystem::remove_all(dir);
}

TEST(TrainingCosts, AConditionsFileOfAnotherGpuOrAClockBelowHalfIsRefused) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "itertime_training_conditions_refused";
  std::filesystem::create_directories(dir);
  const HardwareSpec h100 = framework_target("h100-sxm").hardware;
  std::ifstream shipped(std::string(ITERTIME_SOURCE_DIR) + "/data/training/h100-sxm.json");
  const std::string text((std::istreambuf_iterator<char>(shipped)), std::istreambuf_iterator<char>());
  // Another GPU's conditions under this GPU's name: refused, naming both.
  std::ofstream(dir / "h100-sxm.json") << std::regex_replace(text, std::regex("\"name\": \"h100-sxm\""),
                                                             "\"name\": \"h200-sxm\"");
  std::string error = fixtures::user_error_of([&] { fw::load_training_conditions(h100, dir.string()); });
  EXPECT_NE(error.find("'h200-sxm' differs from the hardware description's name 'h100-sxm'"), std::string::npos) << error;
  // A sustained clock of 0.3 (below the 0.5 bound: no datacenter GPU trains at a third of its boost clock).
  std::ofstream(dir / "h100-sxm.json") << std::regex_replace(text, std::regex("\"value\": 0.9924"), "\"value\": 0.3");
  error = fixtures::user_error_of([&] { fw::load_training_conditions(h100, dir.string()); });
  EXPECT_NE(error.find("sustained_clock.value"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

fw::FrameworkRequest request_of(const LlamaSpec& spec, int dp, int tp, int pp, int vp, int gbs, const char* recipe) {
  fw::FrameworkRequest request;
  request.shape = fw::shape_of(spec);
  request.config = ParallelConfig{dp, tp, pp, 1, gbs, 2048};
  request.config.vp = vp;
  request.recipe.precision = PrecisionName::kAmpBf16;
  if (std::string(recipe) != "") request.recipe.techniques = at_dp(parse_recipe_text(recipe), request.config.reduction_ranks());
  request.recipe.tp_comm_overlap = request.recipe.techniques.sequence_parallel;
  return request;
}

double lines(const fw::FrameworkPrediction& p) {
  return p.compute_us + p.clock_us + p.contention_us + p.tp_comm_us + p.cp_comm_us + p.pp_comm_us + p.bubble_us + p.dp_comm_us +
         p.sync_us + p.host_us + p.optimizer_us + p.straggler_us;
}

const LlamaSpec kSpec = fixtures::llama_of("costs", 1024, 4096, 8, 16, 8, 64, 32000);

TEST(TrainingCosts, LinesAreZeroUnderNeutralConditionsAndAddUpUnderTraining) {
  fw::FrameworkTarget training = framework_target("h100-sxm");
  fw::FrameworkTarget neutral = training;
  neutral.conditions = fw::TrainingConditions::neutral();
  for (const fw::FrameworkRequest& request :
       {request_of(kSpec, 4, 2, 1, 1, 32, "sp+dopt+ovl+opg"), request_of(kSpec, 2, 2, 2, 2, 16, "sp+dopt+ovl+opg"),
        request_of(kSpec, 2, 1, 2, 1, 16, "dopt+ovl")}) {
    const fw::FrameworkOutcome n = fw::predict_framework(neutral, request);
    const fw::FrameworkOutcome t = fw::predict_framework(training, request);
    ASSERT_TRUE(n.ok() && t.ok()) << n.reason << t.reason;
    EXPECT_EQ(n.prediction->clock_us, 0.0);
    EXPECT_EQ(n.prediction->contention_us, 0.0);
    EXPECT_EQ(n.prediction->host_us, 0.0);
    EXPECT_EQ(n.prediction->straggler_us, 0.0);
    for (const fw::FrameworkPrediction* p : {&*n.prediction, &*t.prediction}) {
      EXPECT_NEAR(lines(*p), p->total_us, 1e-9 * p->total_us) << request.config.to_string();
      for (double part : {p->clock_us, p->contention_us, p->sync_us, p->host_us, p->straggler_us, p->bubble_us})
        EXPECT_GE(part, -1e-9 * p->total_us) << request.config.to_string();
    }
    EXPECT_GT(t.prediction->clock_us, 0.0);
    EXPECT_GT(t.prediction->contention_us, 0.0);  // SP gathers / scatters and the DP reduction run beside compute
    EXPECT_GT(t.prediction->straggler_us, 0.0);
    EXPECT_GT(t.prediction->total_us, n.prediction->total_us) << request.config.to_string();
  }
}

TEST(TrainingCosts, ASlowerClockIsSlowerComputeKernels) {
  // Clock 0.5 doubles every GEMM and attention kernel (memory-bound ones follow HBM): the same as fitted
  // time scales of 2 on both, with the difference in the clock line instead of compute.
  fw::FrameworkTarget base = framework_target("h100-sxm");
  base.conditions = fw::TrainingConditions::neutral();
  fw::FrameworkTarget clocked = base;
  clocked.conditions.sustained_clock_fraction = 0.5;
  fw::FrameworkTarget scaled = base;
  scaled.terms.gemm16_time_scale = 2.0;
  scaled.terms.attention_time_scale = 2.0;
  const fw::FrameworkRequest request = request_of(kSpec, 1, 1, 1, 1, 4, "");
  const fw::FrameworkPrediction c = *fw::predict_framework(clocked, request).prediction;
  const fw::FrameworkPrediction s = *fw::predict_framework(scaled, request).prediction;
  const fw::FrameworkPrediction b = *fw::predict_framework(base, request).prediction;
  EXPECT_NEAR(c.total_us, s.total_us, 1e-9 * s.total_us);
  EXPECT_NEAR(c.compute_us, b.compute_us, 1e-9 * b.compute_us);
  EXPECT_GT(c.clock_us, 0.3 * b.compute_us);  // GEMMs and attention are most of a layer's time
  EXPECT_NEAR(c.compute_us + c.clock_us, s.compute_us, 1e-9 * s.compute_us);
}

TEST(TrainingCosts, HostBoundIterationsWaitForTheHost) {
  fw::FrameworkTarget target = framework_target("h100-sxm");
  target.conditions = fw::TrainingConditions::neutral();
  const fw::FrameworkRequest request = request_of(kSpec, 1, 1, 1, 1, 4, "");
  const fw::FrameworkPrediction fast = *fw::predict_framework(target, request).prediction;
  target.conditions.host_us_per_kernel = 1000.0;  // far slower than the GPU's kernels
  const fw::FrameworkPrediction slow = *fw::predict_framework(target, request).prediction;
  // host = launches x 1000 - the device's timeline, + 2 restarts after the host syncs (loss, gradient norm).
  EXPECT_NEAR(slow.host_us, static_cast<double>(slow.kernel_launches) * 1000.0 - fast.total_us + 2000.0, 1e-6 * slow.total_us);
  EXPECT_NEAR(slow.total_us, static_cast<double>(slow.kernel_launches) * 1000.0 + 2000.0, 1e-6 * slow.total_us);
}

TEST(TrainingCosts, TheSlowestGpuCostsMoreOnMoreGpus) {
  const fw::FrameworkTarget target = framework_target("h100-sxm");
  const fw::FrameworkPrediction few = *fw::predict_framework(target, request_of(kSpec, 2, 1, 1, 1, 64, "dopt+ovl")).prediction;
  const fw::FrameworkPrediction many =
      *fw::predict_framework(target, request_of(kSpec, 64, 1, 1, 1, 64 * 32, "dopt+ovl")).prediction;
  // Same per-GPU work (32 micro-batches each): the straggler share grows as E[max of N normals] does.
  const double few_share = few.straggler_us / (few.compute_us + few.clock_us + few.contention_us);
  const double many_share = many.straggler_us / (many.compute_us + many.clock_us + many.contention_us);
  EXPECT_GT(many_share, few_share);
  EXPECT_NEAR(many_share / few_share, fw::expected_max_standard_normal(64) / fw::expected_max_standard_normal(2), 0.05);
}

TEST(TrainingCosts, OneFOneBSendsBlockAndInterleavedOnesOverlap) {
  fw::FrameworkTarget target = framework_target("h100-sxm");
  const fw::FrameworkPrediction plain = *fw::predict_framework(target, request_of(kSpec, 1, 1, 2, 1, 8, "")).prediction;
  const fw::FrameworkPrediction interleaved = *fw::predict_framework(target, request_of(kSpec, 1, 1, 2, 2, 8, "")).prediction;
  EXPECT_GT(plain.pp_comm_us, 0.0);
  EXPECT_EQ(interleaved.pp_comm_us, 0.0);
}

TEST(TrainingCosts, TheStragglerCountsEveryGpuOfTheJobNotOnlyTheDataParallelOnes) {
  // dp 2 x tp 2 and dp 4 x tp 2, 8 micro-batches a rank, no overlap or sharded optimizer: the critical
  // rank's kernels are the same, so the straggler lines differ only by E[max of N normals] over the job's
  // 4 and 8 GPUs (not over its 2 and 4 data-parallel ranks).
  const fw::FrameworkTarget target = framework_target("h100-sxm");
  const fw::FrameworkPrediction four = *fw::predict_framework(target, request_of(kSpec, 2, 2, 1, 1, 16, "")).prediction;
  const fw::FrameworkPrediction eight = *fw::predict_framework(target, request_of(kSpec, 4, 2, 1, 1, 32, "")).prediction;
  ASSERT_GT(four.straggler_us, 0.0);
  EXPECT_NEAR(eight.straggler_us / four.straggler_us, fw::expected_max_standard_normal(8) / fw::expected_max_standard_normal(4),
              1e-9);
}

TEST(TrainingCosts, ContentionBesideAnOverlappedReductionIsItsTimeTimesOneMinusOneOverF) {
  // The DP reduction overlapped with the backward (ovl, no SP, no sharded optimizer): the compute loses
  // overlapped x (1 - 1 / f), f = 1 + slowdown: 1/5 of it at slowdown 0.25, 1/2 at slowdown 1, a ratio of 2.5.
  // The overlapped time itself does not depend on the slowdown (the passes' timeline does not).
  fw::FrameworkTarget target = framework_target("h100-sxm");
  target.conditions = fw::TrainingConditions::neutral();
  const fw::FrameworkRequest request = request_of(kSpec, 4, 1, 1, 1, 32, "ovl");
  target.conditions.overlap_compute_slowdown = 0.25;
  const fw::FrameworkPrediction quarter = *fw::predict_framework(target, request).prediction;
  target.conditions.overlap_compute_slowdown = 1.0;
  const fw::FrameworkPrediction one = *fw::predict_framework(target, request).prediction;
  ASSERT_GT(quarter.contention_us, 0.0);
  EXPECT_NEAR(one.contention_us / quarter.contention_us, 2.5, 1e-9);
}

// Rows of three models whose "measured" times are the predictions with GEMMs 25 % slower (efficiency 0.8).
std::vector<fw::FrameworkObservation> synthetic_rows(const fw::FrameworkTarget& described) {
  fw::FrameworkTarget truth = described;
  truth.terms.gemm16_time_scale = 1.25;
  std::vector<fw::FrameworkObservation> rows;
  int k = 0;
  for (const LlamaSpec& spec :
       {fixtures::llama_of("m1", 1024, 4096, 8, 16, 8, 64, 32000), fixtures::llama_of("m2", 2048, 8192, 8, 16, 8, 128, 32000),
        fixtures::llama_of("m3", 1536, 6144, 12, 12, 4, 128, 32000)}) {
    for (int dp : {1, 4}) {
      fw::FrameworkObservation o;
      o.id = "row" + std::to_string(k++);
      o.model = spec.name;
      o.request = request_of(spec, dp, 2, 1, 1, dp * 8, "sp+dopt+ovl+opg");
      o.measured_us = fw::predict_observation(truth, o);
      rows.push_back(o);
    }
  }
  return rows;
}

TEST(FrameworkFit, RecoversAKnownGemmEfficiency) {
  const fw::FrameworkTarget described = framework_target("h100-sxm");
  const std::vector<fw::FrameworkObservation> rows = synthetic_rows(described);
  const fw::FrameworkFit fit = fw::fit_framework_terms(described, rows);
  ASSERT_EQ(fit.table.size(), 6u);
  EXPECT_EQ(fit.table[0].name, "gemm16_efficiency");
  EXPECT_NEAR(fit.table[0].fitted, 0.8, 0.03);
  EXPECT_LT(fit.table[0].moved_sigmas, -0.5);   // pulled down from its described 1 by the rows
  EXPECT_NEAR(fit.table[1].fitted, 1.0, 1e-3);  // no fp8 row: the fp8 efficiency stays described
  EXPECT_LT(fit.rms_log_error_fitted, 0.01);
  EXPECT_GT(fit.rms_log_error_described, 0.1);
  // Leave-one-model-out: each model predicted from the two others' fit.
  std::map<std::string, validate::GpuRows> groups;
  validate::GpuRows& group = groups["h100-sxm"];
  group.target = described;
  group.rows = rows;
  for (size_t i = 0; i < rows.size(); ++i) group.index.push_back(i);
  const std::vector<double> held_out = validate::fitted_leave_one_model_out(groups, rows.size());
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(held_out[i] * 1e6 / rows[i].measured_us, 1.0, 0.03) << rows[i].id;
}

TEST(FrameworkFit, NoRowsIsTheDescribedModelAndTheFileRoundTrips) {
  const fw::FrameworkTarget described = framework_target("h100-sxm");
  const fw::FrameworkFit none = fw::fit_framework_terms(described, {});
  for (const fw::FittedTerm& t : none.table) EXPECT_NEAR(t.fitted, t.described, 1e-12) << t.name;
  fw::FrameworkFit fit = fw::fit_framework_terms(described, synthetic_rows(described));
  fit.lomo_mape_pct = 1.5;
  fit.lomo_rows = 6;
  fit.models = 3;
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "itertime_terms_test.json";
  std::ofstream(file) << fw::write_fitted_terms_json(fit);
  const fw::FrameworkFit back = fw::read_fitted_terms(file.string(), "h100-sxm");
  EXPECT_NEAR(back.terms.gemm16_time_scale, fit.terms.gemm16_time_scale, 1e-9);
  EXPECT_NEAR(back.terms.comm_time_scale, fit.terms.comm_time_scale, 1e-9);
  EXPECT_NEAR(back.terms.overlap_compute_slowdown, fit.terms.overlap_compute_slowdown, 1e-12);
  EXPECT_DOUBLE_EQ(back.lomo_mape_pct, 1.5);
  EXPECT_EQ(back.models, 3);
  const std::string error = fixtures::user_error_of([&] { fw::read_fitted_terms(file.string(), "b200"); });
  EXPECT_NE(error.find("fitted on h100-sxm, not b200"), std::string::npos) << error;
  std::filesystem::remove(file);
}

TEST(FrameworkFit, ARowOnAmdHostsIsPredictedWithItsNodesTuning) {
  // A row's own host CPU (the NCCL tuning of its nodes) decides its prediction, whatever the target says.
  fw::FrameworkTarget intel = framework_target("h100-sxm");
  intel.tuning.amd_host_cpu = false;
  fw::FrameworkTarget amd = intel;
  amd.tuning.amd_host_cpu = true;
  fw::FrameworkObservation row;
  row.id = "amd";
  row.model = "m1";
  row.request = request_of(kSpec, 16, 2, 1, 1, 16 * 8, "sp+dopt+ovl+opg");  // 32 GPUs: 4 nodes
  row.amd_host_cpu = true;
  const double on_amd = fw::predict_framework(amd, row.request).prediction->total_us;
  const double on_intel = fw::predict_framework(intel, row.request).prediction->total_us;
  ASSERT_NE(on_amd, on_intel);  // the tuning matters for this request
  EXPECT_DOUBLE_EQ(fw::predict_observation(intel, row), on_amd);
  row.amd_host_cpu = false;
  EXPECT_DOUBLE_EQ(fw::predict_observation(amd, row), on_intel);
}

TEST(FrameworkFit, RowsThatDisagreeAreTrustedToTheirOwnScatter) {
  // Each synthetic row twice, measured 10 % above and 10 % below (in ln): no terms bring them closer than
  // ln(1.1) = 0.0953 each, so the first fit's rms is ln(1.1) (the rows' centre is reachable); over 3 %, the
  // fit is redone with the rows' scatter, rms x sqrt(n / (n - p)) = 0.0953 x sqrt(12 / 6) = 0.1348.
  const fw::FrameworkTarget described = framework_target("h100-sxm");
  std::vector<fw::FrameworkObservation> rows;
  for (const fw::FrameworkObservation& row : synthetic_rows(described)) {
    fw::FrameworkObservation above = row, below = row;
    above.id += "+", above.measured_us *= 1.1;
    below.id += "-", below.measured_us /= 1.1;
    rows.push_back(above);
    rows.push_back(below);
  }
  const fw::FrameworkFit fit = fw::fit_framework_terms(described, rows);
  EXPECT_NEAR(fit.step_time_sigma, std::log(1.1) * std::sqrt(2.0), 0.002);
  EXPECT_GE(fit.rms_log_error_fitted, std::log(1.1) - 1e-6);
}

TEST(PublishedScore, ConstantMfuLeaveOneOutByHand) {
  // Every row at MFU 0.5: each is predicted exactly from the others.
  const std::vector<double> same = validate::constant_mfu_leave_one_out({1, 2, 4}, {2, 4, 8});
  const std::vector<double> expected{2, 4, 8};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(same[i], expected[i], 1e-12);
  // Two rows at MFU 1/2 and 1/4: row 0 is predicted at 1 / (1/4) = 4, row 1 at 1 / (1/2) = 2.
  const std::vector<double> two = validate::constant_mfu_leave_one_out({1, 1}, {2, 4});
  EXPECT_NEAR(two[0], 4.0, 1e-12);
  EXPECT_NEAR(two[1], 2.0, 1e-12);
  EXPECT_TRUE(std::isnan(validate::constant_mfu_leave_one_out({1}, {2})[0]));
  validate::ErrorSummary e;
  e.add(2.0, 2.2);
  e.add(4.0, 3.6);
  e.add(1.0, NAN);
  EXPECT_EQ(e.rows, 3);
  EXPECT_EQ(e.predicted, 2);
  EXPECT_NEAR(e.mape(), 10.0, 1e-9);
  EXPECT_NEAR(e.bias(), 0.0, 1e-9);
}

TEST(FrameworkFit, AHandWrittenFileGivesEachTermAndTheFittedError) {
  // Efficiencies e are read as time scales 1 / e, each into its own term; the slowdown as it is.
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "itertime_terms_by_hand.json";
  std::ofstream(file) << R"({"kind": "itertime framework-terms", "framework": "megatron-te", "hardware": "h100-sxm",
    "terms": [{"name": "gemm16_efficiency", "fitted": 0.8}, {"name": "gemm8_efficiency", "fitted": 0.9},
              {"name": "attention_efficiency", "fitted": 0.75}, {"name": "memory_efficiency", "fitted": 1.25},
              {"name": "comm_efficiency", "fitted": 0.5}, {"name": "overlap_compute_slowdown", "fitted": 0.3}],
    "rms_log_error": {"described": 0.12, "fitted": 0.02}, "step_time_sigma": 0.05})";
  const fw::FrameworkFit back = fw::read_fitted_terms(file.string(), "h100-sxm");
  EXPECT_NEAR(back.terms.gemm16_time_scale, 1.25, 1e-12);
  EXPECT_NEAR(back.terms.gemm8_time_scale, 1.0 / 0.9, 1e-12);
  EXPECT_NEAR(back.terms.attention_time_scale, 4.0 / 3.0, 1e-12);
  EXPECT_NEAR(back.terms.memory_time_scale, 0.8, 1e-12);
  EXPECT_NEAR(back.terms.comm_time_scale, 2.0, 1e-12);
  EXPECT_NEAR(back.terms.overlap_compute_slowdown, 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(back.rms_log_error_described, 0.12);
  EXPECT_DOUBLE_EQ(back.rms_log_error_fitted, 0.02);
  EXPECT_DOUBLE_EQ(back.step_time_sigma, 0.05);
  std::filesystem::remove(file);
}

TEST(PublishedScore, IdealSecondsByHand) {
  // ideal = training FLOPs of the iteration / (GPUs x the precision's dense peak): 2 x 2 x 2 = 8 GPUs,
  // 16 sequences of 2048 tokens; bf16 1e15, fp16 0.5e15, fp8 2e15 FLOP/s.
  const fw::TransformerShape shape = fw::shape_of(kSpec);
  const ParallelConfig config{2, 2, 2, 1, 16, 2048};
  HardwareSpec gpu;
  gpu.peak_flops_per_s = {{ComputeDType::kBf16, 1e15}, {ComputeDType::kFp16, 0.5e15}, {ComputeDType::kFp8, 2e15}};
  const double flops = shape.training_flops_per_token(2048) * 16.0 * 2048.0;
  EXPECT_NEAR(validate::ideal_seconds(shape, config, PrecisionName::kAmpBf16, gpu), flops / 8e15, 1e-12 * flops / 8e15);
  EXPECT_NEAR(validate::ideal_seconds(shape, config, PrecisionName::kAmpFp16, gpu), flops / 4e15, 1e-12 * flops / 4e15);
  EXPECT_NEAR(validate::ideal_seconds(shape, config, PrecisionName::kFp8, gpu), flops / 16e15, 1e-12 * flops / 16e15);
  gpu.peak_flops_per_s.erase(ComputeDType::kFp8);
  EXPECT_TRUE(std::isnan(validate::ideal_seconds(shape, config, PrecisionName::kFp8, gpu)));
}

TEST(PublishedScore, OneModelOnAGpuHasNoFittedColumn) {
  // A GPU with rows of a single model: nothing to fit on without that model's own rows, so NaN.
  const fw::FrameworkTarget described = framework_target("h100-sxm");
  std::map<std::string, validate::GpuRows> groups;
  validate::GpuRows& group = groups["h100-sxm"];
  group.target = described;
  for (const fw::FrameworkObservation& row : synthetic_rows(described))
    if (row.model == "m1") group.index.push_back(group.rows.size()), group.rows.push_back(row);
  ASSERT_EQ(group.rows.size(), 2u);
  const std::vector<double> held_out = validate::fitted_leave_one_model_out(groups, 2);
  for (double s : held_out) EXPECT_TRUE(std::isnan(s)) << s;
}

}  // namespace
}  // namespace itertime::predict
