// test_comm_model.cpp: the comm model on synthetic /comm rows with known coefficients.
// Invariants: rows are built in memory (no HDF5 file); expected figures come from the generating
// alpha/bandwidth or from hand computation written next to them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/comm_store.hpp"
#include "common/errors.hpp"
#include "common/h5store.hpp"
#include "predict/device/comm_model.hpp"
#include "tests/predict/comm_rows.hpp"

namespace itertime::predict {
namespace {

using test_rows::make_row;
using test_rows::synthetic_rows;

// Consecutive latency rows of one collective, dtype and group size: (bytes, time_us) each, in this order.
std::vector<store::CommRow> latency_rows(const std::string& collective, const std::string& dtype, int64_t group_size,
                                         const std::vector<std::pair<int64_t, double>>& points) {
  std::vector<store::CommRow> rows;
  for (const auto& [bytes, time_us] : points)
    rows.push_back(make_row(collective, dtype, group_size, "consecutive", "latency", bytes, time_us));
  return rows;
}

constexpr double kAlphaUs = 5.0;
constexpr double kUsPerByte = 1e-4;  // 10 GB/s algorithmic bandwidth

TEST(CommModel, RecoversAlphaAndBandwidthFromExactRows) {
  const CommModel model(
      store::to_records(synthetic_rows("all_reduce", "bf16", 8, "consecutive", kAlphaUs, kUsPerByte, 1024, 64 << 20)));
  ASSERT_EQ(model.tables().size(), 1u);
  const auto residuals = model.residuals();
  ASSERT_EQ(residuals.size(), 1u);
  EXPECT_NEAR(residuals[0].alpha_us, kAlphaUs, 0.01 * kAlphaUs);
  EXPECT_NEAR(residuals[0].bandwidth_GBps, 10.0, 0.01 * 10.0);
  EXPECT_LT(residuals[0].mape_pct, 1e-6);
  EXPECT_EQ(residuals[0].measured_points, 17);  // 1 KiB .. 64 MiB, powers of two
  EXPECT_EQ(residuals[0].fit_points, 9);        // max(3, ceil(17 / 2))
  EXPECT_EQ(residuals[0].key.to_string(), "all_reduce/bf16/g8/consecutive");
}

TEST(CommModel, RecoversBandwidthFromNoisyRows) {
  // +-0.5% deterministic multiplicative noise: the bandwidth is still within 1%.
  auto rows = synthetic_rows("all_gather", "fp32", 4, "consecutive", kAlphaUs, kUsPerByte, 1024, 256 << 20);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].time_us_median *= (i % 2 == 0) ? 1.005 : 0.995;
  const CommModel model(store::to_records(rows));
  const auto residuals = model.residuals();
  ASSERT_EQ(residuals.size(), 1u);
  EXPECT_NEAR(residuals[0].bandwidth_GBps, 10.0, 0.01 * 10.0);
  EXPECT_LT(residuals[0].mape_pct, 1.0);
}

TEST(CommModel, InterpolationIsExactAtPointsAndMonotoneBetween) {
  const auto rows = synthetic_rows("all_reduce", "bf16", 8, "consecutive", kAlphaUs, kUsPerByte, 1024, 1 << 20);
  const CommModel model(store::to_records(rows));
  for (const auto& row : rows) {
    const CommPrediction p = model.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, row.bytes);
    EXPECT_DOUBLE_EQ(p.time_us, row.time_us_median) << row.bytes;
    EXPECT_FALSE(p.extrapolated);
    EXPECT_FALSE(p.dtype_fallback);
  }
  // Between two points: the straight line (the data are linear, so the interpolant equals them).
  const CommPrediction mid = model.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, 3 * 1024);
  EXPECT_DOUBLE_EQ(mid.time_us, kAlphaUs + 3 * 1024 * kUsPerByte);
  double previous_us = 0.0;
  for (int64_t bytes = 1024; bytes <= (1 << 20); bytes += 997) {
    const double t = model.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, bytes).time_us;
    EXPECT_GE(t, previous_us) << bytes;
    previous_us = t;
  }
}

TEST(CommModel, NoisyNonMonotoneMeasurementsStillGiveMonotonePredictions) {
  // 4 KiB measured slower than 8 KiB: the monotone table pools them, (30 + 20) / 2 = 25 each.
  const std::vector<store::CommRow> rows =
      latency_rows("all_reduce", "fp32", 2, {{1024, 10.0}, {4096, 30.0}, {8192, 20.0}, {16384, 40.0}});
  const CommModel model(store::to_records(rows));
  EXPECT_DOUBLE_EQ(model.predict_us(Collective::kAllReduce, DType::kFloat32, 2, GroupLayout::kConsecutive, 4096).time_us, 25.0);
  EXPECT_DOUBLE_EQ(model.predict_us(Collective::kAllReduce, DType::kFloat32, 2, GroupLayout::kConsecutive, 8192).time_us, 25.0);
  double previous_us = 0.0;
  for (int64_t bytes = 1024; bytes <= 16384; bytes += 128) {
    const double t = model.predict_us(Collective::kAllReduce, DType::kFloat32, 2, GroupLayout::kConsecutive, bytes).time_us;
    EXPECT_GE(t, previous_us) << bytes;
    previous_us = t;
  }
}

TEST(CommModel, ExtrapolationAboveTheRangeIsLinear) {
  const int64_t largest = 1 << 20;
  const CommModel model(
      store::to_records(synthetic_rows("all_reduce", "bf16", 8, "consecutive", kAlphaUs, kUsPerByte, 1024, largest)));
  const auto at = [&](int64_t bytes) {
    return model.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, bytes);
  };
  const CommPrediction p2 = at(2 * largest), p4 = at(4 * largest), p8 = at(8 * largest);
  EXPECT_TRUE(p2.extrapolated);
  EXPECT_NE(p2.source.find("above the measured sizes"), std::string::npos) << p2.source;
  EXPECT_NEAR(p2.time_us, kAlphaUs + 2.0 * largest * kUsPerByte, 1e-6);
  EXPECT_NEAR(p8.time_us, kAlphaUs + 8.0 * largest * kUsPerByte, 1e-6);
  // Equal steps in bytes give equal steps in time: 4x-2x == (8x-4x)/2.
  EXPECT_NEAR(p4.time_us - p2.time_us, (p8.time_us - p4.time_us) / 2.0, 1e-6);
}

TEST(CommModel, ExtrapolationNeverBelowTheLargestMeasuredTime) {
  // The last point sits far above the trend: 10, 20, 40, 100 us at 1, 2, 4, 8 KiB. The fit over the
  // largest three is below 100 us just above 8 KiB; the prediction stays at 100 us there.
  const std::vector<store::CommRow> rows =
      latency_rows("broadcast", "fp32", 4, {{1024, 10.0}, {2048, 20.0}, {4096, 40.0}, {8192, 100.0}});
  const CommModel model(store::to_records(rows));
  const CommPrediction p = model.predict_us(Collective::kBroadcast, DType::kFloat32, 4, GroupLayout::kConsecutive, 8193);
  EXPECT_TRUE(p.extrapolated);
  EXPECT_GE(p.time_us, 100.0);
}

TEST(CommModel, BelowTheRangeUsesTheSmallestSize) {
  const CommModel model(
      store::to_records(synthetic_rows("all_reduce", "bf16", 8, "consecutive", kAlphaUs, kUsPerByte, 1024, 1 << 20)));
  const CommPrediction p = model.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, 16);
  EXPECT_TRUE(p.extrapolated);
  EXPECT_DOUBLE_EQ(p.time_us, kAlphaUs + 1024 * kUsPerByte);
}

TEST(CommModel, GroupSizeScalingAllReduce) {
  // Measured all_reduce at g4: t = 10 + bytes * 1e-4. At g8 and 1 MiB (1,048,576 bytes):
  //   latency 10 * 2(8-1) / 2(4-1) = 10 * 14 / 6 = 23.3333...
  //   bandwidth 104.8576 * (2*7/8) / (2*3/4) = 104.8576 * 1.75 / 1.5 = 122.3338667
  //   total 145.6672 us.
  const CommModel model(
      store::to_records(synthetic_rows("all_reduce", "fp32", 4, "consecutive", 10.0, kUsPerByte, 1024, 64 << 20)));
  const CommPrediction p = model.predict_us(Collective::kAllReduce, DType::kFloat32, 8, GroupLayout::kConsecutive, 1 << 20);
  EXPECT_TRUE(p.extrapolated);
  EXPECT_FALSE(p.dtype_fallback);
  EXPECT_NEAR(p.time_us, 10.0 * 14.0 / 6.0 + 104.8576 * 1.75 / 1.5, 1e-6);
  EXPECT_NEAR(p.time_us, 145.6672, 1e-4);
  EXPECT_NE(p.source.find("scaled from group size 4 to 8"), std::string::npos) << p.source;
}

TEST(CommModel, GroupSizeScalingGatherBroadcastAndNearest) {
  // all_gather measured at g2 and g8 (t = 5 + bytes * 1e-4 at both). g3 takes g2 (nearest):
  //   latency 5 * (3-1)/(2-1) = 10; bandwidth at 1 MiB 104.8576 * (2/3)/(1/2) = 139.8101.
  // g5 ties between 2 and 8 (distance 3): the larger (8) wins:
  //   latency 5 * 4/7; bandwidth 104.8576 * (4/5)/(7/8).
  std::vector<store::CommRow> rows = synthetic_rows("all_gather", "fp32", 2, "consecutive", 5.0, kUsPerByte, 1024, 4 << 20);
  const auto g8 = synthetic_rows("all_gather", "fp32", 8, "consecutive", 5.0, kUsPerByte, 1024, 4 << 20);
  rows.insert(rows.end(), g8.begin(), g8.end());
  const auto b4 = synthetic_rows("broadcast", "fp32", 4, "consecutive", 5.0, kUsPerByte, 1024, 4 << 20);
  rows.insert(rows.end(), b4.begin(), b4.end());
  const CommModel model(store::to_records(rows));
  const double bw_us = 104.8576;
  EXPECT_NEAR(model.predict_us(Collective::kAllGather, DType::kFloat32, 3, GroupLayout::kConsecutive, 1 << 20).time_us,
              5.0 * 2.0 + bw_us * (2.0 / 3.0) / 0.5, 1e-6);
  const CommPrediction g5 = model.predict_us(Collective::kAllGather, DType::kFloat32, 5, GroupLayout::kConsecutive, 1 << 20);
  EXPECT_NEAR(g5.time_us, 5.0 * 4.0 / 7.0 + bw_us * 0.8 / 0.875, 1e-6);
  EXPECT_NE(g5.source.find("from group size 8"), std::string::npos) << g5.source;
  // Broadcast: latency and bus factor unchanged with n, so g16 costs what g4 costs.
  EXPECT_NEAR(model.predict_us(Collective::kBroadcast, DType::kFloat32, 16, GroupLayout::kConsecutive, 1 << 20).time_us,
              5.0 + bw_us, 1e-6);
}

TEST(CommModel, FailedCheckAndPipelinedRowsAreIgnored) {
  auto rows = synthetic_rows("all_reduce", "bf16", 8, "consecutive", kAlphaUs, kUsPerByte, 1024, 1 << 20);
  const std::size_t good = rows.size();
  store::CommRow failed = make_row("all_reduce", "bf16", 8, "consecutive", "latency", 4096, 1e6);
  failed.check_errors = 3;
  rows.push_back(failed);
  rows.push_back(make_row("all_reduce", "bf16", 8, "consecutive", "pipelined", 4096, 1e6));
  rows.push_back(make_row("all_reduce", "bf16", 8, "consecutive", "pipelined", 1 << 30, 1e6));
  const CommModel model(store::to_records(rows));
  EXPECT_EQ(model.rows_used(), static_cast<int64_t>(good));
  EXPECT_EQ(model.rows_ignored(), 3);
  EXPECT_DOUBLE_EQ(model.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, 4096).time_us,
                   kAlphaUs + 4096 * kUsPerByte);
  EXPECT_EQ(model.residuals()[0].measured_points, static_cast<int64_t>(good));
}

TEST(CommModel, DuplicateRowsMergeByMedian) {
  const std::vector<store::CommRow> rows =
      latency_rows("sendrecv", "fp32", 2, {{1024, 10.0}, {1024, 14.0}, {1024, 11.0}, {2048, 20.0}});
  const CommModel model(store::to_records(rows));
  EXPECT_DOUBLE_EQ(model.predict_us(Collective::kSendRecv, DType::kFloat32, 2, GroupLayout::kConsecutive, 1024).time_us, 11.0);
}

TEST(CommModel, DtypeFallbackSameElementSizeThenAny) {
  auto rows = synthetic_rows("all_reduce", "bf16", 8, "consecutive", kAlphaUs, kUsPerByte, 1024, 1 << 20);
  const auto fp32 = synthetic_rows("all_reduce", "fp32", 8, "consecutive", 2 * kAlphaUs, kUsPerByte, 1024, 1 << 20);
  rows.insert(rows.end(), fp32.begin(), fp32.end());
  const CommModel model(store::to_records(rows));
  // fp16 was never measured: bf16 (same element size) answers, not fp32.
  const CommPrediction half = model.predict_us(Collective::kAllReduce, DType::kFloat16, 8, GroupLayout::kConsecutive, 4096);
  EXPECT_TRUE(half.dtype_fallback);
  EXPECT_DOUBLE_EQ(half.time_us, kAlphaUs + 4096 * kUsPerByte);
  EXPECT_NE(half.source.find("fp16 -> bf16 (same element size)"), std::string::npos) << half.source;
  // The measured dtype itself: no fallback.
  EXPECT_FALSE(model.predict_us(Collective::kAllReduce, DType::kFloat32, 8, GroupLayout::kConsecutive, 4096).dtype_fallback);
  // Only fp32 measured: bf16 falls back to it (time as a function of bytes).
  const CommModel only_fp32(store::to_records(fp32));
  const CommPrediction any = only_fp32.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, 4096);
  EXPECT_TRUE(any.dtype_fallback);
  EXPECT_DOUBLE_EQ(any.time_us, 2 * kAlphaUs + 4096 * kUsPerByte);
  EXPECT_NE(any.source.find("bf16 -> fp32"), std::string::npos) << any.source;
}

TEST(CommModel, ExactGroupOfSameSizeDtypeBeatsScalingTheRequestedDtype) {
  // bf16 measured at g4 only, fp16 at g8: an fp16-sized request at g8 for bf16 uses fp16@g8 measured.
  auto rows = synthetic_rows("all_reduce", "bf16", 4, "consecutive", 1.0, kUsPerByte, 1024, 1 << 20);
  const auto fp16 = synthetic_rows("all_reduce", "fp16", 8, "consecutive", 3.0, kUsPerByte, 1024, 1 << 20);
  rows.insert(rows.end(), fp16.begin(), fp16.end());
  const CommModel model(store::to_records(rows));
  const CommPrediction p = model.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, 4096);
  EXPECT_TRUE(p.dtype_fallback);
  EXPECT_DOUBLE_EQ(p.time_us, 3.0 + 4096 * kUsPerByte);
}

TEST(CommModel, TrivialCallsCostNothing) {
  const CommModel model(
      store::to_records(synthetic_rows("all_reduce", "bf16", 8, "consecutive", kAlphaUs, kUsPerByte, 1024, 1 << 20)));
  EXPECT_EQ(model.predict_us(Collective::kAllReduce, DType::kBFloat16, 1, GroupLayout::kConsecutive, 1 << 20).time_us, 0.0);
  EXPECT_EQ(model.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, 0).time_us, 0.0);
  EXPECT_EQ(CommModel().predict_us(Collective::kAllGather, DType::kFloat32, 1, GroupLayout::kStrided, 1024).time_us, 0.0);
}

TEST(CommModel, UnknownOrUnmeasuredIsAUserError) {
  const CommModel model(
      store::to_records(synthetic_rows("all_reduce", "bf16", 8, "consecutive", kAlphaUs, kUsPerByte, 1024, 1 << 20)));
  EXPECT_THROW(parse_collective("allreduce"), UserError);  // names are parsed at the /comm and CLI boundaries
  EXPECT_THROW(model.predict_us(Collective::kAllGather, DType::kBFloat16, 8, GroupLayout::kConsecutive, 1024), UserError);
  EXPECT_THROW(model.predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kStrided, 1024), UserError);
  EXPECT_THROW(CommModel().predict_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, 1024), UserError);
}

TEST(CommModel, FactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllReduce, 8), 2.0 * 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(latency_steps(Collective::kAllReduce, 8), 14.0);
  EXPECT_DOUBLE_EQ(latency_steps(Collective::kAllToAll, 8), 7.0);
  EXPECT_DOUBLE_EQ(latency_steps(Collective::kBroadcast, 8), 1.0);
  EXPECT_THROW(parse_collective("gather"), UserError);
}

TEST(CommModel, FindUsAnswersMissingTablesWithNulloptAndAReason) {
  const CommModel model(
      store::to_records(synthetic_rows("all_reduce", "bf16", 8, "consecutive", kAlphaUs, kUsPerByte, 1024, 1 << 20)));
  EXPECT_TRUE(model.find_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kConsecutive, 4096).has_value());
  EXPECT_FALSE(model.find_us(Collective::kAllReduce, DType::kBFloat16, 8, GroupLayout::kStrided, 4096).has_value());
  const std::string reason = model.missing_reason(Collective::kAllReduce, GroupLayout::kStrided);
  EXPECT_NE(reason.find("layout 'strided'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("all_reduce/bf16/g8/consecutive"), std::string::npos) << reason;
}

TEST(CommModel, KeysOrderByTheirNames) {
  // Tables list (residuals, reports) in the order of their /comm names, as when keys were strings.
  std::vector<store::CommRow> rows = synthetic_rows("sendrecv", "fp32", 2, "consecutive", kAlphaUs, kUsPerByte, 1024, 4096);
  for (const auto& more : {synthetic_rows("all_reduce", "fp32", 2, "strided", kAlphaUs, kUsPerByte, 1024, 4096),
                           synthetic_rows("all_reduce", "bf16", 2, "strided", kAlphaUs, kUsPerByte, 1024, 4096),
                           synthetic_rows("all_reduce", "bf16", 2, "consecutive", kAlphaUs, kUsPerByte, 1024, 4096)}) {
    rows.insert(rows.end(), more.begin(), more.end());
  }
  std::vector<std::string> names;
  for (const CommFitResidual& r : CommModel(store::to_records(rows)).residuals()) names.push_back(r.key.to_string());
  EXPECT_EQ(names, (std::vector<std::string>{"all_reduce/bf16/g2/consecutive", "all_reduce/bf16/g2/strided",
                                             "all_reduce/fp32/g2/strided", "sendrecv/fp32/g2/consecutive"}));
}

}  // namespace
}  // namespace itertime::predict
