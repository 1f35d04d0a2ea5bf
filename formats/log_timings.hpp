// log_timings.hpp: what every training-log reader shares (issue 34 part 2): the log's text as numbered
// lines, one-line errors naming the file and line, the per-interval iteration times a log states, and
// the one rule that turns them into a measurement (warm-up dropped, the spread kept as the floor).
// Invariants:
//  - LogText keeps the bytes it read (for the checksum) and splits them into lines numbered from 1. A
//    last line without its newline is `cut`: the log was truncated mid-line (a reader refuses it when the
//    cut line is one it reads: log_error names it).
//  - log_error(file, line, what) is "FILE:LINE: what": the one line of every malformed-log UserError.
//  - A LogInterval is one timing line: the iterations it covers (from the previous timing line, or from
//    the run's start for the first) and their mean time per iteration, in microseconds.
//  - settle() applies the warm-up rule (docs/cli.md, "import"): the first interval is always dropped (it
//    holds the first iteration: initialisation, allocator and communicator warm-up, compilation); then
//    each next leading interval is dropped while it is more than kSettleFraction (5%) away from the median of
//    the intervals after it. At least kMinSteadyIntervals must remain, else a UserError naming the file.
//    The measurement is the median of the steady intervals; its floor (spread_pct) is the mean
//    |interval - median| / median over them, in % (round_spread_pct's meaning, with intervals as rounds).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/errors.hpp"

namespace itertime::formats {

struct LogText {
  std::string source;              // the file name as given
  std::string bytes;               // the whole file
  std::vector<std::string> lines;  // without their newline ('\r' removed too)
  bool cut = false;                // the last line has no newline: the log ends mid-line
  bool is_cut(std::size_t index) const { return cut && index + 1 == lines.size(); }
};
LogText read_log(const std::string& path);  // UserError when it cannot be read
LogText log_from_text(std::string source, std::string bytes);

UserError log_error(const std::string& file, std::size_t line, const std::string& what);
// Throws log_error unless `counter` (the log's word for it: "iteration", "step") is past `previous`, the
// counter of the line before: a counter that does not grow is two runs interleaved, or a restart.
void require_growing(const std::string& file, std::size_t line, const std::string& word, int64_t counter, int64_t previous);

// A line without ANSI colour escapes (torchtitan colours its metrics line on a terminal).
std::string strip_ansi(std::string_view line);
// The number at the start of `text` (after blanks; thousands commas allowed when `commas`), the whole
// token up to a blank, '|' or the end. False when it is not a finite number.
bool parse_number(std::string_view text, double& value, bool commas = false);
bool parse_integer(std::string_view text, int64_t& value);
// The text after `label` in `line` (npos-safe); empty view when `label` is not there.
std::string_view after(std::string_view line, std::string_view label);
// The field's text for an error: up to its '|' (or two blanks), blanks trimmed.
std::string field_text(std::string_view text);

struct LogInterval {
  std::size_t line = 0;        // 1-based line of the log
  int64_t last_iteration = 0;  // the iteration (step) the line reports
  int64_t iterations = 1;      // iterations the line's time covers
  double time_us = 0;          // mean iteration time over them
};

inline constexpr double kSettleFraction = 0.05;
inline constexpr std::size_t kMinSteadyIntervals = 2;

struct LogMeasurement {
  std::size_t intervals_total = 0, intervals_warmup = 0;
  int64_t warmup_iters = 0, timed_iters = 0;
  std::vector<double> steady_us;  // the steady intervals' times, in log order
  double time_us_median = 0, time_us_mean = 0, time_us_min = 0, time_us_max = 0, time_us_p90 = 0, time_cv = 0;
  double spread_pct = 0;  // the floor
};
LogMeasurement settle(const std::string& file, const std::vector<LogInterval>& intervals);

// SHA-256 of `bytes` as 64 lowercase hex digits (OpenSSL's EVP, libcrypto).
std::string sha256_hex(std::string_view bytes);

}  // namespace itertime::formats
