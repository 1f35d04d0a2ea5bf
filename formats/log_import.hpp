// log_import.hpp: a user's training log made into imported ground truth (issue 34 part 2, `itertime
// import`): which format it is, the run it trained (UserRun), its measurement (log_timings.hpp settle), and
// the /groundtruth rows that record them (common/groundtruth_store.hpp).
// Invariants:
//  - A Megatron-LM log states its run in its arguments block: the run is user_run_from_megatron of it,
//    and a run given beside it is refused (the log is the truth of what ran). NeMo and torchtitan logs
//    state no layout: the run must be given (the command line or a configuration file), else a UserError.
//  - Everything is parsed and checked before any row is made; the rows are a pure function of the import.
//  - The configs row's key is "log-" + the log's first 12 SHA-256 hex digits + ":" + the key itertime
//    would give the configuration (common/job.hpp): the same log imported twice has the same key.
//  - The configs row's backend is "log" (kImportedBackend), its status ok, its samples the steady
//    intervals' times; rounds_run / rounds_counted are the timing lines read / kept, round_spread_pct the
//    floor; no rank or round rows.
#pragma once

#include <optional>
#include <string>

#include "common/groundtruth_store.hpp"
#include "formats/log_timings.hpp"
#include "formats/user_run.hpp"

namespace itertime::formats {

enum class LogFormat { kAuto, kMegatron, kNemo, kTorchtitan };
LogFormat parse_log_format(const std::string& text);  // auto | megatron | nemo | torchtitan
std::string to_string(LogFormat format);              // "megatron-log", "nemo-log", "torchtitan-log" ("auto")
// The format `log` is in (kAuto: by its content); a UserError naming the file when none fits.
LogFormat detect_log_format(const LogText& log);

struct LogImport {
  std::string log_name, sha256;
  LogFormat format = LogFormat::kAuto;
  UserRun run;
  LogMeasurement measurement;
  std::size_t first_steady_line = 0, last_line = 0;
  std::string key() const;
};

LogImport import_log(const LogText& log, LogFormat format, const std::optional<UserRun>& given);

store::GroundTruthRow groundtruth_row(const LogImport& imported, const std::string& utc);
store::GroundTruthImportRow import_row(const LogImport& imported, const std::string& utc);

}  // namespace itertime::formats
