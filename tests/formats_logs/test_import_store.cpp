// test_import_store.cpp: an imported log in a calibration file: its imports row and configs row written
// together, refused twice, read apart from itertime's own ground truth (read_groundtruth_records never
// returns it, so fit and the existing validation are unchanged by an import).
#include <gtest/gtest.h>

#include <string>

#include "common/calibration_records.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "formats/log_import.hpp"
#include "tests/unit/temp_dir.hpp"

namespace itertime::formats {
namespace {

LogImport megatron_import() {
  return import_log(read_log(std::string(ITERTIME_LOGS_DIR) + "/megatron_llama8b_tp2.log"), LogFormat::kAuto, std::nullopt);
}

TEST(ImportStore, WrittenTogetherReadApart) {
  testing::TempDir dir;
  const std::string path = dir.file("cal.h5");
  const LogImport im = megatron_import();
  EXPECT_EQ(im.format, LogFormat::kMegatron);
  EXPECT_EQ(im.run.config.dp, 4);
  EXPECT_EQ(im.run.config.tp, 2);
  EXPECT_EQ(im.run.recipe.precision, PrecisionName::kAmpBf16);
  EXPECT_EQ(im.first_steady_line, 52u);
  {
    h5::Store store = h5::Store::create(path, false, {{"argv", "test"}});
    store::GroundTruthRow own = groundtruth_row(im, "2026-12-03T00:00:00Z");
    h5::set_string(own.key, "tiny/dp1-tp1-pp1/mbs1/gbs1/seq8/fp32");
    h5::set_string(own.backend, "cpu");
    h5::set_string(own.precision, "fp32");
    store::append_groundtruth(store, own, {1.0}, {}, {});
    store::append_imported_groundtruth(store, import_row(im, "2026-12-03T00:00:00Z"), groundtruth_row(im, "2026-12-03T00:00:00Z"),
                                       im.measurement.steady_us);
    EXPECT_THROW(
        store::append_imported_groundtruth(store, import_row(im, "x"), groundtruth_row(im, "x"), im.measurement.steady_us),
        UserError);
  }
  h5::Store store = h5::Store::open(path, false);
  const auto own = store::read_groundtruth_records(store);
  ASSERT_EQ(own.size(), 1u);
  EXPECT_FALSE(own[0].imported());
  const auto imported = store::read_imported_groundtruth_records(store);
  ASSERT_EQ(imported.size(), 1u);
  EXPECT_EQ(imported[0].key, im.key());
  EXPECT_NE(imported[0].imported_from.find("megatron_llama8b_tp2.log"), std::string::npos);
  EXPECT_DOUBLE_EQ(imported[0].time_us_median, im.measurement.time_us_median);
  EXPECT_NEAR(imported[0].round_spread_pct, im.measurement.spread_pct, 1e-12);
  const auto logs = store::read_import_records(store);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].log_sha256, im.sha256);
  EXPECT_EQ(logs[0].model.num_kv_heads, 8);
  EXPECT_EQ(logs[0].model.intermediate_size, 14336);
  EXPECT_EQ(logs[0].format, "megatron-log");
  EXPECT_EQ(store.samples(store::kGroundTruthSamples).size(), 1u + im.measurement.steady_us.size());
}

}  // namespace
}  // namespace itertime::formats
