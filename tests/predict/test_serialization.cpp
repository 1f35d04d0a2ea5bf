// test_serialization.cpp: Boost.Serialization round trips of the fitted comm model's state.
// Invariants: the round trip goes through text_oarchive / text_iarchive in memory; every prediction of
// the loaded model equals the original's bit for bit (Boost writes doubles with max_digits10).
#include <gtest/gtest.h>

#include <boost/archive/text_iarchive.hpp>
#include <boost/archive/text_oarchive.hpp>
#include <sstream>

#include "common/dtype.hpp"
#include "predict/comm_model.hpp"
#include "tests/predict/comm_rows.hpp"

namespace itertime::predict {
namespace {

CommModel fitted_model() {
  std::vector<store::CommRow> rows;
  const auto add = [&rows](std::vector<store::CommRow> more) { rows.insert(rows.end(), more.begin(), more.end()); };
  add(test_rows::synthetic_rows("all_reduce", "bf16", 8, "consecutive", 7.3, 1.0 / 37000.0, 8, 256 << 20));
  add(test_rows::synthetic_rows("all_reduce", "fp32", 2, "strided", 3.1, 1.0 / 9000.0, 8, 64 << 20));
  add(test_rows::synthetic_rows("all_gather", "bf16", 4, "consecutive", 4.9, 1.0 / 21000.0, 64, 16 << 20));
  add(test_rows::synthetic_rows("sendrecv", "fp32", 2, "consecutive", 2.2, 1.0 / 12000.0, 8, 128 << 20));
  // A little non-linearity so that the monotone table and the fit differ from the generating line.
  for (std::size_t i = 0; i < rows.size(); i += 3) rows[i].time_us_median *= 1.03;
  return CommModel(rows);
}

TEST(Serialization, CommModelTextRoundTripGivesIdenticalPredictions) {
  const CommModel original = fitted_model();
  std::stringstream stream;
  {
    boost::archive::text_oarchive out(stream);
    out << original;
  }
  CommModel loaded;
  {
    boost::archive::text_iarchive in(stream);
    in >> loaded;
  }
  ASSERT_EQ(loaded.tables().size(), original.tables().size());
  EXPECT_EQ(loaded.rows_used(), original.rows_used());
  EXPECT_EQ(loaded.rows_ignored(), original.rows_ignored());

  struct Query {
    const char* collective;
    DType dtype;
    int64_t group_size;
    const char* layout;
  };
  const std::vector<Query> queries = {
      {"all_reduce", DType::kBFloat16, 8, "consecutive"}, {"all_reduce", DType::kFloat16, 8, "consecutive"},
      {"all_reduce", DType::kBFloat16, 16, "consecutive"}, {"all_reduce", DType::kFloat32, 4, "strided"},
      {"all_gather", DType::kBFloat16, 4, "consecutive"},  {"all_gather", DType::kFloat32, 2, "consecutive"},
      {"sendrecv", DType::kFloat32, 2, "consecutive"}};
  int compared = 0;
  for (const Query& q : queries) {
    for (int64_t bytes = 1; bytes <= (int64_t{1} << 31); bytes = bytes * 3 + 1) {
      const CommPrediction a = original.predict_us(q.collective, q.dtype, q.group_size, q.layout, bytes);
      const CommPrediction b = loaded.predict_us(q.collective, q.dtype, q.group_size, q.layout, bytes);
      EXPECT_EQ(a.time_us, b.time_us) << q.collective << " " << bytes;
      EXPECT_EQ(a.extrapolated, b.extrapolated);
      EXPECT_EQ(a.dtype_fallback, b.dtype_fallback);
      EXPECT_EQ(a.source, b.source);
      ++compared;
    }
  }
  EXPECT_GT(compared, 100);

  const auto ra = original.residuals();
  const auto rb = loaded.residuals();
  ASSERT_EQ(ra.size(), rb.size());
  for (std::size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].key, rb[i].key);
    EXPECT_EQ(ra[i].alpha_us, rb[i].alpha_us);
    EXPECT_EQ(ra[i].bandwidth_GBps, rb[i].bandwidth_GBps);
    EXPECT_EQ(ra[i].mape_pct, rb[i].mape_pct);
  }
}

TEST(Serialization, EmptyCommModelRoundTrips) {
  std::stringstream stream;
  {
    boost::archive::text_oarchive out(stream);
    const CommModel empty;
    out << empty;
  }
  CommModel loaded = fitted_model();
  {
    boost::archive::text_iarchive in(stream);
    in >> loaded;
  }
  EXPECT_TRUE(loaded.empty());
}

}  // namespace
}  // namespace itertime::predict
