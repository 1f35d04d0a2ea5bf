// test_predictor.cpp: predict() over a StageResolver: the two stage policies (traced first / built only),
// failures as values with their reason, the resolver's cache, and the calibration fit's record of the
// ground-truth rows it could not predict.
// Invariants: models are synthetic (a built stage with one regression for every operator, a "trace"
// that differs from it on purpose); no file is read but the model configs under data/models.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/model_spec.hpp"
#include "common/ops_store.hpp"
#include "predict/builder/op_builder.hpp"
#include "predict/predictor.hpp"
#include "predict/resolver/stage_resolver.hpp"
#include "tests/predict/comm_rows.hpp"

namespace itertime::predict {
namespace {

LlamaSpec load(const std::string& name) {
  return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/" + name + ".json");
}

const ParallelConfig kSingleRank{1, 1, 1, 1, 4, 16};

// Every operator of the fp32 single-rank stage gets a regression at occupancy 1; the stage's "trace"
// holds one signature only (3 forward calls of 5 us) and a DP all-reduce, so traced and built predictions differ.
FittedModel model_with_trace(const LlamaSpec& spec) {
  FittedModel model;
  model.source_file = "synthetic.h5";
  model.occupancies = {1};
  const BuiltStage built = build_stage_ops(spec, 1, 1, 0, 1, 16, PrecisionName::kFp32);
  for (const BuiltOp& op : built.ops) {
    model.regressions[{regression_key(op.name, op.input_dtypes), 1}] = OpRegression{1.0, 1e-6, 0.0, 3};
  }
  model.signatures[0] = OpInfo{"aten::traced", "aten::traced()", "fp32", "fp32", 1.0, 1.0};
  model.signature_ids["aten::traced()"] = 0;
  model.op_time_us[{0, 1}] = 5.0;
  StageOps trace;
  trace.sequence = {SequenceEntry{Phase::kForward, 0, 3}};
  trace.comms = {CommOp{Phase::kDpBuffer, CommKind::kDpAllReduce, DType::kFloat32, 4096, 1}};  // costs 0 at dp 1
  model.stages[store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware")] = trace;
  return model;
}

PredictRequest request_of(const LlamaSpec& spec, const ParallelConfig& config) {
  PredictRequest request;
  request.model_name = spec.name;
  request.model = &spec;
  request.config = config;
  request.precision = PrecisionName::kFp32;
  request.calibrated = false;
  return request;
}

// A comm model of synthetic tables at 2 ranks (fp32, consecutive group, 1 KiB to 1 MiB): each collective
// takes alpha_us + bytes * us_per_byte (tests/predict/comm_rows.hpp).
struct CommTable {
  std::string collective;
  double alpha_us;
  double us_per_byte;
};
CommModel comm_tables(const std::vector<CommTable>& tables) {
  std::vector<store::CommRow> rows;
  for (const CommTable& table : tables) {
    for (const store::CommRow& row :
         test_rows::synthetic_rows(table.collective, "fp32", 2, "consecutive", table.alpha_us, table.us_per_byte, 1024, 1 << 20))
      rows.push_back(row);
  }
  return CommModel(store::to_records(rows));
}

// model_with_trace's model with a comm model (comm_tables), fitted at `occupancies` too: its traced call
// takes 5 us at each.
FittedModel model_with_comm(const LlamaSpec& spec, const std::vector<CommTable>& tables,
                            const std::vector<int64_t>& occupancies) {
  FittedModel model = model_with_trace(spec);
  model.comm = comm_tables(tables);
  model.occupancies = occupancies;
  for (int64_t occupancy : occupancies) model.op_time_us[{0, occupancy}] = 5.0;
  return model;
}

// A request predicted from the traces only (no model description to build a stage from), with a recipe.
PredictRequest traced_request(const LlamaSpec& spec, const ParallelConfig& config, const TrainingTechniques& techniques = {}) {
  PredictRequest request = request_of(spec, config);
  request.model = nullptr;
  request.techniques = techniques;
  return request;
}

TEST(Predictor, BuiltOnlyIgnoresTracesAndEqualsBuildingUntracedStages) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const FittedModel traced = model_with_trace(spec);
  FittedModel untraced = traced;
  untraced.stages.clear();
  StageResolver traced_first(traced, StagePolicy::kTracedThenBuilt);
  StageResolver built_only(traced, StagePolicy::kBuiltOnly);
  StageResolver untraced_first(untraced, StagePolicy::kTracedThenBuilt);
  const PredictOutcome from_trace = predict(traced_first, request_of(spec, kSingleRank));
  const PredictOutcome from_build = predict(built_only, request_of(spec, kSingleRank));
  const PredictOutcome reference = predict(untraced_first, request_of(spec, kSingleRank));
  ASSERT_TRUE(from_trace.ok()) << from_trace.reason;
  ASSERT_TRUE(from_build.ok()) << from_build.reason;
  ASSERT_TRUE(reference.ok()) << reference.reason;
  EXPECT_DOUBLE_EQ(from_trace.prediction->raw_total_us, 60.0);  // 4 micro-batches x 3 calls x 5 us
  EXPECT_EQ(from_build.prediction->raw_total_us, reference.prediction->raw_total_us);
  EXPECT_GT(from_build.prediction->raw_total_us, 100.0);
  EXPECT_EQ(from_build.prediction->notes, reference.prediction->notes);
  EXPECT_EQ(to_string(StagePolicy::kBuiltOnly), "built-only");
}

// Validation's builder-only score treats the signatures only its own layout profiled as never profiled:
// a resolver told so must predict exactly what a calibration without those profiles predicts.
TEST(Predictor, UnprofiledSignaturesTakeTheRegressionAsIfNeverProfiled) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const FittedModel reference_model = model_with_trace(spec);
  const BuiltOp first = build_stage_ops(spec, 1, 1, 0, 1, 16, PrecisionName::kFp32).ops.front();
  FittedModel profiled = reference_model;
  profiled.signatures[1] = OpInfo{first.name, first.signature, "fp32", "fp32", first.flops, first.bytes};
  profiled.signature_ids[first.signature] = 1;
  profiled.op_time_us[{1, 1}] = 1000.0;
  StageResolver with_profile(profiled, StagePolicy::kBuiltOnly);
  StageResolver without_profile(profiled, StagePolicy::kBuiltOnly, {1});
  StageResolver reference(reference_model, StagePolicy::kBuiltOnly);
  const PredictOutcome a = predict(with_profile, request_of(spec, kSingleRank));
  const PredictOutcome b = predict(without_profile, request_of(spec, kSingleRank));
  const PredictOutcome c = predict(reference, request_of(spec, kSingleRank));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_GT(a.prediction->raw_total_us, c.prediction->raw_total_us + 1000.0);  // the 1000 us profile is used
  EXPECT_EQ(b.prediction->raw_total_us, c.prediction->raw_total_us);
  EXPECT_EQ(b.prediction->extrapolated_fraction, c.prediction->extrapolated_fraction);
}

TEST(Predictor, FailuresAreValuesWithTheirReason) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const FittedModel model = model_with_trace(spec);
  StageResolver traced_first(model);
  StageResolver built_only(model, StagePolicy::kBuiltOnly);

  PredictRequest no_spec = traced_request(spec, ParallelConfig{1, 1, 1, 1, 4, 32});  // seq 32: never traced
  const PredictOutcome untraced = predict(traced_first, no_spec);
  ASSERT_FALSE(untraced.ok());
  EXPECT_NE(untraced.reason.find("no operator trace for stage"), std::string::npos) << untraced.reason;

  PredictRequest traced_no_spec = traced_request(spec, kSingleRank);
  EXPECT_TRUE(predict(traced_first, traced_no_spec).ok());  // traced: no spec needed
  const PredictOutcome needs_spec = predict(built_only, traced_no_spec);
  ASSERT_FALSE(needs_spec.ok());
  EXPECT_NE(needs_spec.reason.find("built-only"), std::string::npos) << needs_spec.reason;

  const PredictOutcome illegal = predict(traced_first, request_of(spec, ParallelConfig{3, 1, 1, 1, 4, 16}));
  ASSERT_FALSE(illegal.ok());
  EXPECT_NE(illegal.reason.find("not legal"), std::string::npos) << illegal.reason;

  // Two DP ranks need the DP all-reduce, and the model has no /comm table at all.
  const PredictOutcome no_comm = predict(traced_first, request_of(spec, ParallelConfig{2, 1, 1, 1, 4, 16}));
  ASSERT_FALSE(no_comm.ok());
  EXPECT_NE(no_comm.reason.find("no usable /comm measurements for all_reduce"), std::string::npos) << no_comm.reason;
}

TEST(Predictor, ResolverBuildsEachStageShapeOnce) {
  const LlamaSpec spec = load("small-llama");
  const FittedModel model = model_with_trace(load("tiny-llama-gqa"));
  FittedModel with_comm = model;
  with_comm.comm = comm_tables({{"send", 5.0, 1e-3}});
  with_comm.occupancies = {3};
  StageResolver resolver(with_comm, StagePolicy::kBuiltOnly);
  const PredictRequest request = request_of(spec, ParallelConfig{1, 1, 3, 1, 4, 16});
  const PredictOutcome first = predict(resolver, request);
  ASSERT_TRUE(first.ok()) << first.reason;
  const std::size_t cached = resolver.cached_stages();
  EXPECT_EQ(cached, 3u);  // first, middle and last stage differ
  const PredictOutcome second = predict(resolver, request);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(resolver.cached_stages(), cached);
  EXPECT_EQ(second.prediction->total_us, first.prediction->total_us);
  EXPECT_EQ(second.prediction->notes, first.prediction->notes);
  // A fresh resolver (no cache) gives the same figures.
  StageResolver fresh(with_comm, StagePolicy::kBuiltOnly);
  EXPECT_EQ(predict(fresh, request).prediction->total_us, first.prediction->total_us);
}

TEST(Predictor, CalibrationFitRecordsTheRowsItCannotPredict) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const FittedModel model = model_with_trace(spec);
  store::GroundTruthRecord traced;
  traced.key = "traced";
  traced.model = spec.name;
  traced.config = kSingleRank;
  traced.precision = PrecisionName::kFp32;
  traced.time_us_median = 30.0;
  store::GroundTruthRecord untraced = traced;
  untraced.key = "untraced";
  untraced.config.seq_len = 32;
  store::GroundTruthRecord skipped = untraced;
  skipped.key = "skipped";
  skipped.status = store::RunStatus::kSkipped;
  StageResolver resolver(model);
  const CalibrationFit fit = fit_calibration(resolver, {traced, untraced, skipped}, /*blind=*/false, {});
  ASSERT_EQ(fit.unpredicted.size(), 1u);  // skipped rows are not candidates
  EXPECT_EQ(fit.unpredicted[0].key, "untraced");
  EXPECT_NE(fit.unpredicted[0].reason.find("no operator trace"), std::string::npos);
  ASSERT_EQ(fit.calibration.per_occupancy.size(), 1u);
  EXPECT_EQ(fit.calibration.per_occupancy.at(1).rows, 1);
  // With the model's description the untraced row is built and joins the fit.
  const CalibrationFit built = fit_calibration(resolver, {traced, untraced}, false, {}, &spec);
  EXPECT_TRUE(built.unpredicted.empty());
  EXPECT_EQ(built.calibration.per_occupancy.at(1).rows, 2);
  // Leaving its tuple out leaves nothing to fit: the identity applies.
  const CalibrationSet none = fit_calibration(resolver, {traced}, false, {"(1,1,1)"}).calibration;
  EXPECT_TRUE(none.per_occupancy.empty());
  EXPECT_EQ(none.source_occupancy(1), -1);
  EXPECT_EQ(none.for_occupancy(1).rows, 0);
  EXPECT_EQ(none.for_occupancy(1).factor, 1.0);
  EXPECT_EQ(none.for_occupancy(1).op_overhead_us, 0.0);
}

// Rows made from the model's own predictions at a known overhead (5 us a call, between two knots) times a
// known factor (1.2): the joint fit finds both (the rows' different call counts per microsecond tell them apart), names
// its terms with their described values, and gives each a standard deviation.
TEST(Predictor, CalibrationFitRecoversAKnownOverheadAndFactor) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const FittedModel model = model_with_trace(spec);
  StageResolver resolver(model);
  std::vector<store::GroundTruthRecord> rows;
  Calibration truth;
  truth.op_overhead_us = 5.0;
  for (const auto& [micro_batch, seq_len] : std::vector<std::pair<int, int>>{{1, 16}, {4, 16}, {4, 32}, {2, 64}}) {
    store::GroundTruthRecord row;
    row.key = "mbs" + std::to_string(micro_batch) + "-seq" + std::to_string(seq_len);
    row.model = spec.name;
    row.config = ParallelConfig{1, 1, 1, micro_batch, 4, seq_len};
    row.precision = PrecisionName::kFp32;
    PredictRequest request = request_for(row, /*blind=*/false, &spec);
    request.override_calibration = &truth;
    const PredictOutcome raw = predict(resolver, request);
    ASSERT_TRUE(raw.ok()) << raw.reason;
    row.time_us_median = 1.2 * raw.prediction->total_us;
    rows.push_back(row);
  }
  const CalibrationFit fit = fit_calibration(resolver, rows, false, {}, &spec);
  ASSERT_TRUE(fit.unpredicted.empty());
  EXPECT_TRUE(fit.converged);
  const Calibration& one = fit.calibration.for_occupancy(1);
  EXPECT_EQ(one.rows, 4);
  EXPECT_NEAR(one.op_overhead_us, 5.0, 0.1);
  EXPECT_NEAR(one.factor, 1.2, 0.01);  // the priors pull a little along what the rows cannot tell apart
  ASSERT_EQ(fit.terms.size(), 3u);     // overhead, shared factor, the one occupancy's contention
  EXPECT_EQ(fit.terms[0].name, "op_overhead_us");
  EXPECT_EQ(fit.terms[1].name, "ln_factor");
  EXPECT_EQ(fit.terms[2].name, "ln_contention@1");
  EXPECT_EQ(fit.terms[0].described, 0.0);
  for (const FittedCalibrationTerm& t : fit.terms) EXPECT_GT(t.sigma, 0.0) << t.name;
  // Every row then predicted within a fraction of a percent.
  for (const store::GroundTruthRecord& row : rows) {
    PredictRequest request = request_for(row, false, &spec);
    request.override_calibration = &one;
    const PredictOutcome p = predict(resolver, request);
    ASSERT_TRUE(p.ok());
    EXPECT_NEAR(p.prediction->total_us / row.time_us_median, 1.0, 0.01) << row.key;
  }
}

// A recipe's stage is its own trace (its key carries recipe_text), never the plain one; a recipe without
// a trace or a spec to build it fails with its key; overlap at dp 1 is the plain stage.
TEST(Predictor, RecipeSelectsItsOwnTraceAndOverlapNeedsDataParallelism) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model = model_with_trace(spec);
  TrainingTechniques recompute;
  recompute.recompute = Recompute::kFull;
  StageOps rerun;
  rerun.sequence = {SequenceEntry{Phase::kForward, 0, 3}, SequenceEntry{Phase::kBackward, 0, 4}};
  model.stages[store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware", recompute)] = rerun;
  StageResolver resolver(model);
  PredictRequest request = traced_request(spec, kSingleRank);                   // traces only
  EXPECT_DOUBLE_EQ(predict(resolver, request).prediction->raw_total_us, 60.0);  // plain: 4 x 3 x 5 us
  request.techniques = recompute;
  const PredictOutcome with_recipe = predict(resolver, request);
  ASSERT_TRUE(with_recipe.ok()) << with_recipe.reason;
  EXPECT_DOUBLE_EQ(with_recipe.prediction->raw_total_us, 140.0);  // 4 x (3 + 4) x 5 us
  request.techniques.sequence_parallel = true;                    // no trace of "sp+rc-full", no spec to build it
  const PredictOutcome untraced = predict(resolver, request);
  ASSERT_FALSE(untraced.ok());
  EXPECT_NE(untraced.reason.find("/sp+rc-full"), std::string::npos) << untraced.reason;

  // Overlap needs dp > 1: at dp 1 the plain stage is predicted.
  PredictRequest single = traced_request(spec, kSingleRank);
  single.techniques.overlap_gradient_reduction = true;
  const PredictOutcome overlapped_alone = predict(resolver, single);
  ASSERT_TRUE(overlapped_alone.ok()) << overlapped_alone.reason;
  EXPECT_DOUBLE_EQ(overlapped_alone.prediction->raw_total_us, 60.0);
}

// Overlapped reduction (hand-derived): the stage's buckets (dp_all_reduce recorded in the backward) start
// as the last backward completes them, after the share of the bucket bytes up to each, and run one after
// another; only what ends after the backward is exposed. All-reduce at dp 2: 10 us + 1e-3 us per byte;
// buckets 4096, 4096, 2048 bytes: ready after 0.4, 0.8 and 1.0 of the last backward, 14.096, 14.096 and
// 12.048 us long. Four micro-batches per replica (gbs 8, dp 2), forward 3 x 5 us, dp_buffer 1 x 5 us.
TEST(Predictor, OverlappedReductionHidesBucketsBehindTheLastBackward) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model = model_with_comm(spec, {{"all_reduce", 10.0, 1e-3}}, {2});
  TrainingTechniques ovl;
  ovl.overlap_gradient_reduction = true;
  const auto stage_with_backward = [](int64_t backward_calls) {
    StageOps stage;
    stage.sequence = {SequenceEntry{Phase::kForward, 0, 3}, SequenceEntry{Phase::kBackward, 0, backward_calls},
                      SequenceEntry{Phase::kDpBuffer, 0, 1}};
    stage.comms = {CommOp{Phase::kBackward, CommKind::kDpAllReduce, DType::kFloat32, 4096, 2},
                   CommOp{Phase::kBackward, CommKind::kDpAllReduce, DType::kFloat32, 2048, 1}};
    return stage;
  };
  const std::string key = store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware", ovl, 2);
  PredictRequest request = traced_request(spec, ParallelConfig{2, 1, 1, 1, 8, 16}, ovl);

  // A short backward (20 us): the last backward runs 120..140 us; buckets ready at 128, 136, 140; the
  // chain ends at 142.096, 156.192, 168.24: 28.24 us exposed, then the 5 us of buffer work.
  model.stages[key] = stage_with_backward(4);
  StageResolver short_backward(model);
  const PredictOutcome exposed = predict(short_backward, request);
  ASSERT_TRUE(exposed.ok()) << exposed.reason;
  EXPECT_NEAR(exposed.prediction->raw_total_us, 140.0 + 28.24 + 5.0, 1e-9);
  EXPECT_NEAR(exposed.prediction->dp_comm_us, 28.24 + 5.0, 1e-9);

  // A long backward (200 us): 660..860 us; ready at 740, 820, 860; the chain ends at 754.096, 834.096,
  // 872.048: only the last bucket is exposed.
  model.stages[key] = stage_with_backward(40);
  StageResolver long_backward(model);
  const PredictOutcome hidden = predict(long_backward, request);
  ASSERT_TRUE(hidden.ok()) << hidden.reason;
  EXPECT_NEAR(hidden.prediction->raw_total_us, 860.0 + 12.048 + 5.0, 1e-9);

  // The same reduction blocking after the pipeline (plain DP, one 10240-byte all-reduce): 20.24 us, all exposed.
  StageOps plain = stage_with_backward(40);
  plain.comms = {CommOp{Phase::kDpBuffer, CommKind::kDpAllReduce, DType::kFloat32, 10240, 1}};
  model.stages[store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware")] = plain;
  StageResolver blocking(model);
  request.techniques = TrainingTechniques{};
  const PredictOutcome after = predict(blocking, request);
  ASSERT_TRUE(after.ok()) << after.reason;
  EXPECT_NEAR(after.prediction->raw_total_us, 860.0 + 5.0 + 20.24, 1e-9);
}

// Interleaved 1F1B (hand-derived): pp 2, vp 2, dp 2, m 2. Chunk c of rank r is stage c*2 + r of a
// 4-stage pipeline, whose traces (keyed pp 4) give forward 5 us, backward 10 us, per iteration 5 us of
// buffer work, a 5 us optimizer call and a DP all-reduce of 4096 bytes; transfers are free.
// Rank 0 (warm-up min(2 + 2, 4) = 4 forwards): F(vs0,0) 0-5, F(vs0,1) 5-10, F(vs2,0) 10-15, F(vs2,1)
// 15-20. Rank 1 (warm-up 2): F(vs1,0) 5-10, F(vs1,1) 10-15, F(vs3,0) 15-20, B(vs3,0) 20-30, F(vs3,1)
// 30-35, B(vs3,1) 35-45. Rank 0: B(vs2,0) 30-40, B(vs2,1) 45-55; rank 1: B(vs1,0) 45-55, B(vs1,1) 55-65;
// rank 0: B(vs0,0) 55-65, B(vs0,1) 65-75. Each rank's tail: its two chunks' buffer work and optimizer
// (2 x (5 + 5) us) and ONE all-reduce of their 8192 bytes (10 + 8.192 us), as the trainer reduces one flat
// buffer: rank 0 ends at 75 + 38.192 us.
TEST(Predictor, InterleavedPipelineRunsTheVirtualStagesAndMergesEachRanksReduction) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model = model_with_comm(spec, {{"all_reduce", 10.0, 1e-3}}, {4});
  StageOps chunk;
  chunk.sequence = {SequenceEntry{Phase::kForward, 0, 1}, SequenceEntry{Phase::kBackward, 0, 2},
                    SequenceEntry{Phase::kDpBuffer, 0, 1}, SequenceEntry{Phase::kOptimizer, 0, 1}};
  chunk.comms = {CommOp{Phase::kDpBuffer, CommKind::kDpAllReduce, DType::kFloat32, 4096, 1}};
  for (int s = 0; s < 4; ++s) model.stages[store::stage_key(spec.name, 1, 4, s, 1, 16, "fp32", "aware")] = chunk;
  StageResolver resolver(model);
  const ParallelConfig config{2, 1, 2, 1, 4, 16, /*cp=*/1, /*vp=*/2};
  PredictRequest request = traced_request(spec, config);
  const PredictOutcome outcome = predict(resolver, request);
  ASSERT_TRUE(outcome.ok()) << outcome.reason;
  EXPECT_NEAR(outcome.prediction->raw_total_us, 75.0 + 2 * (5.0 + 5.0) + 18.192, 1e-9);
  EXPECT_NEAR(outcome.prediction->dp_comm_us, 2 * 5.0 + 18.192, 1e-9);
  EXPECT_EQ(outcome.prediction->stage_forward_us.size(), 4u);  // per virtual stage

  // What Megatron-LM refuses comes back with its reason.
  PredictRequest odd = request;
  odd.config.global_batch = 6;  // m = 3, not a multiple of pp 2
  EXPECT_NE(predict(resolver, odd).reason.find("multiple of pp"), std::string::npos);
}

// Interleaved 1F1B with overlapped reduction (hand-derived), the pipeline of
// InterleavedPipelineRunsTheVirtualStagesAndMergesEachRanksReduction (pp 2, vp 2, dp 2, m 2): each chunk has
// its own bucket, one all-reduce of 4096 bytes (14.096 us) recorded in its virtual stage's backward, ready
// when that chunk's last backward ends; nothing is merged. Rank 0: chunk 1 (vs2) ends its backwards at
// 55: 55 -> 69.096, hidden; chunk 0 (vs0) at 75: 75 -> 89.096: 14.096 exposed. Rank 1: chunk 1 (vs3) at
// 45 -> 59.096, chunk 0 (vs1) at 65 -> 79.096: 14.096. Each rank's tail: 2 x (5 + 5) us. The iteration:
// 75 + 14.096 + 20 = 109.096. Had both chunks' buckets waited for the rank's last backward: 75 -> 89.096
// -> 103.192, 28.192 exposed.
// With dopt+ovl+opg each chunk's all-gather (2048 bytes a rank, 4096 whole: 20 + 8.192 = 28.192 us)
// leaves the tail; no reductions here (the stages record none). Updates end at 75 + 20 = 95 (rank 0) and
// 65 + 20 = 85 (rank 1); the next step starts at 95. Rank 0's chunk 0 first forward would run at 95 (F
// [0, 5]), its chunk 1's at 105 (F [10, 15]): gathers from 95 ready at 123.192 (wait 28.192) and 151.384
// (needed at 105 + 28.192: wait 18.192): 46.384. Rank 1 (chunk 0 at 100, chunk 1 at 110), gathers from 85:
// ready 113.192 (13.192) and 141.384 (needed at 123.192: 18.192): 31.384. The iteration: 95 + 46.384.
// Both waited for before chunk 0's first forward would give 56.384 on rank 0.
TEST(Predictor, InterleavedOverlapStartsEachChunksBucketsInItsLastBackward) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model = model_with_comm(spec, {{"all_reduce", 10.0, 1e-3}, {"all_gather", 20.0, 2e-3}}, {4});
  const TrainingTechniques ovl = parse_recipe_text("ovl");
  const TrainingTechniques opg = parse_recipe_text("dopt+ovl+opg");
  StageOps chunk;
  chunk.sequence = {SequenceEntry{Phase::kForward, 0, 1}, SequenceEntry{Phase::kBackward, 0, 2},
                    SequenceEntry{Phase::kDpBuffer, 0, 1}, SequenceEntry{Phase::kOptimizer, 0, 1}};
  chunk.comms = {CommOp{Phase::kBackward, CommKind::kDpAllReduce, DType::kFloat32, 4096, 1}};
  StageOps gathered = chunk;
  gathered.comms = {CommOp{Phase::kOptimizer, CommKind::kDpAllGather, DType::kFloat32, 2048, 1}};
  for (int s = 0; s < 4; ++s) {
    model.stages[store::stage_key(spec.name, 1, 4, s, 1, 16, "fp32", "aware", ovl, 2)] = chunk;
    model.stages[store::stage_key(spec.name, 1, 4, s, 1, 16, "fp32", "aware", opg, 2)] = gathered;
  }
  StageResolver resolver(model);
  const ParallelConfig config{2, 1, 2, 1, 4, 16, /*cp=*/1, /*vp=*/2};
  PredictRequest request = traced_request(spec, config, ovl);
  const PredictOutcome outcome = predict(resolver, request);
  ASSERT_TRUE(outcome.ok()) << outcome.reason;
  EXPECT_NEAR(outcome.prediction->raw_total_us, 75.0 + 14.096 + 2 * (5.0 + 5.0), 1e-9);
  EXPECT_NEAR(outcome.prediction->dp_comm_us, 2 * 5.0 + 14.096, 1e-9);  // rank 0 (the first of the equally busy)
  request.techniques = opg;
  const PredictOutcome gather = predict(resolver, request);
  ASSERT_TRUE(gather.ok()) << gather.reason;
  EXPECT_NEAR(gather.prediction->raw_total_us, 95.0 + 46.384, 1e-9);
  EXPECT_NEAR(gather.prediction->dp_comm_us, 2 * 5.0 + 46.384, 1e-9);
}

// Context parallelism (hand-derived): cp 2, dp 1 (2 ranks), m 4. The stage keyed /cp2 records per
// micro-batch 2 key/value gathers of 1024 bytes (one rank's part) forward and their 2 reduce-scatters
// backward, timed at the whole 2048-byte buffer at the CP group: all-gather 20 + 2e-3 us/B = 24.096 us,
// reduce-scatter 10 + 1e-3 us/B = 12.048 us. Forward 3 x 5 + 2 x 24.096 = 63.192 us, backward 4 x 5 +
// 2 x 12.048 = 44.096 us, 4 micro-batches: 429.152 us. The gradients are reduced over dp*cp = 2 ranks:
// the buffer work (5 us) and the all-reduce of 4096 bytes (10 + 4.096 us) follow.
TEST(Predictor, ContextParallelGathersRunInsideThePassesAndGradientsReduceOverDpTimesCp) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model =
      model_with_comm(spec, {{"all_gather", 20.0, 2e-3}, {"reduce_scatter", 10.0, 1e-3}, {"all_reduce", 10.0, 1e-3}}, {2});
  StageOps stage;
  stage.sequence = {SequenceEntry{Phase::kForward, 0, 3}, SequenceEntry{Phase::kBackward, 0, 4},
                    SequenceEntry{Phase::kDpBuffer, 0, 1}};
  stage.comms = {CommOp{Phase::kForward, CommKind::kCpAllGather, DType::kFloat32, 1024, 2},
                 CommOp{Phase::kBackward, CommKind::kCpReduceScatter, DType::kFloat32, 1024, 2},
                 CommOp{Phase::kDpBuffer, CommKind::kDpAllReduce, DType::kFloat32, 4096, 1}};
  model.stages[store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware", {}, 2, 2)] = stage;
  StageResolver resolver(model);
  const ParallelConfig config{1, 1, 1, 1, 4, 16, /*cp=*/2};
  PredictRequest request = traced_request(spec, config);
  const PredictOutcome outcome = predict(resolver, request);
  ASSERT_TRUE(outcome.ok()) << outcome.reason;
  EXPECT_NEAR(outcome.prediction->raw_total_us, 429.152 + 5.0 + 14.096, 1e-9);
  EXPECT_NEAR(outcome.prediction->cp_comm_us, 4 * (2 * 24.096 + 2 * 12.048), 1e-9);
  EXPECT_NEAR(outcome.prediction->dp_comm_us, 5.0 + 14.096, 1e-9);
  // cp 4 has no /cp4 trace (and no model to build from): the reason names the key.
  request.config.cp = 4;
  const std::string reason = predict(resolver, request).reason;
  EXPECT_NE(reason.find("no operator trace"), std::string::npos) << reason;
  EXPECT_NE(reason.find("/cp4"), std::string::npos) << reason;
  PredictRequest odd = request_of(spec, config);
  odd.config.seq_len = 18;  // not a multiple of 2*cp
  EXPECT_NE(predict(resolver, odd).reason.find("divisible by 2*cp"), std::string::npos);
}

// The distributed optimizer with overlapped reduction (hand-derived): its buckets' reduce-scatters
// (dp_reduce_scatter recorded in the backward, one rank's part) chain behind the last backward like
// all-reduce buckets, timed at the whole bucket; its all-gathers stay after the optimizer. At dp 2:
// reduce-scatter 10 us + 1e-3 us per byte, all-gather 20 us + 2e-3 us per byte. Two buckets of 4096 bytes
// (2048 per rank): ready after 0.5 and 1.0 of the last backward (120..140 us: at 130 and 140), 14.096 us
// each: the chain ends at 144.096 and 158.192, 18.192 us exposed. Then dp_buffer 5 us, the optimizer
// 5 us and two all-gathers of 4096 bytes, 28.192 us each.
TEST(Predictor, DistributedOptimizerWithOverlapChainsItsReduceScatters) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model = model_with_comm(spec, {{"reduce_scatter", 10.0, 1e-3}, {"all_gather", 20.0, 2e-3}}, {2});
  const TrainingTechniques both = parse_recipe_text("dopt+ovl");
  StageOps stage;
  stage.sequence = {SequenceEntry{Phase::kForward, 0, 3}, SequenceEntry{Phase::kBackward, 0, 4},
                    SequenceEntry{Phase::kDpBuffer, 0, 1}, SequenceEntry{Phase::kOptimizer, 0, 1}};
  stage.comms = {CommOp{Phase::kBackward, CommKind::kDpReduceScatter, DType::kFloat32, 2048, 2},
                 CommOp{Phase::kOptimizer, CommKind::kDpAllGather, DType::kFloat32, 2048, 2}};
  model.stages[store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware", both, 2)] = stage;
  StageResolver resolver(model);
  PredictRequest request = traced_request(spec, ParallelConfig{2, 1, 1, 1, 8, 16}, both);
  const PredictOutcome outcome = predict(resolver, request);
  ASSERT_TRUE(outcome.ok()) << outcome.reason;
  EXPECT_NEAR(outcome.prediction->raw_total_us, 140.0 + 18.192 + 5.0 + 5.0 + 2 * 28.192, 1e-9);
  EXPECT_NEAR(outcome.prediction->dp_comm_us, 18.192 + 5.0 + 2 * 28.192, 1e-9);
  EXPECT_NEAR(outcome.prediction->optimizer_us, 5.0, 1e-9);
}

// Overlapped parameter gather (dopt+ovl+opg, hand-derived): the stage's all-gathers leave the tail and run
// from its update's end, in the order recorded (the next forward's), delaying the next step's first forward.
// dp 2, 4 micro-batches, forward 3 x 5 us, backward 4 x 5 us, dp_buffer 5 us, optimizer 5 us per stage;
// all-gather 20 us + 2e-3 us per byte of the whole buffer (dp x the recorded slice).
//  - pp 1, reduce-scatters as in DistributedOptimizerWithOverlapChainsItsReduceScatters (18.192 us
//    exposed): the update ends at 140 + 18.192 + 5 + 5 = 168.192, the next step starts there. Gathers
//    of 1,024 then 3,072 bytes per rank: 2,048 bytes whole, 24.096 us, then 6,144, 32.288 us; the second
//    bucket's first parameter lies after 1,024 / 4,096 = 0.25 of the bytes, reached 0.25 x 15 = 3.75 us
//    into the forward. Ready at +24.096 (needed at +0: 24.096) and +56.384 (needed at +3.75: 52.634): the
//    iteration is 168.192 + 52.634 = 220.826, and dp_comm 18.192 + 5 + 52.634. Recorded the other way
//    round (3,072 first) the wait would be 32.288 and 56.384 - 11.25 = 45.134.
//  - pp 2, no reduce-scatters, no transfer time: 1F1B gives stage 0 F0 [0,15] ... B3 [155,175], stage 1
//    F0 [15,30] ... B3 [135,155]; updates end at 185 and 165; the next step starts at 185. Stage 0 as
//    above (52.634). Stage 1 gathers two buckets of 8,192 bytes per rank (16,384 whole, 52.768 us each,
//    the second after half the bytes) from 165: ready 217.768 and 270.536; its next first forward would
//    start at 185 + 15 = 200: needed at 200 and 207.5: waits 17.768 and 63.036. The iteration is
//    185 + 63.036 = 248.036 (dp_comm on stage 0, the first of the equally busy: 5 + 63.036). Without
//    opg (dopt+ovl) the all-gathers are in the tail: max(175 + 10 + 56.384, 155 + 10 + 105.536) = 270.536.
TEST(Predictor, OverlappedParameterGatherDelaysTheNextFirstForward) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model = model_with_comm(spec, {{"reduce_scatter", 10.0, 1e-3}, {"all_gather", 20.0, 2e-3}}, {2, 4});
  const TrainingTechniques opg = parse_recipe_text("dopt+ovl+opg");
  const TrainingTechniques ovl = parse_recipe_text("dopt+ovl");
  const std::vector<SequenceEntry> sequence = {SequenceEntry{Phase::kForward, 0, 3}, SequenceEntry{Phase::kBackward, 0, 4},
                                               SequenceEntry{Phase::kDpBuffer, 0, 1}, SequenceEntry{Phase::kOptimizer, 0, 1}};
  StageOps single;
  single.sequence = sequence;
  single.comms = {CommOp{Phase::kBackward, CommKind::kDpReduceScatter, DType::kFloat32, 2048, 2},
                  CommOp{Phase::kOptimizer, CommKind::kDpAllGather, DType::kFloat32, 1024, 1},
                  CommOp{Phase::kOptimizer, CommKind::kDpAllGather, DType::kFloat32, 3072, 1}};
  model.stages[store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware", opg, 2)] = single;
  StageOps reversed = single;
  std::swap(reversed.comms[1], reversed.comms[2]);
  StageOps first;
  first.sequence = sequence;
  first.comms = {single.comms[1], single.comms[2]};
  StageOps last;
  last.sequence = sequence;
  last.comms = {CommOp{Phase::kOptimizer, CommKind::kDpAllGather, DType::kFloat32, 8192, 2}};
  for (const TrainingTechniques& t : {opg, ovl}) {
    model.stages[store::stage_key(spec.name, 1, 2, 0, 1, 16, "fp32", "aware", t, 2)] = first;
    model.stages[store::stage_key(spec.name, 1, 2, 1, 1, 16, "fp32", "aware", t, 2)] = last;
  }
  const ParallelConfig dp2{2, 1, 1, 1, 8, 16};
  StageResolver recorded_order(model);
  const PredictOutcome outcome = predict(recorded_order, traced_request(spec, dp2, opg));
  ASSERT_TRUE(outcome.ok()) << outcome.reason;
  EXPECT_NEAR(outcome.prediction->raw_total_us, 168.192 + 52.634, 1e-9);
  EXPECT_NEAR(outcome.prediction->dp_comm_us, 18.192 + 5.0 + 52.634, 1e-9);
  EXPECT_NEAR(outcome.prediction->optimizer_us, 5.0, 1e-9);
  model.stages[store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware", opg, 2)] = reversed;
  StageResolver other_order(model);
  const PredictOutcome reversed_outcome = predict(other_order, traced_request(spec, dp2, opg));
  ASSERT_TRUE(reversed_outcome.ok()) << reversed_outcome.reason;
  EXPECT_NEAR(reversed_outcome.prediction->raw_total_us, 168.192 + 45.134, 1e-9);
  StageResolver resolver(model);
  PredictRequest request = traced_request(spec, ParallelConfig{2, 1, 2, 1, 8, 16}, opg);
  const PredictOutcome pipelined = predict(resolver, request);
  ASSERT_TRUE(pipelined.ok()) << pipelined.reason;
  EXPECT_NEAR(pipelined.prediction->raw_total_us, 185.0 + 63.036, 1e-9);
  EXPECT_NEAR(pipelined.prediction->dp_comm_us, 5.0 + 63.036, 1e-9);
  request.techniques = ovl;
  const PredictOutcome in_tail = predict(resolver, request);
  ASSERT_TRUE(in_tail.ok()) << in_tail.reason;
  EXPECT_NEAR(in_tail.prediction->raw_total_us, 270.536, 1e-9);
}

// The distributed optimizer's stage is keyed by dp; its DP reduce-scatter and all-gather are recorded as one
// rank's shard and timed at the whole buffer from their own tables at the DP group, once per iteration
// after the pipeline; its DP gradient-buffer phase runs at dp 1 too (the trainer shards over one rank).
TEST(Predictor, DistributedOptimizerIsTimedFromItsStageAtItsDp) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model = model_with_comm(spec, {{"reduce_scatter", 10.0, 1e-3}, {"all_gather", 20.0, 2e-3}}, {1, 2});
  TrainingTechniques dopt;
  dopt.distributed_optimizer = true;
  StageOps stage;  // 3 forward calls per micro-batch, 2 buffer calls and 1 optimizer call per iteration
  stage.sequence = {SequenceEntry{Phase::kForward, 0, 3}, SequenceEntry{Phase::kDpBuffer, 0, 2},
                    SequenceEntry{Phase::kOptimizer, 0, 1}};
  stage.comms = {CommOp{Phase::kDpBuffer, CommKind::kDpReduceScatter, DType::kFloat32, 4096, 1},
                 CommOp{Phase::kOptimizer, CommKind::kDpAllGather, DType::kFloat32, 4096, 1}};
  model.stages[store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware", dopt, 2)] = stage;
  model.stages[store::stage_key(spec.name, 1, 1, 0, 1, 16, "fp32", "aware", dopt, 1)] = stage;
  StageResolver resolver(model);
  PredictRequest request = traced_request(spec, ParallelConfig{2, 1, 1, 1, 8, 16}, dopt);  // 4 micro-batches per replica
  const PredictOutcome at_dp2 = predict(resolver, request);
  ASSERT_TRUE(at_dp2.ok()) << at_dp2.reason;
  const double reduce_scatter_us = 10.0 + 8192 * 1e-3, all_gather_us = 20.0 + 8192 * 2e-3;  // 2 x 4096 bytes
  EXPECT_NEAR(at_dp2.prediction->raw_total_us, 4 * 3 * 5.0 + 2 * 5.0 + 5.0 + reduce_scatter_us + all_gather_us, 1e-9);
  EXPECT_NEAR(at_dp2.prediction->dp_comm_us, 2 * 5.0 + reduce_scatter_us + all_gather_us, 1e-9);

  request.config = ParallelConfig{1, 1, 1, 1, 4, 16};
  const PredictOutcome at_dp1 = predict(resolver, request);
  ASSERT_TRUE(at_dp1.ok()) << at_dp1.reason;
  EXPECT_NEAR(at_dp1.prediction->raw_total_us, 4 * 3 * 5.0 + 2 * 5.0 + 5.0, 1e-9);  // buffer work, no communication
  request.config = ParallelConfig{4, 1, 1, 1, 16, 16};                              // no stage keyed dp 4
  const PredictOutcome at_dp4 = predict(resolver, request);
  ASSERT_FALSE(at_dp4.ok());
  EXPECT_NE(at_dp4.reason.find("/dopt/dp4"), std::string::npos) << at_dp4.reason;
}

// Sequence parallelism's TP all-gathers and reduce-scatters are recorded as one rank's part and timed at the
// whole buffer (nccl-tests' size) from their own tables; its once-per-iteration norm-gradient all-reduce
// (phase sp_grads) comes after the pipeline, once, not per micro-batch.
TEST(Predictor, SequenceParallelCommunicationIsTimedFromItsOwnTables) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model =
      model_with_comm(spec, {{"all_gather", 10.0, 1e-3}, {"reduce_scatter", 20.0, 2e-3}, {"all_reduce", 30.0, 0.0}}, {2});
  TrainingTechniques sp;
  sp.sequence_parallel = true;
  const ParallelConfig tp2{1, 2, 1, 1, 4, 16};
  StageOps stage;
  stage.sequence = {SequenceEntry{Phase::kForward, 0, 1}};
  stage.comms = {CommOp{Phase::kForward, CommKind::kTpAllGather, DType::kFloat32, 4096, 2},
                 CommOp{Phase::kBackward, CommKind::kTpReduceScatter, DType::kFloat32, 8192, 1},
                 CommOp{Phase::kSpGradients, CommKind::kTpAllReduce, DType::kFloat32, 2048, 1}};
  model.stages[store::stage_key(spec.name, 2, 1, 0, 1, 16, "fp32", "aware", sp)] = stage;
  StageResolver resolver(model);
  PredictRequest request = traced_request(spec, tp2, sp);
  const PredictOutcome outcome = predict(resolver, request);
  ASSERT_TRUE(outcome.ok()) << outcome.reason;
  const double all_gather_us = 10.0 + 8192 * 1e-3;       // 2 x 4096 bytes gathered
  const double reduce_scatter_us = 20.0 + 16384 * 2e-3;  // 2 x 8192 bytes reduced
  const double per_micro_batch_us = 5.0 + 2 * all_gather_us + reduce_scatter_us;
  EXPECT_NEAR(outcome.prediction->raw_total_us, 4 * per_micro_batch_us + 30.0, 1e-9);
  EXPECT_NEAR(outcome.prediction->tp_comm_us, 4 * (2 * all_gather_us + reduce_scatter_us) + 30.0, 1e-9);
  EXPECT_NEAR(outcome.prediction->bubble_us, 0.0, 1e-9);
}

// An occupancy nothing was fitted at takes the nearest fitted occupancy's terms, the lower on a tie
// (hand-picked: fitted at 2, 4 and 16).
TEST(Predictor, UnfittedOccupancyTakesTheNearestFittedOne) {
  CalibrationSet set;
  set.per_occupancy[2] = Calibration{1.0, 0.8, 3};
  set.per_occupancy[4] = Calibration{2.0, 0.6, 6};
  set.per_occupancy[16] = Calibration{3.0, 0.5, 1};
  EXPECT_EQ(set.source_occupancy(2), 2);  // its own
  EXPECT_EQ(set.source_occupancy(1), 2);  // below every fitted one
  EXPECT_EQ(set.source_occupancy(3), 2);  // tie between 2 and 4: the lower
  EXPECT_EQ(set.source_occupancy(5), 4);
  EXPECT_EQ(set.source_occupancy(10), 4);  // tie between 4 and 16
  EXPECT_EQ(set.source_occupancy(11), 16);
  EXPECT_EQ(set.source_occupancy(64), 16);  // beyond the calibration's world
  EXPECT_EQ(set.for_occupancy(1).factor, 0.8);
  EXPECT_EQ(set.for_occupancy(7).op_overhead_us, 2.0);
  EXPECT_EQ(set.for_occupancy(100).rows, 1);
}

}  // namespace
}  // namespace itertime::predict
