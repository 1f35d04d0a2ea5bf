// interruption_journal.cpp: see interruption_journal.hpp.
#include "common/interruption_journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace itertime {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};
constexpr int kSignalCount = sizeof(kSignals) / sizeof(kSignals[0]);
constexpr int kNoJournal = -1;
constexpr int kNoFile = -2;

// The journal's descriptor, for the handler (see the header: the one piece of global state).
volatile std::sig_atomic_t g_journal_fd = kNoJournal;

constexpr const char* kHeader = "itertime groundtruth interruption journal 1";
constexpr const char* kKeyTag = "key ";
constexpr const char* kPriorTag = "prior_interruptions ";
constexpr const char* kInterruptedTag = "interrupted";

// Async-signal-safe: one write of a line built on the stack, then the default action, raised again.
extern "C" void record_interruption(int signal_number) {
  const int saved_errno = errno;
  const int fd = g_journal_fd;
  if (fd >= 0) {
    char line[48] = "interrupted by signal ";
    std::size_t length = std::strlen(line);
    char digits[12];
    int count = 0;
    for (int value = signal_number > 0 ? signal_number : 0; count == 0 || value > 0; value /= 10) {
      digits[count++] = static_cast<char>('0' + value % 10);
    }
    while (count > 0) line[length++] = digits[--count];
    line[length++] = '\n';
    const ssize_t written = ::write(fd, line, length);
    (void)written;  // nothing more can be done here
  }
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal_number, &action, nullptr);
  raise(signal_number);  // pending until this handler returns (the signal is blocked inside it)
  errno = saved_errno;
}

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

std::string interruption_journal_path(const std::string& output_path) { return output_path + ".inflight"; }

InterruptionRecord parse_interruption_journal(const std::string& text) {
  InterruptionRecord record;
  std::istringstream lines(text);
  std::string line;
  bool header = false;
  while (std::getline(lines, line)) {
    if (line == kHeader) {
      header = true;
    } else if (starts_with(line, kKeyTag)) {
      record.key = line.substr(std::strlen(kKeyTag));
    } else if (starts_with(line, kPriorTag)) {
      try {
        record.prior_interruptions = std::max(0, std::stoi(line.substr(std::strlen(kPriorTag))));
      } catch (const std::exception&) {
        record.prior_interruptions = 0;
      }
    } else if (starts_with(line, kInterruptedTag)) {
      record.interrupted = true;
    }
  }
  if (!header) return InterruptionRecord{};  // not a journal (or one cut while being rewritten)
  return record;
}

InterruptionRecord read_interruption_journal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InterruptionRecord{};
  std::ostringstream text;
  text << in.rdbuf();
  return parse_interruption_journal(text.str());
}

InFlightVerdict judge_in_flight(const std::string& in_flight_key, const InterruptionRecord& journal, bool retry_failed) {
  InFlightVerdict verdict;
  if (in_flight_key.empty()) return verdict;
  if (journal.key == in_flight_key && journal.interrupted) {
    const int interruptions = journal.prior_interruptions + 1;
    if (interruptions < kMaxInterruptionsInFlight || retry_failed) {
      verdict.kind = InFlightVerdict::Kind::pending;
      verdict.interruptions = retry_failed ? 0 : interruptions;
      return verdict;
    }
    verdict.kind = InFlightVerdict::Kind::failed;
    verdict.reason = "failed: interrupted " +
                     (interruptions == 2 ? std::string("twice") : std::to_string(interruptions) + " times") +
                     " in a row while being measured (likely out of memory or a crash on another rank); "
                     "see its log; --retry-failed measures it again";
    return verdict;
  }
  if (retry_failed) {
    verdict.kind = InFlightVerdict::Kind::pending;
    return verdict;
  }
  verdict.kind = InFlightVerdict::Kind::failed;
  verdict.reason = "failed: the previous run died while measuring this configuration (out of memory or a crash); see its log";
  return verdict;
}

InterruptionJournal::InterruptionJournal(std::string path) : path_(std::move(path)) {
  if (g_journal_fd != kNoJournal) throw std::logic_error("InterruptionJournal: only one at a time per process");
  g_journal_fd = kNoFile;
  struct sigaction action {};
  action.sa_handler = record_interruption;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  for (int i = 0; i < kSignalCount; ++i) {
    struct sigaction current {};
    if (sigaction(kSignals[i], nullptr, &current) != 0) continue;
    if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO) != 0) continue;  // someone else's
    installed_[i] = sigaction(kSignals[i], &action, &previous_[i]) == 0;
  }
}

InterruptionJournal::~InterruptionJournal() {
  for (int i = 0; i < kSignalCount; ++i) {
    if (installed_[i]) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  g_journal_fd = kNoJournal;
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());  // this run wrote it and did not end cleanly: its in-flight key reads as failed
  }
}

void InterruptionJournal::begin(const std::string& key, int prior_interruptions) {
  g_journal_fd = kNoFile;  // a signal meanwhile is not recorded (the attribute does not name `key` yet)
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  std::string text = std::string(kHeader) + "\n" + kKeyTag + key + "\n" + kPriorTag + std::to_string(prior_interruptions) + "\n";
  bool ok = fd_ >= 0 && ::ftruncate(fd_, 0) == 0;
  for (std::size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  if (!ok) {
    if (!warned_) {
      std::fprintf(stderr,
                   "itertime: warning: cannot write %s (%s): a configuration interrupted by a signal will be "
                   "recorded failed\n",
                   path_.c_str(), std::strerror(errno));
      warned_ = true;
    }
    return;
  }
  g_journal_fd = fd_;
}

void InterruptionJournal::finish() {
  g_journal_fd = kNoFile;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
}

}  // namespace itertime
