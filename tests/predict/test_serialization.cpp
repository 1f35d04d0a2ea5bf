// test_serialization.cpp: Boost.Serialization round trips of the fitted comm model's state and of a whole
// FittedModel through save_model / load_model.
// Invariants: comm round trips go through text_oarchive / text_iarchive in memory; every prediction of
// the loaded model equals the original's bit for bit (Boost writes doubles with max_digits10). Model
// files are written under a fresh folder in the system temp folder, removed at the end.
#include <gtest/gtest.h>

#include <boost/archive/text_iarchive.hpp>
#include <boost/archive/text_oarchive.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <unistd.h>

#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "predict/device/comm_model.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/model/fitted_model_archive.hpp"  // the archive text itself (private to the model room)
#include "predict/builder/op_builder.hpp"
#include "predict/predictor.hpp"
#include "common/calibration_records.hpp"
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
  return CommModel(store::to_records(rows));
}

// `saved` through a text archive in memory, read back into `into` (which may hold a model already: the
// archive replaces it).
void text_round_trip(const CommModel& saved, CommModel& into) {
  std::stringstream text;
  {
    boost::archive::text_oarchive out(text);
    out << saved;
  }
  boost::archive::text_iarchive in(text);
  in >> into;
}

TEST(Serialization, CommModelTextRoundTripGivesIdenticalPredictions) {
  const CommModel original = fitted_model();
  CommModel loaded;
  text_round_trip(original, loaded);
  ASSERT_EQ(loaded.tables().size(), original.tables().size());
  EXPECT_EQ(loaded.rows_used(), original.rows_used());
  EXPECT_EQ(loaded.rows_ignored(), original.rows_ignored());

  struct Query {
    Collective collective;
    DType dtype;
    int64_t group_size;
    GroupLayout layout;
  };
  constexpr GroupLayout kConsecutive = GroupLayout::kConsecutive;
  const std::vector<Query> queries = {{Collective::kAllReduce, DType::kBFloat16, 8, kConsecutive},
                                      {Collective::kAllReduce, DType::kFloat16, 8, kConsecutive},
                                      {Collective::kAllReduce, DType::kBFloat16, 16, kConsecutive},
                                      {Collective::kAllReduce, DType::kFloat32, 4, GroupLayout::kStrided},
                                      {Collective::kAllGather, DType::kBFloat16, 4, kConsecutive},
                                      {Collective::kAllGather, DType::kFloat32, 2, kConsecutive},
                                      {Collective::kSendRecv, DType::kFloat32, 2, kConsecutive}};
  int compared = 0;
  for (const Query& q : queries) {
    for (int64_t bytes = 1; bytes <= (int64_t{1} << 31); bytes = bytes * 3 + 1) {
      const CommPrediction a = original.predict_us(q.collective, q.dtype, q.group_size, q.layout, bytes);
      const CommPrediction b = loaded.predict_us(q.collective, q.dtype, q.group_size, q.layout, bytes);
      EXPECT_EQ(a.time_us, b.time_us) << to_string(q.collective) << " " << bytes;
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
  CommModel loaded = fitted_model();
  text_round_trip(CommModel(), loaded);
  EXPECT_TRUE(loaded.empty());
}

// A FittedModel with every part filled: comm, signatures, timings, a traced stage, regressions and
// their checks, calibrations.
FittedModel full_model() {
  FittedModel model;
  model.source_file = "synthetic.h5";
  model.backend = Backend::kCpu;
  std::vector<store::CommRow> rows = test_rows::synthetic_rows("send", "float32", 2, "consecutive", 5.0, 1e-3, 1024, 1 << 20);
  model.comm = CommModel(store::to_records(rows));
  model.occupancies = {1, 2};
  model.signatures[7] = OpInfo{"aten::mm", "aten::mm(f32[4,4], f32[4,4])->f32", "f32,f32", "f32", 128.0, 192.0};
  model.signature_ids[model.signatures[7].signature] = 7;
  model.op_time_us[{7, 1}] = 3.25;
  model.op_time_us[{7, 2}] = 4.5;
  StageOps stage;
  stage.sequence = {SequenceEntry{Phase::kForward, 7, 3}, SequenceEntry{Phase::kBackward, 7, 6},
                    SequenceEntry{Phase::kOptimizer, 7, 1}};
  stage.comms = {CommOp{Phase::kDpBuffer, CommKind::kDpAllReduce, DType::kFloat32, 4096, 1}};
  stage.local_params = 1024;
  model.stages["synthetic-stage"] = stage;
  model.regressions[{"aten::mm|f32,f32", 1}] = OpRegression{1.5, 1e-3, 2e-4, 9};
  model.regression_checks[{"aten::mm|f32,f32", 1}] = RegressionCheck{6, 3, 12.5, 300.0, 8.0};
  model.calibration.per_occupancy[2] = Calibration{3.5, 1.25, 4};
  model.calibration.per_occupancy[4] = Calibration{2.0, 1.1, 9};
  model.calibration_blind.per_occupancy[1] = Calibration{0.5, 0.9, 9};
  return model;
}

struct TempFolder {
  std::filesystem::path path;
  TempFolder() {
    path = std::filesystem::temp_directory_path() / ("itertime-serialization-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
  }
  ~TempFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

TEST(Serialization, FittedModelSaveLoadRoundTrip) {
  TempFolder folder;
  const std::string file = (folder.path / "model.itm").string();
  FittedModel original = full_model();
  original.hardware = "h100-sxm";
  save_model(original, file, /*force=*/false);
  const FittedModel loaded = load_model(file);
  EXPECT_EQ(loaded.source_file, original.source_file);
  EXPECT_EQ(loaded.hardware, "h100-sxm");
  EXPECT_EQ(loaded.backend, original.backend);
  EXPECT_EQ(loaded.occupancies, original.occupancies);
  EXPECT_EQ(loaded.signature_ids, original.signature_ids);
  EXPECT_EQ(loaded.op_time_us, original.op_time_us);
  ASSERT_EQ(loaded.signatures.count(7), 1u);
  EXPECT_EQ(loaded.signatures.at(7).signature, original.signatures.at(7).signature);
  EXPECT_EQ(loaded.signatures.at(7).flops, 128.0);
  ASSERT_EQ(loaded.stages.count("synthetic-stage"), 1u);
  EXPECT_EQ(loaded.stages.at("synthetic-stage").sequence.size(), 3u);
  EXPECT_EQ(loaded.stages.at("synthetic-stage").comms.at(0).bytes, 4096);
  const OpRegression& r = loaded.regressions.at({"aten::mm|f32,f32", 1});
  EXPECT_EQ(r.intercept_us, 1.5);
  EXPECT_EQ(r.us_per_flop, 1e-3);
  EXPECT_EQ(r.us_per_byte, 2e-4);
  const RegressionCheck& check = loaded.regression_checks.at({"aten::mm|f32,f32", 1});
  EXPECT_EQ(check.mape_pct, 12.5);
  EXPECT_EQ(check.reach, 8.0);
  EXPECT_EQ(loaded.calibration.for_occupancy(2).op_overhead_us, 3.5);
  EXPECT_EQ(loaded.calibration.for_occupancy(4).factor, 1.1);
  EXPECT_EQ(loaded.calibration.per_occupancy.size(), 2u);
  EXPECT_EQ(loaded.calibration_blind.for_occupancy(1).factor, 0.9);
  EXPECT_EQ(loaded.comm.tables().size(), original.comm.tables().size());
  EXPECT_EQ(loaded.comm.predict_us(Collective::kSend, DType::kFloat32, 2, GroupLayout::kConsecutive, 65536).time_us,
            original.comm.predict_us(Collective::kSend, DType::kFloat32, 2, GroupLayout::kConsecutive, 65536).time_us);
}

// The typed terms are archived as their names: the text a version-4 model (strings in memory) holds,
// so models saved before the terms became enums load unchanged, and aliases ("float32") still load.
TEST(Serialization, TypedTermsKeepTheTextArchiveFormat) {
  std::ostringstream out;
  {
    boost::archive::text_oarchive archive(out, boost::archive::no_header);
    const CommOp comm{Phase::kDpBuffer, CommKind::kDpAllReduce, DType::kFloat32, 4096, 1};
    const SequenceEntry entry{Phase::kOptimizer, 7, 3};
    const CommKey key{Collective::kSendRecv, DType::kBFloat16, 2, GroupLayout::kStrided};
    archive << comm << entry << key;
  }
  EXPECT_NE(out.str().find("9 dp_buffer 13 dp_all_reduce 4 fp32 4096 1"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("9 optimizer 7 3"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("8 sendrecv 4 bf16 2 7 strided"), std::string::npos) << out.str();

  std::istringstream in("0 0 8 backward 13 tp_all_reduce 7 float32 64 2");  // class info, then the fields
  boost::archive::text_iarchive archive(in, boost::archive::no_header);
  CommOp loaded;
  archive >> loaded;
  EXPECT_EQ(loaded.phase, Phase::kBackward);
  EXPECT_EQ(loaded.kind, CommKind::kTpAllReduce);
  EXPECT_EQ(loaded.dtype, DType::kFloat32);
  EXPECT_EQ(loaded.bytes, 64);
  EXPECT_EQ(loaded.count, 2);
}

// The backend and the attention kernel are enums in memory and their names in the archive, as the strings
// of models saved before them were; a backend the calibration did not record is "unknown" and loads as none.
TEST(Serialization, BackendAndAttentionKeepTheirNamesInTheArchive) {
  TempFolder folder;
  const std::string file = (folder.path / "model.itm").string();
  FittedModel model = full_model();
  model.backend = Backend::kCuda;
  model.attention = AttentionKernel::kSdpa;
  save_model(model, file, /*force=*/false);
  std::stringstream text;
  text << std::ifstream(file).rdbuf();
  EXPECT_NE(text.str().find(" 12 synthetic.h5 4 cuda "), std::string::npos) << text.str().substr(0, 200);
  EXPECT_NE(text.str().find(" 4 sdpa "), std::string::npos);
  const FittedModel loaded = load_model(file);
  EXPECT_EQ(loaded.backend, Backend::kCuda);
  EXPECT_EQ(loaded.attention, AttentionKernel::kSdpa);

  model.backend.reset();
  save_model(model, file, /*force=*/true);
  std::stringstream unknown;
  unknown << std::ifstream(file).rdbuf();
  EXPECT_NE(unknown.str().find(" 12 synthetic.h5 7 unknown "), std::string::npos) << unknown.str().substr(0, 200);
  EXPECT_FALSE(load_model(file).backend.has_value());
}

TEST(Serialization, SaveRefusesToOverwriteWithoutForce) {
  TempFolder folder;
  const std::string file = (folder.path / "model.itm").string();
  { std::ofstream(file) << "keep me"; }
  EXPECT_THROW(save_model(full_model(), file, /*force=*/false), UserError);
  std::ifstream in(file);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "keep me");
  save_model(full_model(), file, /*force=*/true);
  EXPECT_EQ(load_model(file).backend, Backend::kCpu);
}

TEST(Serialization, LoadRefusesAnotherVersionAndForeignFiles) {
  TempFolder folder;
  const std::string file = (folder.path / "model.itm").string();
  save_model(full_model(), file, false);
  std::stringstream text;
  text << std::ifstream(file).rdbuf();
  std::string body = text.str();
  const std::string header = "itertime-fitted-model " + std::to_string(kFittedModelVersion);
  ASSERT_EQ(body.rfind(header, 0), 0u);
  body.replace(0, header.size(), "itertime-fitted-model " + std::to_string(kFittedModelVersion + 1));
  { std::ofstream(file, std::ios::trunc) << body; }
  try {
    load_model(file);
    FAIL() << "another version was loaded";
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("version " + std::to_string(kFittedModelVersion + 1)), std::string::npos) << message;
    EXPECT_NE(message.find("itertime fit"), std::string::npos) << message;
  }
  { std::ofstream(file, std::ios::trunc) << "not a model\n"; }
  EXPECT_THROW(load_model(file), UserError);
  EXPECT_THROW(load_model((folder.path / "missing.itm").string()), UserError);
}

// A comm model placed on 2 nodes x 2 ranks (issue 35): one-node, one-rank-per-node and 2 x 2 tables.
CommModel placed_model() {
  std::vector<store::CommRow> rows;
  for (const auto& [collective, group_size, layout, alpha_us] :
       std::vector<std::tuple<std::string, int64_t, std::string, double>>{{"all_reduce", 2, "consecutive", 10.0},
                                                                          {"reduce_scatter", 2, "consecutive", 5.0},
                                                                          {"all_gather", 2, "consecutive", 5.0},
                                                                          {"all_reduce", 2, "strided", 100.0},
                                                                          {"all_reduce", 4, "consecutive", 300.0}}) {
    for (const store::CommRow& row :
         test_rows::synthetic_rows(collective, "fp32", group_size, layout, alpha_us, 1e-3, 1024, 1 << 20))
      rows.push_back(row);
  }
  return CommModel(store::to_records(rows), {0, 0, 1, 1});
}

TEST(Serialization, ArchiveKeepsPlacementsAndReadsOldKeysAsOneNode) {
  const CommModel original = placed_model();
  CommModel loaded;
  text_round_trip(original, loaded);
  EXPECT_EQ(loaded.node_of_rank(), (std::vector<int>{0, 0, 1, 1}));
  ASSERT_EQ(loaded.tables().size(), original.tables().size());
  for (const GroupPlacement placement :
       {GroupPlacement{4, 2}, GroupPlacement{8, 2}, GroupPlacement{4, 1}, GroupPlacement{2, 2}}) {
    EXPECT_EQ(loaded.predict_us(Collective::kAllReduce, DType::kFloat32, placement, GroupLayout::kStrided, 65536).time_us,
              original.predict_us(Collective::kAllReduce, DType::kFloat32, placement, GroupLayout::kStrided, 65536).time_us);
  }
  // A key as models saved before placements wrote it (class version 0): one node, its group size per node.
  std::istringstream old_key("0 0 10 all_reduce 4 fp32 4 7 strided");
  boost::archive::text_iarchive archive(old_key, boost::archive::no_header);
  CommKey key;
  archive >> key;
  EXPECT_EQ(key.nodes, 1);
  EXPECT_EQ(key.per_node(), 4);
  EXPECT_EQ(key.to_string(), "all_reduce/fp32/g4/strided");
  EXPECT_TRUE((key == CommKey{Collective::kAllReduce, DType::kFloat32, 4, GroupLayout::kStrided}));
}

// A comm model as itertime wrote it before placements (CommModel class version 1, CommKey 0: no nodes,
// no node_of_rank): it loads as one node and predicts as the same rows fitted today without node_of_rank.
TEST(Serialization, CommModelSavedBeforePlacementsLoadsAsOneNode) {
  std::istringstream old_text(
      "0 1 0 0 1 0 0 0 0 0 10 all_reduce 4 fp32 2 7 strided 0 0 2 0 1024 2048 2 0 1.10240000000000009e+01 "
      "1.20480000000000000e+01 2 0 1.10240000000000009e+01 1.20480000000000000e+01 1.00000000000000018e+01 "
      "9.99999999999999153e-04 2 0.00000000000000000e+00 2 0");
  CommModel loaded;
  {
    boost::archive::text_iarchive archive(old_text, boost::archive::no_header);
    archive >> loaded;
  }
  ASSERT_EQ(loaded.tables().size(), 1u);
  EXPECT_EQ(loaded.tables().begin()->first.to_string(), "all_reduce/fp32/g2/strided");
  EXPECT_EQ(loaded.tables().begin()->first.nodes, 1);
  EXPECT_EQ(loaded.tables().begin()->first.per_node(), 2);
  EXPECT_TRUE(loaded.node_of_rank().empty());
  EXPECT_FALSE(loaded.measured_across_nodes());
  const CommModel today(store::to_records(test_rows::synthetic_rows("all_reduce", "fp32", 2, "strided", 10.0, 1e-3, 1024, 2048)));
  EXPECT_EQ(loaded.predict_us(Collective::kAllReduce, DType::kFloat32, 2, GroupLayout::kStrided, 1536).time_us,
            today.predict_us(Collective::kAllReduce, DType::kFloat32, 2, GroupLayout::kStrided, 1536).time_us);
  // Asked across nodes, the old model says its figures are one node's.
  EXPECT_TRUE(loaded.predict_us(Collective::kAllReduce, DType::kFloat32, GroupPlacement{2, 1}, GroupLayout::kStrided, 1536)
                  .inter_node_from_intra);
}

}  // namespace
}  // namespace itertime::predict
