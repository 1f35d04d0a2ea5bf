// torchtitan_log.cpp: see the header (format string: torchtitan/components/metrics.py MetricsProcessor.log).
#include "formats/torchtitan_log.hpp"

#include <algorithm>

namespace itertime::formats {

namespace {
constexpr std::string_view kStep = "step: ";
constexpr std::string_view kTps = "  tps: ";
// The metrics line: "step:" at the start of the message (after the logger's " - INFO - " or at the line's start).
std::size_t step_at(const std::string& line) {
  const std::size_t at = line.find(kStep);
  if (at == std::string::npos) return at;
  if (at >= 9 && line.compare(at - 9, 9, "validate ") == 0) return std::string::npos;
  if (at == 0 || line.compare(0, at, std::string(at, ' ')) == 0) return at;
  if (at >= 3 && line.compare(at - 3, 3, " - ") == 0) return at;
  return std::string::npos;
}
}  // namespace

bool is_torchtitan_log(const LogText& log) {
  for (const std::string& raw : log.lines) {
    const std::string line = strip_ansi(raw);
    if (step_at(line) != std::string::npos && line.find(kTps) != std::string::npos) return true;
  }
  return false;
}

std::vector<TorchtitanStep> parse_torchtitan_log(const LogText& log) {
  const std::string& file = log.source;
  std::vector<TorchtitanStep> out;
  for (std::size_t i = 0; i < log.lines.size(); ++i) {
    const std::string line = strip_ansi(log.lines[i]);
    const std::size_t number = i + 1;
    const std::size_t at = step_at(line);
    if (at == std::string::npos) continue;
    const std::size_t tps_at = line.find(kTps, at);
    if (tps_at == std::string::npos || (log.is_cut(i) && line.find("mfu: ", tps_at) == std::string::npos)) {
      if (log.is_cut(i)) throw log_error(file, number, "the log ends mid-line (the metrics line is cut)");
      if (line.find("  loss: ", at) == std::string::npos) continue;  // another message starting with "step: "
      throw log_error(file, number, "a metrics line without 'tps: N'");
    }
    TorchtitanStep step;
    step.line = number;
    if (!parse_integer(std::string_view(line).substr(at + kStep.size()), step.step)) {
      throw log_error(file, number, "'step:' is not a whole number");
    }
    const std::string_view tps_text = std::string_view(line).substr(tps_at + kTps.size());
    if (!parse_number(tps_text, step.tps, /*commas=*/true) || step.tps <= 0) {
      throw log_error(file, number, "tps '" + field_text(tps_text) + "' is not a positive number");
    }
    if (!out.empty()) {
      require_growing(file, number, "step", step.step, out.back().step);
      step.steps = step.step - out.back().step;
    } else {
      step.steps = std::max<int64_t>(1, step.step);
    }
    out.push_back(step);
  }
  if (out.empty()) throw log_error(file, log.lines.size(), "no torchtitan metrics line ('step: N  loss: ...  tps: ...')");
  return out;
}

std::vector<LogInterval> torchtitan_intervals(const std::vector<TorchtitanStep>& steps, int64_t tokens_per_step,
                                              int64_t world_size) {
  std::vector<LogInterval> out;
  for (const TorchtitanStep& s : steps) {
    LogInterval interval;
    interval.line = s.line;
    interval.last_iteration = s.step;
    interval.iterations = s.steps;
    interval.time_us = 1e6 * static_cast<double>(tokens_per_step) / (s.tps * static_cast<double>(world_size));
    out.push_back(interval);
  }
  return out;
}

}  // namespace itertime::formats
