// test_calibration_records.cpp: /comm, /ops and /groundtruth rows written to an HDF5 file and read back
// as typed records (common/calibration_records.hpp): names become enums, a stage carries its own
// sequence and comm rows, a ground-truth row's recipe becomes its TrainingTechniques, absent tables read
// as none, and a name (or recipe) no field admits is a UserError.
#include <gtest/gtest.h>

#include "common/calibration_records.hpp"
#include "common/errors.hpp"
#include "tests/unit/temp_dir.hpp"

namespace itertime::store {
namespace {

CommRow comm_row(const std::string& collective, const std::string& layout, const std::string& mode) {
  CommRow row{};
  h5::set_string(row.collective, collective);
  h5::set_string(row.dtype, "float16");  // an alias: parsed to fp16
  h5::set_string(row.layout, layout);
  h5::set_string(row.mode, mode);
  row.group_size = 4, row.bytes = 1024, row.time_us_median = 12.5, row.check_errors = 2;
  return row;
}

GroundTruthRow groundtruth_row(const std::string& precision, const std::string& status) {
  GroundTruthRow row{};
  h5::set_string(row.key, "tiny/dp2-tp1-pp2");
  h5::set_string(row.model, "tiny");
  row.dp = 2, row.tp = 1, row.pp = 2, row.cp = 1, row.vp = 1, row.micro_batch = 1, row.global_batch = 8, row.seq_len = 64;
  row.num_micro_batches = 4;
  h5::set_string(row.precision, precision);
  h5::set_string(row.status, status);
  row.time_us_median = 1234.5;
  row.rounds_run = 4;
  row.rounds_counted = 3;
  row.round_spread_pct = 2.5;
  h5::set_string(row.disturbance, status == "ok" ? "" : "1 of 6 rounds counted");
  return row;
}

TEST(CalibrationRecords, CommRowsBecomeTypedRecords) {
  const CommRecord record = to_record(comm_row("all_gather", "strided", "pipelined"));
  EXPECT_EQ(record.collective, Collective::kAllGather);
  EXPECT_EQ(record.dtype, DType::kFloat16);
  EXPECT_EQ(record.group_size, 4);
  EXPECT_EQ(record.layout, GroupLayout::kStrided);
  EXPECT_EQ(record.mode, TimingMode::kPipelined);
  EXPECT_EQ(record.bytes, 1024);
  EXPECT_EQ(record.time_us_median, 12.5);
  EXPECT_EQ(record.check_errors, 2);
  EXPECT_THROW(to_record(comm_row("gather", "strided", "latency")), UserError);
  EXPECT_THROW(to_record(comm_row("all_gather", "ring", "latency")), UserError);
}

TEST(CalibrationRecords, GroundTruthRowsParseOnce) {
  const GroundTruthRecord record = to_record(groundtruth_row("amp-bf16", "ok"));
  EXPECT_EQ(record.key, "tiny/dp2-tp1-pp2");
  EXPECT_EQ(record.model, "tiny");
  EXPECT_EQ(record.config.dp, 2);
  EXPECT_EQ(record.config.pp, 2);
  EXPECT_EQ(record.config.seq_len, 64);
  EXPECT_EQ(record.precision, PrecisionName::kAmpBf16);
  EXPECT_EQ(record.status, RunStatus::kOk);
  EXPECT_EQ(record.tuple(), "(2,1,2)");
  EXPECT_EQ(record.occupancy(), 4);
  EXPECT_EQ(to_record(groundtruth_row("fp32", "skipped")).status, RunStatus::kSkipped);
  EXPECT_THROW(to_record(groundtruth_row("fp8", "ok")), UserError);
  EXPECT_THROW(to_record(groundtruth_row("fp32", "done")), UserError);
}

TEST(CalibrationRecords, GroundTruthRecipeBecomesTechniques) {
  GroundTruthRow row = groundtruth_row("fp32", "ok");
  EXPECT_FALSE(to_record(row).techniques.any());  // "" = plain
  h5::set_string(row.recipe, "sp+vp+dopt+rc-full");
  TrainingTechniques all;
  all.sequence_parallel = all.vocab_parallel = all.distributed_optimizer = true;
  all.recompute = Recompute::kFull;
  EXPECT_EQ(to_record(row).techniques, all);
  h5::set_string(row.recipe, "ovl-64K");
  const TrainingTechniques overlap = to_record(row).techniques;
  EXPECT_TRUE(overlap.overlap_gradient_reduction);
  EXPECT_EQ(overlap.gradient_bucket_bytes, 64 * 1024);
  h5::set_string(row.recipe, "dopt+sp");  // any order reads as the canonical text's techniques (issue 33)
  EXPECT_EQ(recipe_text(to_record(row).techniques), "sp+dopt");
  for (const char* damaged : {"sp+sp", "sp+bogus", "plain"}) {
    h5::set_string(row.recipe, damaged);
    try {
      to_record(row);
      ADD_FAILURE() << "accepted recipe " << damaged;
    } catch (const UserError& error) {
      EXPECT_NE(std::string(error.what()).find(std::string("'") + damaged + "'"), std::string::npos) << error.what();
    }
  }
}

TEST(CalibrationRecords, ReadFromAStoreWithStagesResolved) {
  testing::TempDir folder;
  const std::string path = folder.file("cal.h5");
  {
    h5::Store store = h5::Store::create(path, false, {{"argv", "test"}});
    append_comm_point(store, comm_row("all_reduce", "consecutive", "latency"), {12.5});
    const OpSignatureRow signature{/*id=*/0,     "aten::mm", "aten::mm(fp32[2,2], fp32[2,2])->fp32", "fp32,fp32", "fp32",
                                   /*flops=*/16, /*bytes=*/0};
    store.table<OpSignatureRow>(kOpSignatures).append(signature);
    OpTimingRow timing{};
    timing.signature_id = 0, timing.active_ranks = 2, timing.time_us_median = 3.5, timing.ok = 1;
    store.table<OpTimingRow>(kOpTimings).append(timing);
    for (int s = 0; s < 2; ++s) {  // two stages: each record must get its own rows
      OpStageRow stage{};
      h5::set_string(stage.stage_key, "stage" + std::to_string(s));
      stage.local_params = 100 + s;
      OpSequenceRow sequence{};
      h5::set_string(sequence.phase, s == 0 ? "forward" : "optimizer");
      sequence.signature_id = 0, sequence.count = 3 + s;
      OpCommRow comm{};
      h5::set_string(comm.phase, "backward");
      h5::set_string(comm.kind, s == 0 ? "tp_all_reduce" : "pp_send_backward");
      h5::set_string(comm.dtype, "fp16");
      comm.bytes = 64, comm.count = 2;
      append_stage(store, stage, {sequence}, {comm});
    }
    append_groundtruth(store, groundtruth_row("bf16", "ok"), {1.0, 2.0}, {}, {});
    GroundTruthRow with_recipe = groundtruth_row("amp-bf16", "skipped");
    h5::set_string(with_recipe.key, "tiny/dp2-tp1-pp2/mbs1/gbs8/seq64/amp-bf16/dopt+ovl");
    h5::set_string(with_recipe.recipe, "dopt+ovl");
    append_groundtruth(store, with_recipe, {}, {}, {});
  }
  h5::Store store = h5::Store::open(path, /*writable=*/false);
  const std::vector<CommRecord> comm = read_comm_records(store);
  ASSERT_EQ(comm.size(), 1u);
  EXPECT_EQ(comm[0].collective, Collective::kAllReduce);
  const OpsRecords ops = read_ops_records(store);
  ASSERT_EQ(ops.signatures.size(), 1u);
  EXPECT_EQ(ops.signatures[0].input_dtypes, "fp32,fp32");
  ASSERT_EQ(ops.timings.size(), 1u);
  EXPECT_TRUE(ops.timings[0].ok);
  ASSERT_EQ(ops.stages.size(), 2u);
  EXPECT_EQ(ops.stages[1].stage_key, "stage1");
  EXPECT_EQ(ops.stages[1].local_params, 101);
  ASSERT_EQ(ops.stages[1].sequence.size(), 1u);
  EXPECT_EQ(ops.stages[1].sequence[0].phase, Phase::kOptimizer);
  EXPECT_EQ(ops.stages[1].sequence[0].count, 4);
  ASSERT_EQ(ops.stages[1].comms.size(), 1u);
  EXPECT_EQ(ops.stages[1].comms[0].kind, CommKind::kPpSendBackward);
  EXPECT_EQ(ops.stages[0].comms[0].kind, CommKind::kTpAllReduce);
  EXPECT_EQ(ops.stages[0].comms[0].dtype, DType::kFloat16);
  EXPECT_EQ(ops.stages[0].comms[0].phase, Phase::kBackward);
  const std::vector<GroundTruthRecord> groundtruth = read_groundtruth_records(store);
  ASSERT_EQ(groundtruth.size(), 2u);
  EXPECT_EQ(groundtruth[0].precision, PrecisionName::kBf16);
  EXPECT_FALSE(groundtruth[0].techniques.any());
  EXPECT_EQ(recipe_text(groundtruth[1].techniques), "dopt+ovl");
  EXPECT_EQ(groundtruth[1].status, RunStatus::kSkipped);
  EXPECT_DOUBLE_EQ(groundtruth[0].round_spread_pct, 2.5);
  EXPECT_EQ(groundtruth[0].rounds_counted, 3);
  EXPECT_EQ(groundtruth[0].disturbance, "");
}

TEST(CalibrationRecords, AbsentTablesReadAsNone) {
  testing::TempDir folder;
  const std::string path = folder.file("empty.h5");
  { h5::Store::create(path, false, {{"argv", "test"}}); }
  h5::Store store = h5::Store::open(path, false);
  EXPECT_TRUE(read_comm_records(store).empty());
  EXPECT_TRUE(read_groundtruth_records(store).empty());
  const OpsRecords ops = read_ops_records(store);
  EXPECT_TRUE(ops.signatures.empty() && ops.timings.empty() && ops.stages.empty());
}

}  // namespace
}  // namespace itertime::store
