// test_interruption_journal.cpp: preemption is not failure (common/interruption_journal.hpp) and a
// configuration measured again supersedes its old row (common/groundtruth_store.hpp):
//  - SIGTERM, SIGINT and SIGHUP are journaled and still end the process by that signal, also when they
//    arrive inside a SignalDeferral scope (held, then raised to the journal's handler); an ignored
//    SIGHUP stays ignored; the handler's previous action comes back with the destructor;
//  - judge_in_flight: interrupted once -> pending, twice in a row -> failed (naming --retry-failed),
//    no interruption or a journal of another key or none -> failed as before, --retry-failed -> pending;
//  - the newest row of a key wins in read_groundtruth_rows and read_groundtruth_records (what validate,
//    fit and predict read), while read_every_groundtruth_row keeps every row.
// Signal cases run in a forked child (the signal ends it), which reports through a pipe how far it got.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>

#include "common/calibration_records.hpp"
#include "common/groundtruth_store.hpp"
#include "common/interruption_journal.hpp"
#include "common/signal_deferral.hpp"
#include "tests/unit/child_process.hpp"
#include "tests/unit/temp_dir.hpp"

namespace itertime {
namespace {

using testing::ChildResult;
using testing::run_in_child;
using testing::say;

constexpr const char* kKey = "tiny/dp2-tp1-pp1/mbs1/gbs2/seq16/fp32";

TEST(InterruptionJournal, EachSignalIsJournaledAndStillEndsTheProcess) {
  for (const int signal_number : {SIGTERM, SIGINT, SIGHUP}) {
    testing::TempDir folder;
    const std::string path = interruption_journal_path(folder.file("gt.h5"));
    const ChildResult child = run_in_child([&](int fd) {
      InterruptionJournal journal(path);
      journal.begin(kKey, 1);
      say(fd, "begun;");
      raise(signal_number);
      say(fd, "survived;");
    });
    EXPECT_EQ(child.reached, "begun;") << signal_number;
    EXPECT_EQ(child.signal, signal_number);
    const InterruptionRecord record = read_interruption_journal(path);
    EXPECT_EQ(record.key, kKey);
    EXPECT_EQ(record.prior_interruptions, 1);
    EXPECT_TRUE(record.interrupted) << testing::read_bytes(path);
  }
}

TEST(InterruptionJournal, ASignalHeldByASignalDeferralReachesTheJournalWhenTheWriteEnds) {
  testing::TempDir folder;
  const std::string path = interruption_journal_path(folder.file("gt.h5"));
  const ChildResult child = run_in_child([&](int fd) {
    InterruptionJournal journal(path);
    journal.begin(kKey, 0);
    {
      SignalDeferral write_in_progress;
      raise(SIGTERM);
      say(fd, "write finished;");
    }
    say(fd, "survived;");
  });
  EXPECT_EQ(child.reached, "write finished;");
  EXPECT_EQ(child.signal, SIGTERM);
  EXPECT_TRUE(read_interruption_journal(path).interrupted);
}

TEST(InterruptionJournal, BeforeAnyRoundNothingIsJournaledAndAnIgnoredSignalStaysIgnored) {
  testing::TempDir folder;
  const std::string path = interruption_journal_path(folder.file("gt.h5"));
  const ChildResult child = run_in_child([&](int fd) {
    signal(SIGHUP, SIG_IGN);  // as under nohup
    InterruptionJournal journal(path);
    raise(SIGHUP);
    say(fd, "ignored;");
    raise(SIGTERM);  // no round begun: nothing to journal, the process still ends
    say(fd, "survived;");
  });
  EXPECT_EQ(child.reached, "ignored;");
  EXPECT_EQ(child.signal, SIGTERM);
  EXPECT_FALSE(std::ifstream(path).good()) << "a journal without a round";
}

TEST(InterruptionJournal, TheDestructorRestoresTheHandlerAndRemovesItsFileFinishRemovesAny) {
  testing::TempDir folder;
  const std::string path = interruption_journal_path(folder.file("gt.h5"));
  {
    InterruptionJournal journal(path);
    journal.begin(kKey, 0);
    struct sigaction current {};
    sigaction(SIGTERM, nullptr, &current);
    EXPECT_NE(current.sa_handler, SIG_DFL);
    EXPECT_THROW(InterruptionJournal second(path), std::logic_error);
  }
  struct sigaction after {};
  sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, SIG_DFL);
  EXPECT_FALSE(std::ifstream(path).good()) << "the journal of a run that did not end cleanly stays";

  folder.write("gt.h5.inflight", "itertime groundtruth interruption journal 1\nkey x\ninterrupted by signal 15\n");
  {
    InterruptionJournal journal(path);  // a previous run's journal is left alone until the clean end
    EXPECT_TRUE(read_interruption_journal(path).interrupted);
    journal.finish();
    EXPECT_FALSE(std::ifstream(path).good());
  }
}

TEST(InterruptionJournal, ParsesWhatBeginAndTheHandlerWrite) {
  const InterruptionRecord record = parse_interruption_journal(
      "itertime groundtruth interruption journal 1\nkey a/b\nprior_interruptions 1\ninterrupted by signal 15\n");
  EXPECT_EQ(record.key, "a/b");
  EXPECT_EQ(record.prior_interruptions, 1);
  EXPECT_TRUE(record.interrupted);
  // Cut while being rewritten, or not a journal: nothing.
  EXPECT_EQ(parse_interruption_journal("interrupted by signal 15\n").key, "");
  EXPECT_FALSE(parse_interruption_journal("interrupted by signal 15\n").interrupted);
  EXPECT_EQ(parse_interruption_journal("itertime groundtruth interruption journal 1\nkey a\nprior_interruptions x\n")
                .prior_interruptions,
            0);
}

TEST(InterruptionJournal, JudgesTheInFlightConfiguration) {
  using Kind = InFlightVerdict::Kind;
  InterruptionRecord interrupted{kKey, 0, true};
  EXPECT_EQ(judge_in_flight("", interrupted, false).kind, Kind::none);

  const InFlightVerdict once = judge_in_flight(kKey, interrupted, false);
  EXPECT_EQ(once.kind, Kind::pending);
  EXPECT_EQ(once.interruptions, 1);

  interrupted.prior_interruptions = 1;
  const InFlightVerdict twice = judge_in_flight(kKey, interrupted, false);
  EXPECT_EQ(twice.kind, Kind::failed);
  EXPECT_NE(twice.reason.find("interrupted twice in a row while being measured"), std::string::npos) << twice.reason;
  EXPECT_NE(twice.reason.find("--retry-failed"), std::string::npos);
  EXPECT_LT(twice.reason.size(), sizeof(store::GroundTruthRow::reason));
  EXPECT_EQ(judge_in_flight(kKey, interrupted, true).kind, Kind::pending);
  EXPECT_EQ(judge_in_flight(kKey, interrupted, true).interruptions, 0);

  // No interruption recorded, another key's journal, no journal (files from before it): failed as before.
  const std::string crashed = "failed: the previous run died while measuring this configuration (out of memory or a crash)";
  for (const InterruptionRecord& record :
       {InterruptionRecord{kKey, 0, false}, InterruptionRecord{"other", 0, true}, InterruptionRecord{}}) {
    const InFlightVerdict verdict = judge_in_flight(kKey, record, false);
    EXPECT_EQ(verdict.kind, Kind::failed);
    EXPECT_EQ(verdict.reason.rfind(crashed, 0), 0u) << verdict.reason;
    EXPECT_EQ(judge_in_flight(kKey, record, true).kind, Kind::pending);
  }
}

store::GroundTruthRow row_of(const std::string& key, const std::string& status, double time_us) {
  store::GroundTruthRow row{};
  h5::set_string(row.key, key);
  h5::set_string(row.model, "tiny");
  row.dp = 2, row.tp = 1, row.pp = 1, row.cp = 1, row.vp = 1, row.micro_batch = 1, row.global_batch = 2, row.seq_len = 16;
  row.num_micro_batches = 1;
  h5::set_string(row.precision, "fp32");
  h5::set_string(row.status, status);
  row.time_us_median = time_us;
  return row;
}

TEST(GroundTruthRows, TheNewestRowOfAKeyWins) {
  testing::TempDir folder;
  const std::string path = folder.file("gt.h5");
  {
    h5::Store store = h5::Store::create(path, false, {{"argv", "test"}});
    store::append_groundtruth(store, row_of("a", "failed", 0), {}, {}, {});
    store::append_groundtruth(store, row_of("b", "ok", 20), {2.0}, {}, {});
    store::append_groundtruth(store, row_of("a", "ok", 10), {1.0}, {}, {});  // --retry-failed measured it again
  }
  h5::Store store = h5::Store::open(path, true);
  EXPECT_EQ(store::read_every_groundtruth_row(store).size(), 3u);
  const auto rows = store::read_groundtruth_rows(store);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(h5::get_string(rows[0].key), "b");
  EXPECT_EQ(h5::get_string(rows[1].key), "a");
  EXPECT_EQ(h5::get_string(rows[1].status), "ok");
  const auto records = store::read_groundtruth_records(store);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].key, "a");
  EXPECT_EQ(records[1].status, store::RunStatus::kOk);
  EXPECT_DOUBLE_EQ(records[1].time_us_median, 10);
  EXPECT_EQ(store::existing_groundtruth_keys(store), (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(store.samples(store::kGroundTruthSamples).size(), 2u);  // nothing trimmed
}

}  // namespace
}  // namespace itertime
