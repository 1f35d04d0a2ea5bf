// Unit tests of the store's crash consistency (common/h5store.hpp: the working copy committed by rename,
// transactions, the writer lock on the working copy): a fork()ed writer SIGKILLed at random instants and
// inside commits leaves a file that opens and holds whole rows only, and the next writer (--resume)
// continues it; a killed create leaves no file (or, forced, the old one); a second writer is refused; a
// reader sees committed rows only; child rows without their parent are never committed, and are trimmed
// on resume where an older itertime left them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <H5Cpp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.hpp"
#include "common/h5_parent_rows.hpp"
#include "common/h5store.hpp"
#include "temp_dir.hpp"
#include "user_error.hpp"

namespace itertime_test_crash {

struct CrashRow {
  int64_t id;
  double value;  // id * 1.5: a row is whole when it matches its id
  char label[16];
};

struct CrashParent {
  char key[16];
  int64_t samples_offset, samples_count;
};

itertime::h5::RowType row_type_of(itertime::h5::RowTag<CrashRow>) { return ITERTIME_H5_ROW_TYPE(CrashRow, id, value, label); }
itertime::h5::RowType row_type_of(itertime::h5::RowTag<CrashParent>) {
  return ITERTIME_H5_ROW_TYPE(CrashParent, key, samples_offset, samples_count);
}

}  // namespace itertime_test_crash

namespace itertime {
namespace {

using namespace itertime::testing;  // TempDir, read_bytes, user_error_of
using itertime_test_crash::CrashParent;
using itertime_test_crash::CrashRow;

constexpr const char* kRows = "/crash/rows";
constexpr const char* kParents = "/crash/parents";
constexpr const char* kSamples = "/crash/samples";
constexpr h5::ChildTable<CrashParent> kSamplesSpan{kSamples, &CrashParent::samples_offset, &CrashParent::samples_count};

CrashRow row_of(int64_t id) {
  CrashRow row{};
  row.id = id;
  row.value = static_cast<double>(id) * 1.5;
  h5::set_string(row.label, "row" + std::to_string(id));
  return row;
}

// Parent i owns i % 3 + 1 samples, valued i + 0.25 * j.
std::vector<double> samples_of(int64_t i) {
  std::vector<double> samples;
  for (int64_t j = 0; j <= i % 3; ++j) samples.push_back(static_cast<double>(i) + 0.25 * static_cast<double>(j));
  return samples;
}

void append_parent(h5::Store& store, int64_t i) {
  CrashParent parent{};
  h5::set_string(parent.key, "p" + std::to_string(i));
  h5::append_with_children(store, kParents, parent, h5::child_rows(kSamplesSpan, samples_of(i)));
}

std::set<std::string> parent_keys(h5::Store& store) {
  return h5::complete_parent_keys<CrashParent>(
      store, kParents, [](const CrashParent& row) { return h5::get_string(row.key); }, kSamplesSpan);
}

// What a killed writer's file holds; "" when it is whole, else what is wrong.
struct Contents {
  int64_t rows = 0, parents = 0;
};

std::string check_whole(const std::string& path, Contents& contents) {
  try {
    h5::Store store = h5::Store::open(path, false);
    const auto rows = store.exists(kRows) ? store.table<CrashRow>(kRows).read_all() : std::vector<CrashRow>{};
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const CrashRow expected = row_of(static_cast<int64_t>(i));
      if (rows[i].id != expected.id || rows[i].value != expected.value ||
          h5::get_string(rows[i].label) != h5::get_string(expected.label)) {
        return "row " + std::to_string(i) + " is not whole (id " + std::to_string(rows[i].id) + ")";
      }
    }
    const auto parents = store.exists(kParents) ? store.table<CrashParent>(kParents).read_all() : std::vector<CrashParent>{};
    const auto samples = store.exists(kSamples) ? store.samples(kSamples).read_all() : std::vector<double>{};
    int64_t end = 0;
    for (std::size_t i = 0; i < parents.size(); ++i) {
      const CrashParent& parent = parents[i];
      if (h5::get_string(parent.key) != "p" + std::to_string(i))
        return "parent " + std::to_string(i) + " has key " + h5::get_string(parent.key);
      if (parent.samples_offset != end)
        return "parent " + std::to_string(i) + "'s span starts at " + std::to_string(parent.samples_offset);
      const std::vector<double> expected = samples_of(static_cast<int64_t>(i));
      if (parent.samples_count != static_cast<int64_t>(expected.size()) ||
          static_cast<std::size_t>(parent.samples_offset + parent.samples_count) > samples.size() ||
          !std::equal(expected.begin(), expected.end(), samples.begin() + parent.samples_offset)) {
        return "parent " + std::to_string(i) + "'s samples are not its own";
      }
      end += parent.samples_count;
    }
    if (static_cast<std::size_t>(end) != samples.size()) {
      return std::to_string(samples.size() - static_cast<std::size_t>(end)) + " samples no parent points at (orphans)";
    }
    contents.rows = static_cast<int64_t>(rows.size());
    contents.parents = static_cast<int64_t>(parents.size());
  } catch (const std::exception& error) {
    return std::string("does not read: ") + error.what();
  }
  return "";
}

// The writer of the kill tests (in a fork()ed child): creates or resumes `path`, writes a byte to `ready`
// (when >= 0), then appends plain rows and parents with children, one of each per step, until killed (or
// `steps` steps). Exits 3 on an error.
[[noreturn]] void writer_child(const std::string& path, const char* pause_us, int steps, int ready = -1) {
  int status = 0;
  try {
    ::setenv("ITERTIME_TEST_COMMIT_PAUSE_US", pause_us, 1);
    h5::Store store = h5::Store::create_or_resume(path, false, true, {{"argv", "writer_child"}});
    const std::set<std::string> keys = parent_keys(store);
    auto rows = store.table<CrashRow>(kRows);
    int64_t next_row = static_cast<int64_t>(rows.size());
    int64_t next_parent = static_cast<int64_t>(keys.size());
    const char byte = 'r';
    if (ready >= 0 && write(ready, &byte, 1) != 1) status = 4;
    for (int step = 0; step < steps; ++step) {
      rows.append(row_of(next_row++));
      append_parent(store, next_parent++);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "writer_child: %s\n", error.what());
    status = 3;
  }
  std::_Exit(status);
}

int wait_for(pid_t child) {
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  return status;
}

// ---- a writer killed at random instants, and inside commits ----------------------------------------

TEST(H5StoreCrash, AWriterKilledAnywhereLeavesWholeRowsAndResumeContinues) {
  TempDir dir;
  const std::string path = dir.file("killed.h5");
  const std::string staged = path + ".itertime-commit";
  std::mt19937 random(20261202);
  Contents last;
  int inside_commits = 0, killed = 0;
  for (int round = 0; round < 45; ++round) {
    const bool existed = std::filesystem::exists(path);
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) writer_child(path, "300", 100000, ready[1]);
    close(ready[1]);
    // A third of the rounds kill while the file is being opened or created; the others once the
    // writer has begun to append (whatever the load on the machine), at random or inside a commit.
    char byte = 0;
    if (round % 3 != 0) {
      ASSERT_EQ(read(ready[0], &byte, 1), 1);
    }
    close(ready[0]);
    if (round % 3 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 30000));
    } else if (round % 3 == 1) {
      // Inside a commit: the copy has begun (the staged file exists; the hook pauses half way).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!std::filesystem::exists(staged) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      // Every second such round waits a random part of the commit's pauses more (copy, rename).
      if (round % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(random() % 700));
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 20000));
    }
    ASSERT_EQ(kill(child, SIGKILL), 0);
    const int status = wait_for(child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round << ": the writer ended by itself (status " << status << ")";
    ++killed;
    // A commit file now means the kill landed inside a commit, after its copy began and before its
    // rename: every writer drops the one a killed writer left when it takes the working copy.
    inside_commits += std::filesystem::exists(staged) ? 1 : 0;
    if (!std::filesystem::exists(path)) {
      ASSERT_FALSE(existed) << "round " << round << ": a kill removed the file";
      continue;
    }
    Contents now;
    const std::string problem = check_whole(path, now);
    ASSERT_EQ(problem, "") << "round " << round << " left " << path << " damaged";
    EXPECT_GE(now.rows, last.rows) << "round " << round << ": committed rows were lost";
    EXPECT_GE(now.parents, last.parents) << "round " << round << ": committed parents were lost";
    if (std::getenv("ITERTIME_TEST_VERBOSE"))
      std::fprintf(stderr, "round %d: %lld rows\n", round, static_cast<long long>(now.rows));
    last = now;
  }
  EXPECT_EQ(killed, 45);
  EXPECT_GE(inside_commits, 6) << "too few kills landed inside a commit to test it";
  std::printf("[crash] %d of %d kills landed inside a commit\n", inside_commits, killed);
  // The file is resumed once more, to its end: every row and parent since the first is there, once.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) writer_child(path, "0", 5);
  const int status = wait_for(child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Contents end;
  ASSERT_EQ(check_whole(path, end), "");
  EXPECT_GE(end.rows, last.rows + 5);
  EXPECT_GE(end.parents, last.parents + 5);
  EXPECT_GT(last.rows, 0) << "no kill came late enough for a row to be committed";
  EXPECT_FALSE(std::filesystem::exists(h5::work_path_of(path))) << "a writer that ended removes its working copy";
}

// ---- create ------------------------------------------------------------------------------------

// Starts a writer that creates `path` (force as given) with the hook's pauses, and kills it once the
// working copy exists, or once the commit's copy began (`in_commit`).
void kill_inside_create(const std::string& path, bool force, bool in_commit) {
  const std::string watched = in_commit ? path + ".itertime-commit" : h5::work_path_of(path);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setenv("ITERTIME_TEST_COMMIT_PAUSE_US", "200000", 1);
    try {
      h5::Store store = h5::Store::create(path, force, {{"argv", "create"}});
    } catch (...) {
      std::_Exit(3);
    }
    std::_Exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::filesystem::exists(watched) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(watched));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  const int status = wait_for(child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
}

TEST(H5StoreCrash, AKilledCreateLeavesNoFileAndAKilledForcedCreateTheOldOne) {
  TempDir dir;
  for (const bool in_commit : {false, true}) {
    const std::string path = dir.file(in_commit ? "new-commit.h5" : "new.h5");
    kill_inside_create(path, false, in_commit);
    EXPECT_FALSE(std::filesystem::exists(path)) << "a killed create left " << path;
    // The next create (or --resume, which creates a missing file) starts over in the leftover working copy.
    { h5::Store store = h5::Store::create(path, false, {}); }
    EXPECT_EQ(h5::Store::open(path, false).schema_version(), h5::kSchemaVersion);
  }
  const std::string old_path = dir.file("old.h5");
  {
    h5::Store store = h5::Store::create(old_path, false, {});
    store.table<CrashRow>(kRows).append(row_of(0));
  }
  const std::string before = read_bytes(old_path);
  for (const bool in_commit : {false, true}) {
    kill_inside_create(old_path, true, in_commit);
    EXPECT_EQ(read_bytes(old_path), before) << "a killed create --force changed the old file before its commit";
  }
  { h5::Store store = h5::Store::create(old_path, true, {}); }
  EXPECT_FALSE(h5::Store::open(old_path, false).exists(kRows)) << "a create --force that finished replaced it";
}

// ---- writers and readers -------------------------------------------------------------------------

TEST(H5StoreCrash, ASecondWriterInThisProcessIsRefusedAndAStaleWorkingCopyIsDiscarded) {
  TempDir dir;
  const std::string path = dir.file("one-writer.h5");
  {
    h5::Store writer = h5::Store::create(path, false, {});
    writer.table<CrashRow>(kRows).append(row_of(0));
    EXPECT_TRUE(std::filesystem::exists(h5::work_path_of(path)));
    const std::string second = user_error_of([&] { (void)h5::Store::open(path, true); });
    EXPECT_NE(second.find(path + ": another process is writing it"), std::string::npos) << second;
    const std::string forced = user_error_of([&] { (void)h5::Store::create(path, true, {}); });
    EXPECT_NE(forced.find(path + ": another process is writing it"), std::string::npos) << forced;
    EXPECT_EQ(writer.table<CrashRow>(kRows).size(), 1u);
  }
  EXPECT_FALSE(std::filesystem::exists(h5::work_path_of(path)));
  // What a killed writer leaves: a working copy with rows never committed (here: garbage). It is dropped.
  {
    std::ofstream stale(h5::work_path_of(path), std::ios::binary);
    stale << "not a committed file";
  }
  h5::Store writer = h5::Store::open(path, true);
  EXPECT_EQ(writer.table<CrashRow>(kRows).size(), 1u);
  writer.table<CrashRow>(kRows).append(row_of(1));
  Contents contents;
  EXPECT_EQ(check_whole(path, contents), "");
  EXPECT_EQ(contents.rows, 2);
}

TEST(H5StoreCrash, AReaderSeesCommittedRowsOnlyAndKeepsTheFileItOpened) {
  TempDir dir;
  const std::string path = dir.file("readers.h5");
  h5::Store writer = h5::Store::create(path, false, {});
  writer.table<CrashRow>(kRows).append(row_of(0));
  h5::Store early = h5::Store::open(path, false);
  {
    const h5::Store::Transaction together(writer);
    writer.table<CrashRow>(kRows).append(row_of(1));
    append_parent(writer, 0);
    h5::Store reader = h5::Store::open(path, false);
    EXPECT_EQ(reader.table<CrashRow>(kRows).size(), 1u) << "a transaction's rows are not in the file before it ends";
    EXPECT_FALSE(reader.exists(kParents));
  }
  h5::Store reader = h5::Store::open(path, false);
  EXPECT_EQ(reader.table<CrashRow>(kRows).size(), 2u);
  EXPECT_EQ(reader.table<CrashParent>(kParents).size(), 1u);
  // A reader that opened before the commits still reads its whole file (the name moved on, not its bytes).
  EXPECT_EQ(early.table<CrashRow>(kRows).read_all().size(), 1u);
}

// ---- orphans -------------------------------------------------------------------------------------

TEST(H5StoreCrash, AParentThatFailsTakesItsChildrenWithItAndNothingMoreIsCommitted) {
  TempDir dir;
  const std::string path = dir.file("orphans.h5");
  {
    h5::Store store = h5::Store::create(path, false, {});
    append_parent(store, 0);
    // A parent table of other fields makes the parent's append fail after its samples were written.
    store.remove(kParents);
    store.table<CrashRow>(kParents).append(row_of(0));
    EXPECT_NE(user_error_of([&] { append_parent(store, 1); }).find("has fields"), std::string::npos);
    bool refused = false;
    try {
      store.table<CrashRow>(kRows).append(row_of(0));
    } catch (const InternalError&) {
      refused = true;
    }
    EXPECT_TRUE(refused) << "a store whose transaction was abandoned commits nothing more";
  }
  h5::Store store = h5::Store::open(path, false);
  EXPECT_EQ(store.samples(kSamples).size(), 1u) << "the failed parent's samples never reached the file";
  EXPECT_FALSE(store.exists(kRows));
}

TEST(H5StoreCrash, ChildRowsAnOlderWriterLeftWithoutTheirParentTableAreTrimmedOnResume) {
  TempDir dir;
  const std::string path = dir.file("older.h5");
  {
    // What an older itertime killed between a first child span and its parent row left.
    h5::Store store = h5::Store::create(path, false, {});
    store.samples(kSamples).append(std::vector<double>{1, 2});
  }
  h5::Store store = h5::Store::open(path, true);
  EXPECT_TRUE(parent_keys(store).empty());
  EXPECT_EQ(store.samples(kSamples).size(), 0u);
  append_parent(store, 0);
  Contents contents;
  EXPECT_EQ(check_whole(path, contents), "");
  EXPECT_EQ(contents.parents, 1);
}

}  // namespace
}  // namespace itertime
