// Unit tests of common/h5store: HDF5 round trips in a temporary folder, the refusals that protect
// existing files (no overwrite without force, schema version, not HDF5, schema of a table), that
// standard HDF5 tools (h5dump) read what we write, and the resumable parent/child rows of
// common/h5_parent_rows.hpp (offsets, trimming a killed job's tail) as the comm, ground-truth and ops
// stores use them, and that older files still open and read but never get ground truth added: a
// schema-4 file (ground truth without `recipe`, `cp`, `vp`) reads as plain recipes with cp = vp = 1, a
// schema-5 file (without `cp`, `vp`) keeps its recipes and reads with cp = vp = 1.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <H5Cpp.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/comm_store.hpp"
#include "common/errors.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5_parent_rows.hpp"
#include "common/h5store.hpp"
#include "common/ops_store.hpp"
#include "temp_dir.hpp"
#include "user_error.hpp"

namespace itertime_test_rows {

struct Row {
  int64_t id;
  double time_us;
  char label[16];
};

// Same layout as Row, other field names: a table written by "another version".
struct RenamedRow {
  int64_t id;
  double latency_us;
  char label[16];
};

struct WideRow {
  int32_t rank;
  float ratio;
  uint8_t ok;
  int64_t bytes;
};

// A parent row with two child spans: raw samples and compound Rows.
struct ParentRow {
  char key[16];
  int64_t samples_offset, samples_count, items_offset, items_count;
};

// /groundtruth/configs as schema 5 wrote it: with `recipe`, before `cp` and `vp`; written out here on its
// own so that it stays the old layout whatever the store's row becomes.
struct GroundTruthRowSchema5 {
  char key[96], model[48];
  int64_t dp, tp, pp, micro_batch, global_batch, seq_len, num_micro_batches;
  char precision[12], recipe[48], backend[8], status[12], reason[200];
  int64_t warmup_iters, timed_iters;
  double time_us_min, time_us_median, time_us_mean, time_us_p90, time_us_max, time_cv, tokens_per_s, loss_first, loss_last;
  int64_t samples_offset, samples_count, ranks_offset, ranks_count;
  char measured_utc[24];
  int64_t rounds_run, rounds_counted;
  double round_spread_pct;
  char disturbance[96];
  int64_t rounds_offset, rounds_count;
};

// /groundtruth/configs as schema 4 wrote it: schema 5's columns but `recipe`, in the same order, of the
// same types (its row type below leaves `recipe` out; its bytes are padding in the file's compound type).
struct GroundTruthRowSchema4 : GroundTruthRowSchema5 {};

using itertime::h5::RowTag;
using itertime::h5::RowType;

RowType row_type_of(RowTag<Row>) { return ITERTIME_H5_ROW_TYPE(Row, id, time_us, label); }
RowType row_type_of(RowTag<RenamedRow>) { return ITERTIME_H5_ROW_TYPE(RenamedRow, id, latency_us, label); }
RowType row_type_of(RowTag<WideRow>) { return ITERTIME_H5_ROW_TYPE(WideRow, rank, ratio, ok, bytes); }
RowType row_type_of(RowTag<ParentRow>) {
  return ITERTIME_H5_ROW_TYPE(ParentRow, key, samples_offset, samples_count, items_offset, items_count);
}
// The columns of /groundtruth/configs as schema 5 wrote them (`with_recipe`) or schema 4 (without it).
RowType old_groundtruth_row_type(bool with_recipe) {
  using R = GroundTruthRowSchema5;
  RowType type(sizeof(R));
  ITERTIME_H5_FIELDS(type, R, key, model, dp, tp, pp, micro_batch, global_batch, seq_len, num_micro_batches, precision);
  if (with_recipe) ITERTIME_H5_FIELDS(type, R, recipe);
  ITERTIME_H5_FIELDS(type, R, backend, status, reason, warmup_iters, timed_iters, time_us_min, time_us_median, time_us_mean,
                     time_us_p90, time_us_max, time_cv, tokens_per_s, loss_first, loss_last, samples_offset, samples_count,
                     ranks_offset, ranks_count, measured_utc, rounds_run, rounds_counted, round_spread_pct, disturbance,
                     rounds_offset, rounds_count);
  return type;
}
RowType row_type_of(RowTag<GroundTruthRowSchema4>) { return old_groundtruth_row_type(/*with_recipe=*/false); }
RowType row_type_of(RowTag<GroundTruthRowSchema5>) { return old_groundtruth_row_type(/*with_recipe=*/true); }

}  // namespace itertime_test_rows

namespace itertime {
namespace {

using itertime::testing::read_bytes;
using itertime::testing::TempDir;
using itertime::testing::user_error_of;
using itertime_test_rows::ParentRow;
using itertime_test_rows::RenamedRow;
using itertime_test_rows::Row;
using itertime_test_rows::WideRow;

const std::map<std::string, std::string> kProvenance = {{"itertime_version", "0.1.0"},
                                                        {"argv", "itertime calibrate comm --out x.h5"},
                                                        {"backend", "cpu"},
                                                        {"hostnames", "node-a,node-b"},
                                                        {"empty_value", ""}};

Row make_row(int64_t id, double time_us, const std::string& label) {
  Row row{};
  row.id = id;
  row.time_us = time_us;
  h5::set_string(row.label, label);
  return row;
}

struct FileState {
  std::string bytes;
  std::filesystem::file_time_type mtime;
  bool operator==(const FileState& other) const { return bytes == other.bytes && mtime == other.mtime; }
};

FileState file_state(const std::string& path) { return {read_bytes(path), std::filesystem::last_write_time(path)}; }

// Writes /meta schema_version = `version` with the raw HDF5 C++ API, as another itertime would.
void write_foreign_store(const std::string& path, int64_t version) {
  H5::H5File file(path, H5F_ACC_TRUNC);
  H5::Group meta = file.createGroup("/meta");
  H5::Attribute attribute = meta.createAttribute("schema_version", H5::PredType::NATIVE_INT64, H5::DataSpace(H5S_SCALAR));
  attribute.write(H5::PredType::NATIVE_INT64, &version);
}

std::string run_and_capture(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << command << "\n" << output;
  return output;
}

// ---- create / open / meta ----------------------------------------------------------------------

TEST(H5Store, CreateWritesMetaAndReopensReadOnly) {
  TempDir dir;
  const std::string path = dir.file("cluster.h5");
  {
    h5::Store store = h5::Store::create(path, /*force=*/false, kProvenance);
    EXPECT_TRUE(store.writable());
    EXPECT_EQ(store.path(), path);
    EXPECT_EQ(store.schema_version(), h5::kSchemaVersion);
    store.set_meta("world_size", int64_t{8});
    store.set_meta("backend", "cuda");  // replaces the provenance value
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_GT(H5Fis_hdf5(path.c_str()), 0);

  h5::Store store = h5::Store::open(path, /*writable=*/false);
  EXPECT_FALSE(store.writable());
  EXPECT_EQ(store.schema_version(), h5::kSchemaVersion);
  const auto meta = store.meta();
  EXPECT_EQ(meta.at("schema_version"), std::to_string(h5::kSchemaVersion));
  EXPECT_EQ(meta.at("itertime_version"), "0.1.0");
  EXPECT_EQ(meta.at("argv"), "itertime calibrate comm --out x.h5");
  EXPECT_EQ(meta.at("hostnames"), "node-a,node-b");
  EXPECT_EQ(meta.at("empty_value"), "");
  EXPECT_EQ(meta.at("backend"), "cuda");
  EXPECT_EQ(meta.at("world_size"), "8");
  EXPECT_EQ(meta.size(), kProvenance.size() + 2);
  EXPECT_TRUE(store.exists("/meta"));
  EXPECT_FALSE(store.exists("/comm"));
  EXPECT_FALSE(store.exists("/comm/points"));
  EXPECT_THROW(store.set_meta("x", "y"), InternalError) << "a read-only store must refuse writes";
}

TEST(H5Store, CreateRefusesAnExistingFileAndLeavesItUntouched) {
  TempDir dir;
  const std::string path = dir.file("cluster.h5");
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    store.table<Row>("/comm/points").append(make_row(1, 2.5, "alpha"));
  }
  const FileState before = file_state(path);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // an mtime change would be visible

  const std::string message = user_error_of([&] { h5::Store::create(path, /*force=*/false, {{"argv", "second"}}); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("--force"), std::string::npos) << message;
  EXPECT_TRUE(file_state(path) == before) << "a refused create changed the file";

  // create_or_resume without --resume refuses too.
  EXPECT_THROW(h5::Store::create_or_resume(path, false, false, {}), UserError);
  EXPECT_TRUE(file_state(path) == before);

  // The same for a file that is not HDF5 at all.
  const std::string text = dir.write("notes.txt", "precious notes\n");
  EXPECT_THROW(h5::Store::create(text, false, {}), UserError);
  EXPECT_EQ(read_bytes(text), "precious notes\n");
}

TEST(H5Store, ForceOverwrites) {
  TempDir dir;
  const std::string path = dir.file("cluster.h5");
  {
    h5::Store store = h5::Store::create(path, false, {{"argv", "first"}});
    store.table<Row>("/comm/points").append(make_row(1, 2.5, "alpha"));
  }
  {
    h5::Store store = h5::Store::create(path, /*force=*/true, {{"argv", "second"}});
    EXPECT_FALSE(store.exists("/comm/points")) << "force must start a fresh file";
  }
  h5::Store store = h5::Store::open(path, false);
  EXPECT_EQ(store.meta().at("argv"), "second");
  EXPECT_TRUE(store.list_datasets().empty());
}

TEST(H5Store, CreateInAMissingFolderIsAUserError) {
  TempDir dir;
  const std::string path = (dir.path() / "no" / "such" / "folder" / "x.h5").string();
  EXPECT_THROW(h5::Store::create(path, false, {}), UserError);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "no"));
}

// ---- tables ------------------------------------------------------------------------------------

TEST(H5Store, CompoundTableRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("cluster.h5");
  const std::vector<Row> rows = {make_row(1, 2.5, "alpha"), make_row(-7, 1e-9, "beta"),
                                 make_row(int64_t{1} << 40, 123456.789, "exactly15chars!"),
                                 make_row(4, -0.0, "this label is longer than sixteen")};
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    auto table = store.table<Row>("/comm/points");
    EXPECT_EQ(table.size(), 0u);
    table.append(rows[0]);
    EXPECT_EQ(table.size(), 1u);
    table.append(std::vector<Row>(rows.begin() + 1, rows.end()));
    table.append(std::vector<Row>{});
    EXPECT_EQ(table.size(), 4u);
  }
  h5::Store store = h5::Store::open(path, false);
  auto table = store.table<Row>("/comm/points");
  const auto read = table.read_all();
  ASSERT_EQ(read.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(read[i].id, rows[i].id) << i;
    EXPECT_EQ(read[i].time_us, rows[i].time_us) << i;
    EXPECT_EQ(h5::get_string(read[i].label), h5::get_string(rows[i].label)) << i;
  }
  EXPECT_EQ(h5::get_string(read[2].label), "exactly15chars!");
  EXPECT_EQ(h5::get_string(read[3].label), "this label is l") << "char[16] keeps 15 characters and a NUL";
  const auto middle = table.read(1, 2);
  ASSERT_EQ(middle.size(), 2u);
  EXPECT_EQ(middle[0].id, -7);
  EXPECT_EQ(middle[1].id, int64_t{1} << 40);
  EXPECT_THROW(table.read(3, 2), InternalError);
}

TEST(H5Store, AllSupportedMemberTypesRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("wide.h5");
  {
    h5::Store store = h5::Store::create(path, false, {});
    WideRow row{};
    row.rank = -3;
    row.ratio = 0.25f;
    row.ok = 1;
    row.bytes = int64_t{3} << 33;
    store.table<WideRow>("/w").append(row);
  }
  h5::Store store = h5::Store::open(path, false);
  const auto rows = store.table<WideRow>("/w").read_all();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].rank, -3);
  EXPECT_EQ(rows[0].ratio, 0.25f);
  EXPECT_EQ(rows[0].ok, 1);
  EXPECT_EQ(rows[0].bytes, int64_t{3} << 33);
}

// The list form (ITERTIME_H5_FIELDS, ITERTIME_H5_ROW_TYPE) describes a row exactly as member by member
// (ITERTIME_H5_FIELD): the same names, order, offsets and types.
TEST(H5Store, FieldListEqualsFieldByField) {
  h5::RowType by_member(sizeof(WideRow));
  ITERTIME_H5_FIELD(by_member, WideRow, rank);
  ITERTIME_H5_FIELD(by_member, WideRow, ratio);
  ITERTIME_H5_FIELD(by_member, WideRow, ok);
  ITERTIME_H5_FIELD(by_member, WideRow, bytes);
  const h5::RowType listed = row_type_of(h5::RowTag<WideRow>{});
  EXPECT_EQ(listed.field_names(), (std::vector<std::string>{"rank", "ratio", "ok", "bytes"}));
  EXPECT_EQ(listed.field_names(), by_member.field_names());
  EXPECT_EQ(listed.row_bytes(), sizeof(WideRow));
  EXPECT_TRUE(listed.type() == by_member.type()) << "offsets or member types differ";
  h5::RowType in_parts(sizeof(WideRow));
  ITERTIME_H5_FIELDS(in_parts, WideRow, rank, ratio);
  if (in_parts.row_bytes() > 0) ITERTIME_H5_FIELDS(in_parts, WideRow, ok, bytes);  // a statement, as in an if
  EXPECT_TRUE(in_parts.type() == by_member.type());
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(listed.type().getMemberOffset(i), by_member.type().getMemberOffset(i)) << i;
  }
}

TEST(H5Store, ResumeAppendsToAnExistingTable) {
  TempDir dir;
  const std::string path = dir.file("cluster.h5");
  {
    h5::Store store = h5::Store::create_or_resume(path, false, /*resume=*/true, {{"argv", "first"}});
    store.table<Row>("/gt/runs").append({make_row(1, 1.0, "a"), make_row(2, 2.0, "b")});
  }
  {
    h5::Store store = h5::Store::create_or_resume(path, false, /*resume=*/true, {{"argv", "second"}});
    EXPECT_TRUE(store.writable());
    EXPECT_EQ(store.meta().at("argv"), "first") << "resume must keep the file's provenance";
    auto table = store.table<Row>("/gt/runs");
    EXPECT_EQ(table.size(), 2u);
    table.append(make_row(3, 3.0, "c"));
  }
  const auto rows = h5::Store::open(path, false).table<Row>("/gt/runs").read_all();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].id, 1);
  EXPECT_EQ(rows[2].id, 3);
  EXPECT_EQ(h5::get_string(rows[2].label), "c");
}

TEST(H5Store, AppendedRowsSurviveAKilledWriter) {
  TempDir dir;
  const std::string path = dir.file("killed.h5");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The writer dies without closing the file (no destructors, no H5Fclose).
    try {
      auto* store = new h5::Store(h5::Store::create(path, false, {{"argv", "killed"}}));
      auto table = store->table<Row>("/comm/points");
      table.append(make_row(1, 1.5, "one"));
      table.append(make_row(2, 2.5, "two"));
      auto samples = store->samples("/comm/samples");
      samples.append(std::vector<double>{1.0, 2.0, 3.0});
    } catch (...) {
      std::_Exit(3);
    }
    std::_Exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  h5::Store store = h5::Store::open(path, false);
  const auto rows = store.table<Row>("/comm/points").read_all();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].time_us, 2.5);
  EXPECT_EQ(store.samples("/comm/samples").read_all(), (std::vector<double>{1.0, 2.0, 3.0}));
}

TEST(H5Store, SamplesArrayRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("samples.h5");
  std::vector<double> values;
  for (int i = 0; i < 10000; ++i) values.push_back(0.5 * i - 17.25);  // spans several chunks
  {
    h5::Store store = h5::Store::create(path, false, {});
    auto samples = store.samples("/comm/samples/allreduce", /*chunk_rows=*/1024);
    samples.append(std::vector<double>(values.begin(), values.begin() + 3000));
    samples.append(values[3000]);
    samples.append(std::vector<double>(values.begin() + 3001, values.end()));
    EXPECT_EQ(samples.size(), values.size());
  }
  h5::Store store = h5::Store::open(path, false);
  EXPECT_EQ(store.samples("/comm/samples/allreduce").read_all(), values);
  const auto infos = store.list_datasets();
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].element, "float64");
  EXPECT_TRUE(infos[0].fields.empty());
}

// A new store at `path` whose table /t holds `n` rows: id i, time i * 1.5, label "r<i>".
h5::Store store_with_rows(const std::string& path, int n) {
  h5::Store store = h5::Store::create(path, false, {});
  auto table = store.table<Row>("/t");
  for (int i = 0; i < n; ++i) table.append(make_row(i, i * 1.5, "r" + std::to_string(i)));
  return store;
}

TEST(H5Store, TrimShrinksOnlyLongerTablesAndArrays) {
  TempDir dir;
  const std::string path = dir.file("trim.h5");
  {
    h5::Store store = store_with_rows(path, 6);
    store.samples("/s").append(std::vector<double>{1, 2, 3});
    store.trim("/t", 4);        // compound table: 6 -> 4
    store.trim("/s", 5);        // array not longer: unchanged
    store.trim("/missing", 0);  // missing: nothing, nothing created
    EXPECT_FALSE(store.exists("/missing"));
    EXPECT_THROW(store.trim("/t", -1), InternalError);
  }
  h5::Store store = h5::Store::open(path, false);
  const auto rows = store.table<Row>("/t").read_all();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(h5::get_string(rows[3].label), "r3");
  EXPECT_EQ(store.samples("/s").size(), 3u);
  EXPECT_THROW(store.trim("/t", 1), InternalError) << "read-only stores are not trimmed";
}

TEST(H5Store, Truncate) {
  TempDir dir;
  const std::string path = dir.file("truncate.h5");
  {
    h5::Store store = store_with_rows(path, 10);
    auto table = store.table<Row>("/t");
    table.truncate(4);
    EXPECT_EQ(table.size(), 4u);
    EXPECT_THROW(table.truncate(5), InternalError) << "truncate cannot grow";
    table.append(make_row(99, 9.9, "after"));
    auto samples = store.samples("/s");
    samples.append(std::vector<double>{1, 2, 3, 4, 5});
    samples.truncate(2);
    samples.truncate(0);
    EXPECT_EQ(samples.size(), 0u);
    samples.append(7.0);
  }
  h5::Store store = h5::Store::open(path, false);
  const auto rows = store.table<Row>("/t").read_all();
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[3].id, 3);
  EXPECT_EQ(h5::get_string(rows[3].label), "r3");
  EXPECT_EQ(rows[4].id, 99);
  EXPECT_EQ(h5::get_string(rows[4].label), "after");
  EXPECT_EQ(store.samples("/s").read_all(), (std::vector<double>{7.0}));
}

TEST(H5Store, TableWithOtherFieldNamesIsRefused) {
  TempDir dir;
  const std::string path = dir.file("schema.h5");
  {
    h5::Store store = h5::Store::create(path, false, {});
    store.table<Row>("/comm/points").append(make_row(1, 2.0, "x"));
  }
  const FileState before = file_state(path);
  for (bool writable : {false, true}) {
    h5::Store store = h5::Store::open(path, writable);
    const std::string message = user_error_of([&] { store.table<RenamedRow>("/comm/points"); });
    EXPECT_NE(message.find("/comm/points"), std::string::npos) << message;
    EXPECT_NE(message.find("time_us"), std::string::npos) << "should name the stored fields: " << message;
    EXPECT_NE(message.find("latency_us"), std::string::npos) << "should name the expected fields: " << message;
    // A numeric array is not a compound table, and vice versa.
    EXPECT_THROW(store.samples("/comm/points"), UserError);
  }
  EXPECT_EQ(read_bytes(path), before.bytes);
}

TEST(H5Store, ReadOnlyStoreDoesNotCreateTables) {
  TempDir dir;
  const std::string path = dir.file("ro.h5");
  { h5::Store::create(path, false, {}); }
  const std::string before = read_bytes(path);
  h5::Store store = h5::Store::open(path, false);
  EXPECT_THROW(store.table<Row>("/missing"), UserError);
  EXPECT_THROW(store.samples("/missing"), UserError);
  EXPECT_THROW(store.ensure_group("/g"), InternalError);
  EXPECT_EQ(read_bytes(path), before);
}

// ---- files that are not ours -------------------------------------------------------------------

TEST(H5Store, OtherSchemaVersionIsRefusedNamingBothVersions) {
  TempDir dir;
  const std::string path = dir.file("future.h5");
  write_foreign_store(path, 99);
  const FileState before = file_state(path);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (bool writable : {false, true}) {
    const std::string message = user_error_of([&] { h5::Store::open(path, writable); });
    EXPECT_NE(message.find("99"), std::string::npos) << message;
    EXPECT_NE(message.find("schema version " + std::to_string(h5::kSchemaVersion)), std::string::npos) << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
  }
  EXPECT_THROW(h5::Store::create_or_resume(path, false, /*resume=*/true, {}), UserError);
  EXPECT_TRUE(file_state(path) == before) << "a refused open changed the file";
}

TEST(H5Store, HdfFileWithoutMetaIsRefused) {
  TempDir dir;
  const std::string path = dir.file("plain.h5");
  { H5::H5File file(path, H5F_ACC_TRUNC); }
  EXPECT_NE(user_error_of([&] { h5::Store::open(path, false); }).find("no /meta"), std::string::npos);
  const std::string no_version = dir.file("noversion.h5");
  {
    H5::H5File file(no_version, H5F_ACC_TRUNC);
    file.createGroup("/meta");
  }
  EXPECT_NE(user_error_of([&] { h5::Store::open(no_version, false); }).find("schema_version"), std::string::npos);
}

TEST(H5Store, TextFileIsNotAnHdf5File) {
  TempDir dir;
  const std::string path = dir.write("notes.h5", "just some text, not HDF5\n");
  const std::string message = user_error_of([&] { h5::Store::open(path, false); });
  EXPECT_NE(message.find("not an HDF5 file"), std::string::npos) << message;
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_EQ(read_bytes(path), "just some text, not HDF5\n");
  const std::string empty = dir.write("empty.h5", "");
  EXPECT_NE(user_error_of([&] { h5::Store::open(empty, true); }).find("not an HDF5 file"), std::string::npos);
}

TEST(H5Store, MissingFileAndDirectoryAreUserErrors) {
  TempDir dir;
  const std::string missing = dir.file("missing.h5");
  EXPECT_NE(user_error_of([&] { h5::Store::open(missing, false); }).find("no such file"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(missing));
  EXPECT_THROW(h5::Store::open(dir.path().string(), false), UserError);
}

// ---- listing and external readers --------------------------------------------------------------

TEST(H5Store, ListDatasets) {
  TempDir dir;
  const std::string path = dir.file("list.h5");
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    store.table<Row>("/comm/points").append({make_row(1, 1, "a"), make_row(2, 2, "b"), make_row(3, 3, "c")});
    store.samples("/comm/samples").append(std::vector<double>(7, 1.0));
    store.table<WideRow>("/groundtruth/runs");
    store.ensure_group("/ops/signatures");
    EXPECT_TRUE(store.exists("/ops/signatures"));
  }
  h5::Store store = h5::Store::open(path, false);
  std::map<std::string, h5::DatasetInfo> by_path;
  for (const auto& info : store.list_datasets()) by_path[info.path] = info;
  ASSERT_EQ(by_path.size(), 3u);
  ASSERT_TRUE(by_path.count("/comm/points"));
  ASSERT_TRUE(by_path.count("/comm/samples"));
  ASSERT_TRUE(by_path.count("/groundtruth/runs"));
  EXPECT_EQ(by_path["/comm/points"].rows, 3u);
  EXPECT_EQ(by_path["/comm/points"].element, "compound");
  EXPECT_EQ(by_path["/comm/points"].fields, (std::vector<std::string>{"id", "time_us", "label"}));
  EXPECT_EQ(by_path["/comm/samples"].rows, 7u);
  EXPECT_EQ(by_path["/comm/samples"].element, "float64");
  EXPECT_EQ(by_path["/groundtruth/runs"].rows, 0u);
  EXPECT_EQ(by_path["/groundtruth/runs"].fields, (std::vector<std::string>{"rank", "ratio", "ok", "bytes"}));
}

TEST(H5Store, H5dumpReadsWhatWeWrite) {
  const std::string h5dump = ITERTIME_H5DUMP;
  if (h5dump.empty()) GTEST_SKIP() << "h5dump not found at configure time";
  TempDir dir;
  const std::string path = dir.file("dump.h5");
  {
    h5::Store store = h5::Store::create(path, false, {{"backend", "cpu"}});
    store.table<Row>("/comm/points").append({make_row(41, 2.5, "alpha"), make_row(42, 1024.75, "bravo")});
    store.samples("/comm/samples").append(std::vector<double>{3.25, 6.5});
  }
  const std::string out = run_and_capture("'" + h5dump + "' '" + path + "' 2>&1");
  for (const char* expected : {"H5T_COMPOUND", "\"id\"", "\"time_us\"", "\"label\"", "\"schema_version\"", "\"backend\"",
                               "\"cpu\"", "41", "42", "2.5", "1024.75", "\"alpha", "\"bravo", "3.25, 6.5", "GROUP \"comm\"",
                               "DATASET \"points\"", "DATASET \"samples\"", "H5S_UNLIMITED"}) {
    EXPECT_NE(out.find(expected), std::string::npos) << "h5dump output lacks " << expected << ":\n" << out;
  }
  // The schema version is a plain integer attribute equal to kSchemaVersion.
  const std::string attr = run_and_capture("'" + h5dump + "' -a /meta/schema_version '" + path + "' 2>&1");
  EXPECT_NE(attr.find("(0): " + std::to_string(h5::kSchemaVersion)), std::string::npos) << attr;
  EXPECT_NE(attr.find("H5T_STD_I64"), std::string::npos) << attr;
}

// ---- parent rows with child spans (common/h5_parent_rows.hpp) --------------------------------------

constexpr const char* kParents = "/p/parents";
constexpr h5::ChildTable<ParentRow> kParentSamples{"/p/samples", &ParentRow::samples_offset, &ParentRow::samples_count};
constexpr h5::ChildTable<ParentRow> kParentItems{"/p/items", &ParentRow::items_offset, &ParentRow::items_count};

void append_parent(h5::Store& store, const std::string& key, const std::vector<double>& samples, const std::vector<Row>& items) {
  ParentRow parent{};
  h5::set_string(parent.key, key);
  parent.samples_offset = parent.items_offset = -7;  // overwritten by append_with_children
  h5::append_with_children(store, kParents, parent, h5::child_rows(kParentSamples, samples), h5::child_rows(kParentItems, items));
}

std::set<std::string> parent_keys(h5::Store& store) {
  return h5::complete_parent_keys<ParentRow>(
      store, kParents, [](const ParentRow& row) { return h5::get_string(row.key); }, kParentSamples, kParentItems);
}

TEST(H5ParentRows, ParentsRecordWhereTheirChildrenWent) {
  TempDir dir;
  const std::string path = dir.file("parents.h5");
  {
    h5::Store store = h5::Store::create(path, false, {});
    append_parent(store, "a", {1, 2, 3}, {make_row(10, 0, "a0"), make_row(11, 0, "a1")});
    append_parent(store, "b", {}, {make_row(20, 0, "b0")});
    append_parent(store, "c", {4, 5}, {});
  }
  h5::Store store = h5::Store::open(path, false);
  const auto parents = store.table<ParentRow>(kParents).read_all();
  ASSERT_EQ(parents.size(), 3u);
  const int64_t expected[3][4] = {{0, 3, 0, 2}, {3, 0, 2, 1}, {3, 2, 3, 0}};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(parents[i].samples_offset, expected[i][0]) << i;
    EXPECT_EQ(parents[i].samples_count, expected[i][1]) << i;
    EXPECT_EQ(parents[i].items_offset, expected[i][2]) << i;
    EXPECT_EQ(parents[i].items_count, expected[i][3]) << i;
  }
  EXPECT_EQ(store.samples("/p/samples").read_all(), (std::vector<double>{1, 2, 3, 4, 5}));
  const auto items = store.table<Row>("/p/items").read_all();
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[2].id, 20);
  EXPECT_EQ(parent_keys(store), (std::set<std::string>{"a", "b", "c"}));
}

TEST(H5ParentRows, ResumeTrimsTheChildRowsOfAParentNeverWritten) {
  TempDir dir;
  const std::string path = dir.file("killed.h5");
  {
    h5::Store store = h5::Store::create(path, false, {});
    append_parent(store, "a", {1, 2}, {make_row(1, 0, "a0")});
    append_parent(store, "b", {3}, {make_row(2, 0, "b0"), make_row(3, 0, "b1")});
    // A job killed between the children and the parent row of "c".
    store.samples("/p/samples").append(std::vector<double>{97, 98, 99});
    store.table<Row>("/p/items").append(make_row(66, 0, "orphan"));
  }
  {
    h5::Store read_only = h5::Store::open(path, false);
    EXPECT_EQ(parent_keys(read_only), (std::set<std::string>{"a", "b"}));
    EXPECT_EQ(read_only.samples("/p/samples").size(), 6u) << "a read-only store is not trimmed";
  }
  {
    h5::Store store = h5::Store::open(path, true);
    EXPECT_EQ(parent_keys(store), (std::set<std::string>{"a", "b"}));
    EXPECT_EQ(store.samples("/p/samples").size(), 3u);
    EXPECT_EQ(store.table<Row>("/p/items").size(), 3u);
    append_parent(store, "c", {5, 6}, {make_row(4, 0, "c0")});
  }
  h5::Store store = h5::Store::open(path, false);
  const auto parents = store.table<ParentRow>(kParents).read_all();
  ASSERT_EQ(parents.size(), 3u);
  EXPECT_EQ(parents[2].samples_offset, 3);
  EXPECT_EQ(parents[2].items_offset, 3);
  EXPECT_EQ(store.samples("/p/samples").read_all(), (std::vector<double>{1, 2, 3, 5, 6}));
  EXPECT_EQ(store.table<Row>("/p/items").read(3, 1)[0].id, 4);
}

TEST(H5ParentRows, NoParentTableMeansNoKeysNothingCreatedAndNoChildRowsKept) {
  TempDir dir;
  h5::Store store = h5::Store::create(dir.file("empty.h5"), false, {});
  store.samples("/p/samples").append(std::vector<double>{1, 2});
  EXPECT_TRUE(parent_keys(store).empty());
  EXPECT_FALSE(store.exists(kParents));
  EXPECT_EQ(store.samples("/p/samples").size(), 0u) << "without parents every child row is a killed job's tail";
}

// The three stores use the pattern with their own tables and offset members.
TEST(H5ParentRows, StoresTrimTheirTailsOnResume) {
  TempDir dir;
  const std::string path = dir.file("stores.h5");
  {
    h5::Store store = h5::Store::create(path, false, {});
    store::CommRow point{};
    h5::set_string(point.collective, "all_reduce");
    point.bytes = 64;
    store::append_comm_point(store, point, {1.0, 2.0});
    store.samples(store::kCommSamples).append(9.0);

    store::GroundTruthRow config{};
    h5::set_string(config.key, "cfg");
    store::append_groundtruth(store, config, {3.0}, std::vector<store::GroundTruthRankRow>(2),
                              std::vector<store::GroundTruthRoundRow>(3));
    store.samples(store::kGroundTruthSamples).append(9.0);
    store.table<store::GroundTruthRankRow>(store::kGroundTruthRanks).append(store::GroundTruthRankRow{});
    store.table<store::GroundTruthRoundRow>(store::kGroundTruthRounds).append(store::GroundTruthRoundRow{});

    store::OpStageRow stage{};
    h5::set_string(stage.stage_key, "stage");
    store::append_stage(store, stage, std::vector<store::OpSequenceRow>(3), std::vector<store::OpCommRow>(1));
    store.table<store::OpSequenceRow>(store::kOpSequences).append(store::OpSequenceRow{});
    store.table<store::OpCommRow>(store::kOpComms).append(store::OpCommRow{});
  }
  h5::Store store = h5::Store::open(path, true);
  const auto comm_keys = store::existing_comm_keys(store);
  ASSERT_EQ(comm_keys.size(), 1u);
  EXPECT_NE(comm_keys.begin()->find("all_reduce/"), std::string::npos);
  EXPECT_EQ(store.samples(store::kCommSamples).size(), 2u);
  EXPECT_EQ(store::existing_groundtruth_keys(store), (std::set<std::string>{"cfg"}));
  EXPECT_EQ(store.samples(store::kGroundTruthSamples).size(), 1u);
  EXPECT_EQ(store.table<store::GroundTruthRankRow>(store::kGroundTruthRanks).size(), 2u);
  const auto config = store.table<store::GroundTruthRow>(store::kGroundTruthTable).read_all().at(0);
  EXPECT_EQ(store.table<store::GroundTruthRoundRow>(store::kGroundTruthRounds).size(), 3u);
  EXPECT_EQ(config.ranks_count, 2);
  EXPECT_EQ(config.samples_count, 1);
  EXPECT_EQ(config.rounds_count, 3);
  EXPECT_EQ(store::existing_stage_keys(store), (std::set<std::string>{"stage"}));
  EXPECT_EQ(store.table<store::OpSequenceRow>(store::kOpSequences).size(), 3u);
  EXPECT_EQ(store.table<store::OpCommRow>(store::kOpComms).size(), 1u);
  const auto stage = store.table<store::OpStageRow>(store::kOpStages).read_all().at(0);
  EXPECT_EQ(stage.sequence_count, 3);
  EXPECT_EQ(stage.comm_offset, 0);
  EXPECT_EQ(stage.comm_count, 1);
}

// ---- schema 4 -> 5: /groundtruth/configs gained `recipe`; 5 -> 6: `cp` and `vp` ------------------

// A schema-4 calibration file: ground truth in the old row layout (two configurations, one skipped,
// with their child rows), a /comm table, and /meta schema_version 4, all through the store's primitives.
void write_schema4_file(const std::string& path) {
  h5::Store store = h5::Store::create(path, false, kProvenance);
  const char* keys[] = {"tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32", "tiny/dp1-tp3-pp1/mbs1/gbs8/seq64/fp32"};
  for (int i = 0; i < 2; ++i) {
    itertime_test_rows::GroundTruthRowSchema4 row{};
    h5::set_string(row.key, keys[i]);
    h5::set_string(row.model, "tiny");
    row.dp = i == 0 ? 2 : 1, row.tp = i == 0 ? 1 : 3, row.pp = 1;
    row.micro_batch = 1, row.global_batch = 8, row.seq_len = 64, row.num_micro_batches = 4;
    h5::set_string(row.precision, "fp32");
    h5::set_string(row.backend, "cpu");
    h5::set_string(row.status, i == 0 ? "ok" : "skipped");
    h5::set_string(row.reason, i == 0 ? "" : "needs 3 ranks, the job runs on 2");
    row.time_us_median = i == 0 ? 1500.25 : 0;
    row.round_spread_pct = 1.5;
    row.rounds_counted = i == 0 ? 3 : 0;
    row.samples_offset = 0, row.samples_count = i == 0 ? 2 : 0;
    h5::set_string(row.disturbance, "");
    h5::set_string(row.measured_utc, "2026-01-01T00:00:00Z");
    store.table<itertime_test_rows::GroundTruthRowSchema4>(store::kGroundTruthTable).append(row);
  }
  store.samples(store::kGroundTruthSamples).append(std::vector<double>{1400.0, 1600.5});
  store.table<Row>("/comm/points").append(make_row(1, 2.5, "all_reduce"));
  store.set_meta("schema_version", int64_t{4});
}

// A writer's two ways into ground truth (its keys, an append) on the schema-`version` file `store` (two
// configurations, two samples) are refused naming the file, both versions and what its rows lack
// (`lacks`), and touch nothing.
void expect_groundtruth_refused(h5::Store& store, int64_t version, const std::string& lacks) {
  EXPECT_EQ(store.schema_version(), version);
  for (const std::string& message : {user_error_of([&] { store::existing_groundtruth_keys(store); }), user_error_of([&] {
                                       store::append_groundtruth(store, store::GroundTruthRow{}, {1.0}, {}, {});
                                     })}) {
    EXPECT_NE(message.find(store.path()), std::string::npos) << message;
    EXPECT_NE(message.find("schema version " + std::to_string(version)), std::string::npos) << message;
    EXPECT_NE(message.find(lacks), std::string::npos) << message;
    EXPECT_NE(message.find("schema version " + std::to_string(h5::kSchemaVersion)), std::string::npos) << message;
    EXPECT_NE(message.find("does not add ground truth"), std::string::npos) << message;
  }
  EXPECT_EQ(store::read_groundtruth_rows(store).size(), 2u);
  EXPECT_EQ(store.samples(store::kGroundTruthSamples).size(), 2u) << "nothing was trimmed or appended";
}

// The path of the schema-`version` file `write_file` writes in `dir`.
std::string old_file(const TempDir& dir, void (*write_file)(const std::string&), int64_t version) {
  const std::string path = dir.file("v" + std::to_string(version) + ".h5");
  write_file(path);
  return path;
}

// The file `write_file` writes (schema `version`, two ground-truth configurations), opened read-only: its
// version, its ground truth as rows and as records (two of each), handed to `check` with the store; the
// current row type refused naming `refused_fields`; and the file unchanged by all that reading.
using OldGroundTruthCheck =
    std::function<void(h5::Store&, const std::vector<store::GroundTruthRow>&, const std::vector<store::GroundTruthRecord>&)>;
void expect_old_groundtruth_read(void (*write_file)(const std::string&), int64_t version, const std::string& refused_fields,
                                 const OldGroundTruthCheck& check) {
  TempDir dir;
  const std::string path = old_file(dir, write_file, version);
  const FileState before = file_state(path);
  {
    h5::Store store = h5::Store::open(path, /*writable=*/false);
    EXPECT_EQ(store.schema_version(), version);
    const std::vector<store::GroundTruthRow> rows = store::read_groundtruth_rows(store);
    ASSERT_EQ(rows.size(), 2u);
    const std::vector<store::GroundTruthRecord> records = store::read_groundtruth_records(store);
    ASSERT_EQ(records.size(), 2u);
    check(store, rows, records);
    // The current row type does not match the stored fields: only read_groundtruth_rows reads them.
    const std::string message = user_error_of([&] { store.table<store::GroundTruthRow>(store::kGroundTruthTable); });
    EXPECT_NE(message.find(refused_fields), std::string::npos) << message;
  }
  EXPECT_TRUE(file_state(path) == before) << "reading a schema-" << version << " file changed it";
}

TEST(H5StoreSchema4, GroundTruthReadsAsPlainRecipes) {
  expect_old_groundtruth_read(write_schema4_file, 4, "recipe", [](h5::Store& store, const auto& rows, const auto& records) {
    EXPECT_EQ(h5::get_string(rows[0].key), "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32");
    EXPECT_EQ(h5::get_string(rows[0].precision), "fp32");
    EXPECT_EQ(h5::get_string(rows[0].recipe), "");
    EXPECT_EQ(h5::get_string(rows[0].backend), "cpu");  // the members after the new one land in place
    EXPECT_EQ(rows[0].time_us_median, 1500.25);
    EXPECT_EQ(rows[0].samples_count, 2);
    EXPECT_EQ(h5::get_string(rows[0].measured_utc), "2026-01-01T00:00:00Z");
    EXPECT_EQ(h5::get_string(rows[1].reason), "needs 3 ranks, the job runs on 2");
    for (const auto& row : rows) {  // schema 4 had no cp and vp: (DP,TP,PP) layouts
      EXPECT_EQ(row.cp, 1) << h5::get_string(row.key);
      EXPECT_EQ(row.vp, 1) << h5::get_string(row.key);
    }
    EXPECT_EQ(rows[0].micro_batch, 1);  // the members after cp and vp land in place
    EXPECT_EQ(rows[0].num_micro_batches, 4);
    for (const auto& record : records) EXPECT_FALSE(record.techniques.any()) << record.key;
    EXPECT_EQ(records[0].status, store::RunStatus::kOk);
    EXPECT_EQ(records[1].status, store::RunStatus::kSkipped);
    EXPECT_EQ(records[0].config.dp, 2);
    EXPECT_EQ(records[0].config.cp, 1);
    EXPECT_EQ(records[0].config.vp, 1);
    EXPECT_EQ(records[0].tuple(), "(2,1,1)");
    EXPECT_EQ(records[1].occupancy(), 3);
    EXPECT_DOUBLE_EQ(records[0].round_spread_pct, 1.5);
    // The tables schemas 5 and 6 left alone read as before.
    EXPECT_EQ(store.samples(store::kGroundTruthSamples).read_all(), (std::vector<double>{1400.0, 1600.5}));
    EXPECT_EQ(store.table<Row>("/comm/points").read_all().at(0).time_us, 2.5);
  });
}

TEST(H5StoreSchema4, GroundTruthIsNeverAddedToIt) {
  TempDir dir;
  h5::Store store = h5::Store::create_or_resume(old_file(dir, write_schema4_file, 4), false, /*resume=*/true, kProvenance);
  expect_groundtruth_refused(store, 4, "no cp, vp or recipe columns");
  // The tables schemas 5 and 6 did not change are added to as before; the file stays schema 4.
  store.table<Row>("/comm/points").append(make_row(2, 3.5, "all_gather"));
  EXPECT_EQ(store.table<Row>("/comm/points").size(), 2u);
  EXPECT_EQ(store.schema_version(), 4);
  // A schema-4 file without ground truth does not get a table of the new layout either.
  const std::string bare = dir.file("v4-bare.h5");
  write_foreign_store(bare, 4);
  h5::Store bare_store = h5::Store::open(bare, true);
  EXPECT_THROW(store::append_groundtruth(bare_store, store::GroundTruthRow{}, {}, {}, {}), UserError);
  EXPECT_FALSE(bare_store.exists(store::kGroundTruthTable));
  EXPECT_FALSE(bare_store.exists(store::kGroundTruthSamples));
}

TEST(H5StoreSchema4, OnlyFourToTheCurrentVersionOpen) {
  static_assert(h5::kSchemaVersion == 6 && h5::kOldestReadableSchemaVersion == 4, "update this test and docs/schema.md");
  TempDir dir;
  for (int64_t version : {int64_t{1}, int64_t{3}, int64_t{7}}) {
    const std::string path = dir.file("v" + std::to_string(version) + ".h5");
    write_foreign_store(path, version);
    const std::string message = user_error_of([&] { h5::Store::open(path, false); });
    EXPECT_NE(message.find("schema version " + std::to_string(version)), std::string::npos) << message;
    EXPECT_NE(message.find("reads schema version 6 (and versions 4 and 5 files)"), std::string::npos) << message;
  }
  for (int64_t version : {int64_t{4}, int64_t{5}, int64_t{6}}) {
    const std::string path = dir.file("v" + std::to_string(version) + "-empty.h5");
    write_foreign_store(path, version);
    EXPECT_EQ(h5::Store::open(path, false).schema_version(), version);
    h5::Store empty = h5::Store::open(path, false);
    EXPECT_TRUE(store::read_groundtruth_rows(empty).empty());  // no ground truth: no rows, no error
  }
}

// A schema-5 calibration file: ground truth with recipes but without cp and vp (two configurations, one
// plain, one with a recipe), and /meta schema_version 5.
void write_schema5_file(const std::string& path) {
  h5::Store store = h5::Store::create(path, false, kProvenance);
  const char* recipes[] = {"", "dopt+rc-full"};
  for (int i = 0; i < 2; ++i) {
    itertime_test_rows::GroundTruthRowSchema5 row{};
    h5::set_string(row.key, std::string("tiny/dp2-tp1-pp2/mbs1/gbs8/seq64/fp32") + (i == 0 ? "" : "/dopt+rc-full"));
    h5::set_string(row.model, "tiny");
    row.dp = 2, row.tp = 1, row.pp = 2;
    row.micro_batch = 1, row.global_batch = 8, row.seq_len = 64, row.num_micro_batches = 4;
    h5::set_string(row.precision, "fp32");
    h5::set_string(row.recipe, recipes[i]);
    h5::set_string(row.backend, "cpu");
    h5::set_string(row.status, "ok");
    row.time_us_median = 2000.5 + i;
    row.samples_offset = i, row.samples_count = 1;
    h5::set_string(row.measured_utc, "2026-06-01T00:00:00Z");
    store.table<itertime_test_rows::GroundTruthRowSchema5>(store::kGroundTruthTable).append(row);
  }
  store.samples(store::kGroundTruthSamples).append(std::vector<double>{2000.5, 2001.5});
  store.set_meta("schema_version", int64_t{5});
}

TEST(H5StoreSchema5, GroundTruthKeepsRecipesAndReadsWithoutCpOrVp) {
  expect_old_groundtruth_read(write_schema5_file, 5, "expects [key,model,dp,tp,pp,cp,vp,micro_batch",
                              [](h5::Store&, const auto& rows, const auto& records) {
                                EXPECT_EQ(h5::get_string(rows[0].recipe), "");
                                EXPECT_EQ(h5::get_string(rows[1].recipe), "dopt+rc-full");
                                for (const auto& row : rows) {
                                  EXPECT_EQ(row.cp, 1) << h5::get_string(row.key);
                                  EXPECT_EQ(row.vp, 1) << h5::get_string(row.key);
                                  EXPECT_EQ(row.pp, 2);
                                  EXPECT_EQ(row.micro_batch, 1);  // the members after cp and vp land in place
                                  EXPECT_EQ(row.global_batch, 8);
                                  EXPECT_EQ(h5::get_string(row.backend), "cpu");
                                }
                                EXPECT_EQ(rows[1].time_us_median, 2001.5);
                                EXPECT_EQ(h5::get_string(rows[1].measured_utc), "2026-06-01T00:00:00Z");
                                EXPECT_FALSE(records[0].techniques.any());
                                EXPECT_TRUE(records[1].techniques.any());
                                for (const auto& record : records) {
                                  EXPECT_EQ(record.config.cp, 1) << record.key;
                                  EXPECT_EQ(record.config.vp, 1) << record.key;
                                  EXPECT_EQ(record.tuple(), "(2,1,2)") << record.key;
                                  EXPECT_EQ(record.occupancy(), 4) << record.key;
                                }
                              });
}

TEST(H5StoreSchema5, GroundTruthIsNeverAddedToIt) {
  TempDir dir;
  h5::Store store = h5::Store::create_or_resume(old_file(dir, write_schema5_file, 5), false, /*resume=*/true, kProvenance);
  expect_groundtruth_refused(store, 5, "no cp or vp columns");
  EXPECT_EQ(store.schema_version(), 5);
}

// Schema 6: cp and vp sit after `pp`, the recipe after `precision`, and both round-trip.
TEST(H5Store, GroundTruthRecipeCpAndVpColumnsRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("v6.h5");
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    for (const char* recipe : {"", "sp+vp+dopt+rc-full", "ovl-64K"}) {
      store::GroundTruthRow row{};
      h5::set_string(row.key, std::string("k/") + recipe);
      row.dp = 2, row.tp = 1, row.pp = 2, row.cp = 1, row.vp = 1;
      h5::set_string(row.precision, "fp32");
      h5::set_string(row.recipe, recipe);
      h5::set_string(row.status, "ok");
      store::append_groundtruth(store, row, {1.0}, {}, {});
    }
    store::GroundTruthRow extended{};
    h5::set_string(extended.key, "tiny/dp2-tp1-pp2-cp2-vp3/mbs1/gbs8/seq64/fp32");
    extended.dp = 2, extended.tp = 1, extended.pp = 2, extended.cp = 2, extended.vp = 3;
    extended.micro_batch = 1, extended.global_batch = 8, extended.seq_len = 64, extended.num_micro_batches = 4;
    h5::set_string(extended.precision, "fp32");
    h5::set_string(extended.status, "ok");
    store::append_groundtruth(store, extended, {1.0}, {}, {});
  }
  h5::Store store = h5::Store::open(path, false);
  EXPECT_EQ(store.schema_version(), 6);
  std::vector<std::string> fields;
  for (const auto& info : store.list_datasets()) {
    if (info.path == store::kGroundTruthTable) fields = info.fields;
  }
  ASSERT_GE(fields.size(), 14u);
  EXPECT_EQ(fields[4], "pp");
  EXPECT_EQ(fields[5], "cp");
  EXPECT_EQ(fields[6], "vp");
  EXPECT_EQ(fields[7], "micro_batch");
  EXPECT_EQ(fields[11], "precision");
  EXPECT_EQ(fields[12], "recipe");
  EXPECT_EQ(fields[13], "backend");
  const auto rows = store::read_groundtruth_rows(store);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(h5::get_string(rows[0].recipe), "");
  EXPECT_EQ(h5::get_string(rows[1].recipe), "sp+vp+dopt+rc-full");
  EXPECT_EQ(h5::get_string(rows[2].recipe), "ovl-64K");
  EXPECT_EQ(sizeof(store::GroundTruthRow::recipe), 48u);
  EXPECT_EQ(rows[0].cp, 1);
  EXPECT_EQ(rows[0].vp, 1);
  EXPECT_EQ(rows[3].cp, 2);
  EXPECT_EQ(rows[3].vp, 3);
  EXPECT_EQ(rows[3].micro_batch, 1);
  EXPECT_EQ(rows[3].num_micro_batches, 4);
  const auto records = store::read_groundtruth_records(store);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].tuple(), "(2,1,2)");
  EXPECT_EQ(records[3].config.cp, 2);
  EXPECT_EQ(records[3].config.vp, 3);
  EXPECT_EQ(records[3].config.pp, 2);
  EXPECT_EQ(records[3].tuple(), "(2,1,2,2,3)");
  EXPECT_EQ(records[3].occupancy(), 8);  // dp * cp * tp * pp
  EXPECT_EQ(records[3].config.layout_text(), "dp2-tp1-pp2-cp2-vp3");
}

// ---- damaged files: checksums, spans and dimensions ---------------------------------------------

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Flips one bit of the first occurrence of `needle` in the file; fails the test when it is absent.
void flip_bit_in(const std::string& path, const std::string& needle) {
  std::string bytes = read_bytes(path);
  const std::size_t at = bytes.find(needle);
  ASSERT_NE(at, std::string::npos) << needle << " not found in " << path;
  bytes[at + 1] = static_cast<char>(bytes[at + 1] ^ 0x04);
  write_bytes(path, bytes);
}

TEST(H5StoreDamage, NewStoresAreWrittenInTheChecksummedFormat) {
  TempDir dir;
  const std::string path = dir.file("cluster.h5");
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    store.table<Row>("/comm/points").append(make_row(1, 2.5, "alpha"));
    store.samples("/comm/samples_us").append(1.0);
  }
  H5::H5File file(path, H5F_ACC_RDONLY);
  H5F_info2_t info{};
  ASSERT_GE(H5Fget_info2(file.getId(), &info), 0);
  // Superblock 2 (HDF5 1.8 format) carries a checksum, and unlike 3 it records no open writer that a
  // killed job would leave behind (AppendedRowsSurviveAKilledWriter reopens such a file).
  EXPECT_EQ(info.super.version, 2u);
  for (const char* table : {"/comm/points", "/comm/samples_us"}) {
    const H5::DSetCreatPropList properties = file.openDataSet(table).getCreatePlist();
    bool fletcher = false;
    for (int i = 0; i < properties.getNfilters(); ++i) {
      unsigned flags = 0;
      size_t values = 0;
      unsigned config = 0;
      char name[64];
      fletcher = fletcher || properties.getFilter(i, flags, values, nullptr, sizeof(name), name, config) == H5Z_FILTER_FLETCHER32;
    }
    EXPECT_TRUE(fletcher) << table;
  }
}

TEST(H5StoreDamage, AFlippedBitInARowIsADamagedFileNotWrongData) {
  TempDir dir;
  const std::string path = dir.file("cluster.h5");
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    store.table<Row>("/comm/points").append({make_row(1, 2.5, "first-row"), make_row(2, 3.5, "needle-row")});
  }
  flip_bit_in(path, "needle-row");
  h5::Store store = h5::Store::open(path, false);
  const std::string message = user_error_of([&] { (void)store.table<Row>("/comm/points").read_all(); });
  EXPECT_NE(message.find(path + ": damaged: cannot read rows"), std::string::npos) << message;
  EXPECT_NE(message.find("restore it from a copy, or calibrate again"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(H5StoreDamage, AFlippedBitInATablesHeaderIsADamagedFile) {
  TempDir dir;
  const std::string path = dir.file("cluster.h5");
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    store.table<Row>("/comm/points").append(make_row(1, 2.5, "alpha"));
  }
  // The member name lives in the dataset's object header; without its checksum the flipped name would
  // read as a table "written by another version" instead.
  flip_bit_in(path, "time_us");
  const std::string message = user_error_of([&] {
    h5::Store store = h5::Store::open(path, false);
    (void)store.table<Row>("/comm/points").read_all();
  });
  EXPECT_NE(message.find(": damaged: cannot open table /comm/points"), std::string::npos) << message;
}

TEST(H5StoreDamage, ASpanOutsideItsChildTableIsADamagedFile) {
  EXPECT_NO_THROW(h5::check_span("f.h5", "/ops/comms", 0, 0, 0));
  EXPECT_NO_THROW(h5::check_span("f.h5", "/ops/comms", 2, 3, 5));
  EXPECT_NO_THROW(h5::check_span("f.h5", "/ops/comms", 5, 0, 5));
  for (const auto& [offset, count] : std::vector<std::pair<int64_t, int64_t>>{
           {3, 3}, {-1, 1}, {0, -1}, {6, 0}, {int64_t{1} << 62, int64_t{1} << 62}, {1, INT64_MAX}}) {
    const std::string message = user_error_of([&] { h5::check_span("f.h5", "/ops/comms", offset, count, 5); });
    EXPECT_NE(message.find("f.h5: damaged: a row points at rows [" + std::to_string(offset) + ", +" + std::to_string(count) +
                           ") of /ops/comms, which has 5"),
              std::string::npos)
        << offset << " " << count << ": " << message;
  }
}

TEST(H5StoreDamage, ADimensionBeyondTheStoredBytesIsRefusedBeforeItSizesABuffer) {
  TempDir dir;
  const std::string path = dir.file("cluster.h5");
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    store.table<Row>("/comm/points").append(make_row(1, 2.5, "alpha"));
  }
  {
    // What a damaged dimension looks like to the reader: 2^40 rows, one chunk stored.
    H5::H5File file(path, H5F_ACC_RDWR);
    const hsize_t huge[1] = {hsize_t{1} << 40};
    file.openDataSet("/comm/points").extend(huge);
  }
  h5::Store store = h5::Store::open(path, false);
  auto table = store.table<Row>("/comm/points");
  EXPECT_EQ(table.size(), std::size_t{1} << 40);
  const std::string message = user_error_of([&] { (void)table.read_all(); });
  EXPECT_NE(message.find(": damaged: a table claims 1099511627776 rows of 32 bytes but stores"), std::string::npos) << message;
  EXPECT_EQ(table.read(0, 1).at(0).id, 1) << "the stored rows still read";
}

TEST(H5StoreDamage, StoresOfTheEarlierFormatStillOpenReadAndAppend) {
  TempDir dir;
  const std::string path = dir.file("old-format.h5");
  {
    // What earlier itertime wrote: HDF5's default (earliest) format, no checksums.
    H5::H5File file(path, H5F_ACC_TRUNC);
    H5::Group meta = file.createGroup("/meta");
    const int64_t version = h5::kSchemaVersion;
    meta.createAttribute("schema_version", H5::PredType::NATIVE_INT64, H5::DataSpace(H5S_SCALAR))
        .write(H5::PredType::NATIVE_INT64, &version);
  }
  {
    h5::Store store = h5::Store::open(path, true);
    store.table<Row>("/comm/points").append(make_row(7, 1.5, "old"));
  }
  h5::Store store = h5::Store::open(path, false);
  const auto rows = store.table<Row>("/comm/points").read_all();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, 7);
  H5F_info2_t info{};
  H5::FileAccPropList unlocked;  // the store above has it open without HDF5's lock: the same settings
  H5Pset_file_locking(unlocked.getId(), false, true);
  H5::H5File file(path, H5F_ACC_RDONLY, H5::FileCreatPropList::DEFAULT, unlocked);
  ASSERT_GE(H5Fget_info2(file.getId(), &info), 0);
  EXPECT_EQ(info.super.version, 0u) << "the file keeps its format";
}

// ---- two writers; readers beside a writer -------------------------------------------------------

TEST(H5StoreWriters, ASecondWriterIsRefusedAndReadersReadBesideTheWriter) {
  TempDir dir;
  const std::string path = dir.file("live.h5");
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    store.table<Row>("/comm/points").append(make_row(1, 1.5, "first"));
  }
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The writer: appends a row, says so, and keeps the file open until told to close it.
    int status = 0;
    try {
      h5::Store store = h5::Store::open(path, true);
      store.table<Row>("/comm/points").append(make_row(2, 2.5, "second"));
      char byte = 'r';
      if (write(ready[1], &byte, 1) != 1) status = 4;
      if (read(done[0], &byte, 1) != 1) status = 5;
    } catch (...) {
      status = 3;
    }
    std::_Exit(status);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  const std::string before = read_bytes(path);
  const std::string second_writer = user_error_of([&] { (void)h5::Store::open(path, true); });
  EXPECT_NE(second_writer.find(path + ": another process is writing it"), std::string::npos) << second_writer;
  const std::string forced = user_error_of([&] { (void)h5::Store::create(path, /*force=*/true, kProvenance); });
  EXPECT_NE(forced.find(path + ": another process is writing it"), std::string::npos) << forced;
  EXPECT_EQ(read_bytes(path), before) << "a refused --force leaves the live file as it was";
  {
    // A reader beside the writer sees every row the writer appended (each append commits).
    h5::Store reader = h5::Store::open(path, false);
    const auto rows = reader.table<Row>("/comm/points").read_all();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(h5::get_string(rows[1].label), "second");
  }
  ASSERT_EQ(write(done[1], &byte, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
  h5::Store after = h5::Store::open(path, true);  // the writer is gone: writing is allowed again
  EXPECT_EQ(after.table<Row>("/comm/points").size(), 2u);
}

TEST(H5StoreWriters, ThisProcesssOwnWriterIsNotAnotherProcess) {
  // A damaged read while this process has the file open for appending is a damaged file, not "another
  // process is writing it" (the flock probe sees this process's own lock; /proc/locks names the holder).
  TempDir dir;
  const std::string path = dir.file("own.h5");
  {
    h5::Store store = h5::Store::create(path, false, kProvenance);
    store.table<Row>("/comm/points").append(make_row(1, 1.5, "first"));
  }
  h5::Store writer = h5::Store::open(path, true);
  EXPECT_NE(h5::damaged_file(path, "test").what(), std::string());
  EXPECT_NE(std::string(h5::damaged_file(path, "test").what()).find(path + ": damaged: test"), std::string::npos)
      << h5::damaged_file(path, "test").what();
}

}  // namespace
}  // namespace itertime
