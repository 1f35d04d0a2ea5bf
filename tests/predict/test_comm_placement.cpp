// test_comm_placement.cpp: the comm model placed on nodes (issue 35): layouts' groups on node_of_rank
// (common/rank_groups.hpp), tables keyed by placement, find_us by placement (exact, one node scaled,
// across nodes by node count, hierarchical, the flagged one-node stand-in), the archive of placed and
// old keys, and the predictor asking by placement (predict/predictor.hpp PredictRequest::ranks_per_node).
// Invariants: rows are synthetic (tests/predict/comm_rows.hpp: time = alpha + bytes * us_per_byte at
// every power of two from 1 KiB to 1 MiB, so the fit is exact and every figure below is hand-derived at a
// measured size: latency part alpha, bandwidth part bytes * us_per_byte).
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/ops_store.hpp"
#include "common/rank_groups.hpp"
#include "predict/device/comm_model.hpp"
#include "predict/node_placement.hpp"
#include "predict/predictor.hpp"
#include "predict/resolver/stage_resolver.hpp"
#include "tests/predict/comm_rows.hpp"

namespace itertime::predict {
namespace {

using test_rows::synthetic_rows;

const std::vector<int> kTwoByTwo = {0, 0, 1, 1};  // 2 nodes x 2 ranks
constexpr int64_t kBytes = 65536;                 // a measured size

// What `model` predicts (fp32_at) or finds (fp32_found) for an fp32 collective of kBytes on placement `p`.
CommPrediction fp32_at(const CommModel& model, Collective c, GroupPlacement p, GroupLayout layout) {
  return model.predict_us(c, DType::kFloat32, p, layout, kBytes);
}
std::optional<CommPrediction> fp32_found(const CommModel& model, Collective c, GroupPlacement p, GroupLayout layout) {
  return model.find_us(c, DType::kFloat32, p, layout, kBytes);
}

void add(std::vector<store::CommRow>& rows, const std::string& collective, int64_t group_size, const std::string& layout,
         double alpha_us, double us_per_byte) {
  for (const store::CommRow& row : synthetic_rows(collective, "fp32", group_size, layout, alpha_us, us_per_byte, 1024, 1 << 20))
    rows.push_back(row);
}

// A 2-node x 2-rank calibration: one-node tables (consecutive g2: 2 ranks on 1 node), one-rank-per-node
// tables (strided g2: 1 rank on each of 2 nodes) and the whole world (g4: 2 x 2, all_reduce only).
CommModel two_node_model() {
  std::vector<store::CommRow> rows;
  add(rows, "all_reduce", 2, "consecutive", 10.0, 1e-3);
  add(rows, "reduce_scatter", 2, "consecutive", 5.0, 5e-4);
  add(rows, "all_gather", 2, "consecutive", 5.0, 5e-4);
  add(rows, "send", 2, "consecutive", 3.0, 2e-4);
  add(rows, "all_reduce", 2, "strided", 100.0, 1e-2);
  add(rows, "all_gather", 2, "strided", 50.0, 5e-3);
  add(rows, "send", 2, "strided", 30.0, 2e-3);
  add(rows, "all_reduce", 4, "consecutive", 300.0, 3e-2);
  return CommModel(store::to_records(rows), kTwoByTwo);
}

TEST(RankGroups, LayoutPlacementFromNodeOfRank) {
  const LayoutPlacement consecutive2 = layout_placement(kTwoByTwo, 2, GroupLayout::kConsecutive);
  EXPECT_EQ(consecutive2.ranks_per_node, 2);
  EXPECT_EQ(consecutive2.nodes, 1);
  EXPECT_TRUE(consecutive2.even);
  const LayoutPlacement strided2 = layout_placement(kTwoByTwo, 2, GroupLayout::kStrided);
  EXPECT_EQ(strided2.ranks_per_node, 1);
  EXPECT_EQ(strided2.nodes, 2);
  const LayoutPlacement world = layout_placement(kTwoByTwo, 4, GroupLayout::kConsecutive);
  EXPECT_EQ(world.ranks_per_node, 2);
  EXPECT_EQ(world.nodes, 2);
  // One node (no node_of_rank): every group inside it.
  const LayoutPlacement one_node = layout_placement({}, 8, GroupLayout::kStrided);
  EXPECT_EQ(one_node.ranks_per_node, 8);
  EXPECT_EQ(one_node.nodes, 1);
  // 2 nodes x 3 ranks, consecutive pairs {0,1} {2,3} {4,5}: {2,3} straddles the nodes (a "mixed" span).
  const LayoutPlacement mixed = layout_placement({0, 0, 0, 1, 1, 1}, 2, GroupLayout::kConsecutive);
  EXPECT_EQ(mixed.ranks_per_node, 2);
  EXPECT_EQ(mixed.nodes, 2);
  EXPECT_FALSE(mixed.even);
  EXPECT_THROW(layout_placement(kTwoByTwo, 3, GroupLayout::kConsecutive), UserError);

  EXPECT_EQ(ranks_per_node_of(kTwoByTwo), 2);
  EXPECT_EQ(ranks_per_node_of({0, 0, 0}), 0);
  EXPECT_EQ(ranks_per_node_of({}), 0);
  EXPECT_EQ(parse_node_of_rank("0,0,1,1"), kTwoByTwo);
  EXPECT_TRUE(parse_node_of_rank("").empty());
  EXPECT_THROW(parse_node_of_rank("0,x"), UserError);
  EXPECT_THROW(parse_node_of_rank("0,,1"), UserError);
  EXPECT_EQ(to_string(GroupPlacement{8, 2}), "4 nodes x 2 ranks");
  EXPECT_EQ(to_string(GroupPlacement{2, 2}), "1 node x 2 ranks");
}

TEST(CommPlacement, TablesAreKeyedByWhereTheirGroupsSat) {
  const CommModel model = two_node_model();
  std::vector<std::string> names;
  for (const auto& [key, table] : model.tables()) names.push_back(key.to_string());
  const auto has = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  EXPECT_TRUE(has("all_reduce/fp32/g2/consecutive")) << names.size();  // one node: the name of before
  EXPECT_TRUE(has("all_reduce/fp32/g2/strided/2x1"));                  // 2 nodes x 1 rank
  EXPECT_TRUE(has("all_reduce/fp32/g4/consecutive/2x2"));              // 2 nodes x 2 ranks
  EXPECT_TRUE(model.measured_across_nodes());
  EXPECT_EQ(model.calibration_ranks_per_node(), 2);
  // The same rows without node_of_rank: one node, the names of before.
  std::vector<store::CommRow> rows;
  add(rows, "all_reduce", 2, "strided", 100.0, 1e-2);
  const CommModel one_node(store::to_records(rows));
  EXPECT_EQ(one_node.tables().begin()->first.to_string(), "all_reduce/fp32/g2/strided");
  EXPECT_FALSE(one_node.measured_across_nodes());
  EXPECT_EQ(one_node.calibration_ranks_per_node(), 0);
}

TEST(CommPlacement, ExactPlacementThenOneNodeTables) {
  const CommModel model = two_node_model();
  // Rule 1: the g4 table sat on 2 nodes x 2: 300 + 65536 * 0.03 = 2266.08.
  const CommPrediction exact = fp32_at(model, Collective::kAllReduce, {4, 2}, GroupLayout::kConsecutive);
  EXPECT_NEAR(exact.time_us, 2266.08, 1e-9);
  EXPECT_FALSE(exact.extrapolated);
  EXPECT_FALSE(exact.hierarchical);
  // One rank on each of 2 nodes: the strided table, exactly: 100 + 655.36.
  const CommPrediction across = fp32_at(model, Collective::kAllReduce, {2, 1}, GroupLayout::kStrided);
  EXPECT_NEAR(across.time_us, 755.36, 1e-9);
  // Rule 2: two ranks inside one node: 10 + 65.536, never the strided (across-nodes) table; a strided
  // group inside a node takes the one-node consecutive table (no one-node strided table was measured).
  EXPECT_NEAR(fp32_at(model, Collective::kAllReduce, {2, 2}, GroupLayout::kConsecutive).time_us, 75.536, 1e-9);
  const CommPrediction strided_inside = fp32_at(model, Collective::kAllReduce, {2, 2}, GroupLayout::kStrided);
  EXPECT_NEAR(strided_inside.time_us, 75.536, 1e-9);
  EXPECT_NE(strided_inside.source.find("another layout"), std::string::npos) << strided_inside.source;
  // The one-node API asks the same: 2 ranks on one node.
  EXPECT_NEAR(model.predict_us(Collective::kAllReduce, DType::kFloat32, 2, GroupLayout::kStrided, kBytes).time_us, 75.536, 1e-9);
  // 4 ranks inside one node, scaled from the one-node g2 table: latency 10 * 6/2, bandwidth 65.536 * 1.5/1.
  EXPECT_NEAR(fp32_at(model, Collective::kAllReduce, {4, 4}, GroupLayout::kConsecutive).time_us, 30.0 + 98.304, 1e-9);
}

TEST(CommPlacement, OneRankPerNodeScalesByNodeCount) {
  const CommModel model = two_node_model();
  // 4 nodes from the 2-node table: latency 100 * 2(4-1) / 2(2-1) = 300; bandwidth 655.36 * 1.5 / 1.0.
  const CommPrediction four = fp32_at(model, Collective::kAllReduce, {4, 1}, GroupLayout::kStrided);
  EXPECT_NEAR(four.time_us, 300.0 + 983.04, 1e-9);
  EXPECT_TRUE(four.extrapolated);
  EXPECT_NE(four.source.find("node count 2 to 4"), std::string::npos) << four.source;
  // 8 nodes: 100 * 14/2 + 655.36 * 1.75.
  EXPECT_NEAR(fp32_at(model, Collective::kAllReduce, {8, 1}, GroupLayout::kStrided).time_us, 700.0 + 1146.88, 1e-9);
  // A consecutive group with one rank per node takes the one-rank-per-node (strided) table too.
  EXPECT_NEAR(fp32_at(model, Collective::kAllReduce, {2, 1}, GroupLayout::kConsecutive).time_us, 755.36, 1e-9);
  // A pipeline send to the next node: the strided send table (30 + 131.072), inside a node the consecutive one.
  EXPECT_NEAR(fp32_at(model, Collective::kSend, {2, 1}, GroupLayout::kStrided).time_us, 161.072, 1e-9);
  EXPECT_NEAR(fp32_at(model, Collective::kSend, {2, 2}, GroupLayout::kStrided).time_us, 3.0 + 13.1072, 1e-9);
}

TEST(CommPlacement, GroupsOverSeveralRanksOnSeveralNodesAreHierarchical) {
  const CommModel model = two_node_model();
  // all_reduce over 4 nodes x 2 ranks (no table of 8): reduce_scatter inside (5 + 32.768) + all_reduce
  // across 4 nodes at 65536 / 2 = 32768 B (latency 100 * 3, bandwidth 327.68 * 1.5) + all_gather inside
  // (5 + 32.768).
  const CommPrediction all_reduce = fp32_at(model, Collective::kAllReduce, {8, 2}, GroupLayout::kStrided);
  EXPECT_NEAR(all_reduce.time_us, 37.768 + 300.0 + 491.52 + 37.768, 1e-9);
  EXPECT_TRUE(all_reduce.hierarchical);
  EXPECT_TRUE(all_reduce.extrapolated);
  EXPECT_FALSE(all_reduce.inter_node_from_intra);
  EXPECT_NE(all_reduce.source.find("hierarchical over 4 nodes x 2 ranks"), std::string::npos) << all_reduce.source;
  // all_gather over 2 nodes x 2 ranks (no g4 all_gather table): across 2 nodes at 32768 B (50 + 163.84)
  // + inside at 65536 B (5 + 32.768).
  EXPECT_NEAR(fp32_at(model, Collective::kAllGather, {4, 2}, GroupLayout::kConsecutive).time_us, 213.84 + 37.768, 1e-9);
  // reduce_scatter: inside (37.768) + across: no one-rank-per-node reduce_scatter table measured.
  EXPECT_FALSE(fp32_found(model, Collective::kReduceScatter, {4, 2}, GroupLayout::kConsecutive));
  const std::string reason = model.missing_reason(Collective::kReduceScatter, GroupPlacement{4, 2}, GroupLayout::kConsecutive);
  EXPECT_NE(reason.find("over 2 nodes x 2 ranks"), std::string::npos) << reason;
  // A calibration whose every table spans nodes has nothing for a group inside one node, and says so.
  std::vector<store::CommRow> rows;
  add(rows, "all_reduce", 2, "consecutive", 100.0, 1e-2);
  const CommModel spread(store::to_records(rows), {0, 1});
  EXPECT_FALSE(fp32_found(spread, Collective::kAllReduce, {2, 2}, GroupLayout::kConsecutive));
  const std::string inside = spread.missing_reason(Collective::kAllReduce, GroupPlacement{2, 2}, GroupLayout::kConsecutive);
  EXPECT_NE(inside.find("inside one node"), std::string::npos) << inside;
  // No composition for a broadcast.
  EXPECT_FALSE(fp32_found(model, Collective::kBroadcast, {4, 2}, GroupLayout::kConsecutive));
}

TEST(CommPlacement, AOneNodeCalibrationAskedAcrossNodesSaysSo) {
  std::vector<store::CommRow> rows;
  add(rows, "all_reduce", 2, "consecutive", 10.0, 1e-3);
  add(rows, "all_reduce", 2, "strided", 12.0, 1e-3);
  const CommModel model(store::to_records(rows));
  const CommPrediction across = fp32_at(model, Collective::kAllReduce, {2, 1}, GroupLayout::kStrided);
  EXPECT_NEAR(across.time_us, 12.0 + 65.536, 1e-9);  // the one-node strided figure
  EXPECT_TRUE(across.inter_node_from_intra);
  EXPECT_TRUE(across.extrapolated);
  EXPECT_NE(across.source.find("measured no group across nodes"), std::string::npos) << across.source;
  // Inside one node nothing is flagged.
  const CommPrediction inside = fp32_at(model, Collective::kAllReduce, {2, 2}, GroupLayout::kStrided);
  EXPECT_FALSE(inside.inter_node_from_intra);
  EXPECT_FALSE(inside.extrapolated);
}

// The archive of placed and old keys: tests/predict/test_serialization.cpp (the archive is private there).

// The predictor places each group: dp 2 x tp 2 on 2 nodes x 2 ranks puts TP inside a node (the one-node
// consecutive table) and DP across the nodes (the one-rank-per-node table); on one node both are inside;
// on 4 nodes x 1 both are across.
TEST(CommPlacement, ALinkIsSharedByTheJobsRanksPerNode) {
  // The 2 x 2 calibration measured its strided pairs with both ranks of a node crossing its one link at
  // once: the bandwidth part (65536 * 0.01 = 655.36) is that of a link shared by 2 flows.
  const CommModel model = two_node_model();
  const GroupPlacement pair_across{2, 1};
  const auto at = [&](int64_t job_ranks_per_node) {
    return model.find_us(Collective::kAllReduce, DType::kFloat32, pair_across, GroupLayout::kStrided, kBytes, job_ranks_per_node);
  };
  EXPECT_NEAR(at(0)->time_us, 755.36, 1e-9);  // unknown: as calibrated
  EXPECT_NEAR(at(2)->time_us, 755.36, 1e-9);  // as calibrated
  EXPECT_NEAR(at(1)->time_us, 100.0 + 655.36 / 2, 1e-9);
  EXPECT_NE(at(1)->source.find("link shared by 1 flows per node, not 2"), std::string::npos) << at(1)->source;
  EXPECT_NEAR(at(4)->time_us, 100.0 + 655.36 * 2, 1e-9);
  // The latency part is not shared; the one-node tables are not touched.
  const GroupPlacement pair_inside{2, 2};
  EXPECT_NEAR(model.find_us(Collective::kAllReduce, DType::kFloat32, pair_inside, GroupLayout::kConsecutive, kBytes, 1)->time_us,
              75.536, 1e-9);
  // Scaled to 4 nodes and shared alike: ring steps 2(n-1) (2 -> 6) on the latency, bus factor 2(n-1)/n
  // (1 -> 1.5) and the share (1/2) on the bandwidth.
  const GroupPlacement four_across{4, 1};
  EXPECT_NEAR(model.find_us(Collective::kAllReduce, DType::kFloat32, four_across, GroupLayout::kStrided, kBytes, 1)->time_us,
              100.0 * 3 + 655.36 * 1.5 / 2, 1e-9);
}

TEST(CommPlacement, PredictorAsksTheCommModelByPlacement) {
  const LlamaSpec spec = load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json");
  FittedModel model;
  model.source_file = "synthetic.h5";
  model.occupancies = {4};
  model.signatures[0] = OpInfo{"aten::traced", "aten::traced()", "fp32", "fp32", 1.0, 1.0};
  model.signature_ids["aten::traced()"] = 0;
  model.op_time_us[{0, 4}] = 5.0;
  StageOps trace;
  trace.sequence = {SequenceEntry{Phase::kForward, 0, 3}};
  trace.comms = {CommOp{Phase::kForward, CommKind::kTpAllReduce, DType::kFloat32, kBytes, 1},
                 CommOp{Phase::kDpBuffer, CommKind::kDpAllReduce, DType::kFloat32, kBytes, 1}};
  model.stages[store::stage_key(spec.name, 2, 1, 0, 1, 16, "fp32", "aware")] = trace;
  model.comm = two_node_model();
  StageResolver resolver(model);

  PredictRequest request;
  request.model_name = spec.name;
  request.config = ParallelConfig{2, 2, 1, 1, 2, 16};  // dp 2, tp 2, one micro-batch
  request.precision = PrecisionName::kFp32;
  request.calibrated = false;

  request.ranks_per_node = 2;
  const PredictOutcome two_nodes = predict(resolver, request);
  ASSERT_TRUE(two_nodes.ok()) << two_nodes.reason;
  EXPECT_NEAR(two_nodes.prediction->tp_comm_us, 75.536, 1e-9);  // all_reduce/fp32/g2/consecutive
  EXPECT_NEAR(two_nodes.prediction->dp_comm_us, 755.36, 1e-9);  // all_reduce/fp32/g2/strided/2x1
  EXPECT_FALSE(two_nodes.prediction->inter_node_from_intra);

  request.ranks_per_node = 0;  // every rank on one node: DP inside it too
  const PredictOutcome one_node = predict(resolver, request);
  ASSERT_TRUE(one_node.ok()) << one_node.reason;
  EXPECT_NEAR(one_node.prediction->tp_comm_us, 75.536, 1e-9);
  EXPECT_NEAR(one_node.prediction->dp_comm_us, 75.536, 1e-9);

  request.ranks_per_node = 1;  // 4 nodes x 1: TP across 2 nodes as well, each link carrying one flow, not two
  const PredictOutcome four_nodes = predict(resolver, request);
  ASSERT_TRUE(four_nodes.ok()) << four_nodes.reason;
  EXPECT_NEAR(four_nodes.prediction->tp_comm_us, 100.0 + 655.36 / 2, 1e-9);
  EXPECT_NEAR(four_nodes.prediction->dp_comm_us, 100.0 + 655.36 / 2, 1e-9);

  // Ground truth is predicted as its job sat on its nodes.
  store::GroundTruthRecord row;
  row.model = spec.name;
  row.config = request.config;
  row.ranks_per_node = 2;
  EXPECT_EQ(request_for(row, /*blind=*/false).ranks_per_node, 2);

  const ConfigPlacement placement = place_config(request.config, 2);
  EXPECT_EQ(describe(placement), "2 nodes x 2 ranks; tp inside a node, dp across 2 nodes");
  EXPECT_EQ(describe(place_config(ParallelConfig{4, 2, 1, 1, 4, 16}, 2)),
            "4 nodes x 2 ranks; tp inside a node, dp across 4 nodes");
  EXPECT_EQ(describe(place_config(ParallelConfig{4, 1, 1, 1, 4, 16}, 2)), "2 nodes x 2 ranks; dp over 2 nodes x 2 ranks");
  EXPECT_EQ(describe(place_config(request.config, 0)), "1 node x 4 ranks; every group inside it");
}

}  // namespace
}  // namespace itertime::predict
