// interruption_journal.hpp: tells a preempted ground-truth configuration from one that crashed the job.
// While `calibrate groundtruth` runs, rank 0 keeps a small journal file next to its output
// (`OUTPUT.inflight`): rewritten when a round of a configuration starts (the configuration's key and how
// many times in a row it was already interrupted), and appended to by a signal handler when SIGTERM,
// SIGINT or SIGHUP (a Slurm preemption or requeue, a Ctrl-C, a lost terminal) ends the run. The next
// --resume reads it (judge_in_flight) beside /meta `groundtruth_in_flight`: an interrupted configuration
// stays pending and is measured again, one that died without a signal (out of memory, a crash, SIGKILL)
// is recorded failed, and one interrupted twice in a row while in flight is recorded failed too (mpirun
// sends SIGTERM to every rank when one rank crashes, so a signal alone does not prove a preemption).
// Invariants:
//  - Process-wide, like common/signal_deferral.hpp: the handler is process state. The one piece of global
//    mutable state is the journal's file descriptor (a volatile sig_atomic_t the handler reads): -1 no
//    journal, -2 a journal whose file is not open (or is being rewritten), >= 0 the file to append to.
//    One InterruptionJournal at a time per process (the constructor throws otherwise).
//  - The handler is async-signal-safe (write(2), sigaction, raise; no allocation, no HDF5): it appends one
//    line, restores the default action and raises the signal again, so the process ends as it did before.
//    It is installed only for the signals whose action was the default (an ignored SIGHUP, as under nohup,
//    stays ignored); the destructor restores the previous actions.
//  - It composes with SignalDeferral: a signal held inside an HDF5 write is raised, when the write ends,
//    to the handler installed before the deferral, i.e. this one.
//  - The journal is only believed when /meta `groundtruth_in_flight` names the same key: rank 0 rewrites
//    it (begin) before it sets that attribute, and the attribute is empty, or names a configuration
//    already judged failed, while it does. The file is removed at the clean end of a run (finish), and by
//    the destructor when this run wrote it (an exception: the in-flight configuration is then failed).
#pragma once

#include <csignal>
#include <string>

namespace itertime {

// Interrupted this many times in a row while in flight, a configuration is recorded failed.
inline constexpr int kMaxInterruptionsInFlight = 2;

// What a journal says (parse_interruption_journal); every field empty/zero when there is none.
struct InterruptionRecord {
  std::string key;              // the configuration whose round last began ("" if none)
  int prior_interruptions = 0;  // its interruptions in a row before that round
  bool interrupted = false;     // a signal ended the run after that round began
};

// `output_path` + ".inflight".
std::string interruption_journal_path(const std::string& output_path);
InterruptionRecord parse_interruption_journal(const std::string& text);
// The journal at `path`; an empty record when there is no such file.
InterruptionRecord read_interruption_journal(const std::string& path);

// What a resumed run does with the configuration /meta says was in flight.
struct InFlightVerdict {
  enum class Kind { none, pending, failed };
  Kind kind = Kind::none;
  int interruptions = 0;  // pending: its interruptions in a row so far (what the next begin() carries)
  std::string reason;     // failed: the row's reason
};
// `in_flight_key`: /meta groundtruth_in_flight ("" = none). Interrupted while in flight -> pending,
// unless that makes kMaxInterruptionsInFlight in a row; no interruption recorded (or a journal of
// another key, or none: files written before the journal existed) -> failed. With `retry_failed`, both
// failed cases are pending (with a count of 0).
InFlightVerdict judge_in_flight(const std::string& in_flight_key, const InterruptionRecord& journal, bool retry_failed);

class InterruptionJournal {
 public:
  // Installs the handler; does not touch the file (a previous run's journal stays until begin or finish).
  explicit InterruptionJournal(std::string path);
  ~InterruptionJournal();  // restores the previous actions; removes the file if this journal wrote it
  InterruptionJournal(const InterruptionJournal&) = delete;
  InterruptionJournal& operator=(const InterruptionJournal&) = delete;

  // Rewrites the journal for a round of `key` (creating the file on first use). If the file cannot be
  // written, says so once on stderr and goes on without it (an interruption then reads as a crash).
  void begin(const std::string& key, int prior_interruptions);
  // The run ended cleanly: removes the file, whoever wrote it.
  void finish();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool warned_ = false;
  bool installed_[3] = {false, false, false};
  struct sigaction previous_[3]{};
};

}  // namespace itertime
