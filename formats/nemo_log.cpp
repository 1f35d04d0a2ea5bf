// nemo_log.cpp: see the header (format strings: nemo/lightning/pytorch/callbacks/progress_printer.py,
// nemo/utils/exp_manager.py).
#include "formats/nemo_log.hpp"

#include <algorithm>
#include <cmath>

namespace itertime::formats {

namespace {
constexpr std::string_view kTiming = "train_step_timing in s";
constexpr std::string_view kTrainingEpoch = "Training epoch ";
constexpr std::string_view kStep = "Step ";
}  // namespace

bool is_nemo_log(const LogText& log) {
  for (const std::string& line : log.lines) {
    if (line.find(kTiming) != std::string::npos) return true;
  }
  return false;
}

// Long because it is one pass over the log's lines that recognizes NeMo's two timing forms (the timing
// printer, per-step deltas) and shares their state (the form seen, the previous step, the total).
std::vector<LogInterval> parse_nemo_log(const LogText& log) {
  const std::string& file = log.source;
  std::vector<LogInterval> out;
  enum class Kind { kNone, kPrinter, kDelta } kind = Kind::kNone;
  int64_t previous = -1, total = -1;
  bool per_step_first = false;
  for (std::size_t i = 0; i < log.lines.size(); ++i) {
    const std::string& line = log.lines[i];
    const std::size_t number = i + 1;
    const std::size_t timing = line.find(kTiming);
    const std::size_t epoch = line.find(kTrainingEpoch);
    if (timing == std::string::npos) {
      if (log.is_cut(i) && epoch != std::string::npos)
        throw log_error(file, number, "the log ends mid-line (a timing line without its train_step_timing)");
      continue;
    }
    std::string_view value_text = std::string_view(line).substr(timing + kTiming.size());
    int64_t step = 0, line_total = -1;
    Kind line_kind;
    if (epoch != std::string::npos && epoch < timing) {
      line_kind = Kind::kPrinter;
      if (value_text.substr(0, 1) != ":") throw log_error(file, number, "'train_step_timing in s' without ': T'");
      value_text.remove_prefix(1);
      // The step: global_step when printed (MegatronStrategy), else the iteration of the epoch.
      const std::string_view global = after(line, "| global_step: ");
      const std::string_view iteration = after(line, ", iteration ");
      const std::size_t slash = iteration.find('/');
      if (slash == std::string_view::npos || !parse_integer(iteration.substr(slash + 1), line_total)) {
        throw log_error(file, number, "'iteration' is not N/TOTAL");
      }
      double global_value = 0;
      if (!global.empty()) {
        // A step count: whole, not negative, and exact in a double (a float is what the printer writes).
        if (!parse_number(global, global_value) || global_value < 0 || global_value > 9e15 ||
            global_value != std::floor(global_value)) {
          throw log_error(file, number, "global_step is not a step number (a whole number from 0)");
        }
        step = static_cast<int64_t>(global_value);
      } else if (!parse_integer(iteration.substr(0, slash), step)) {
        throw log_error(file, number, "'iteration' is not N/TOTAL");
      }
    } else {
      line_kind = Kind::kDelta;
      const std::size_t step_at = line.rfind(kStep, timing);
      const std::string_view counter =
          step_at == std::string::npos ? std::string_view() : std::string_view(line).substr(step_at + kStep.size());
      if (counter.find(':') == std::string_view::npos || !parse_integer(counter.substr(0, counter.find(':')), step)) {
        throw log_error(
            file, number,
            "a 'train_step_timing in s' line that is neither 'Training epoch E, iteration N/T | ...' nor 'Step N: ...'");
      }
      if (value_text.substr(0, 1) != "=") throw log_error(file, number, "'train_step_timing in s' without '=T'");
      value_text.remove_prefix(1);
    }
    if (kind != Kind::kNone && line_kind != kind) {
      throw log_error(file, number, "progress-printer and per-step timing lines mixed: two runs or two callbacks interleaved");
    }
    kind = line_kind;
    if (log.is_cut(i) && kind == Kind::kPrinter && value_text.find('|') == std::string_view::npos) {
      throw log_error(file, number, "the log ends mid-line (the timing line is cut)");
    }
    if (log.is_cut(i) && kind == Kind::kDelta) throw log_error(file, number, "the log ends mid-line (the timing line is cut)");
    double seconds = 0;
    if (!parse_number(value_text, seconds) || seconds <= 0) {
      throw log_error(file, number, "train_step_timing in s '" + field_text(value_text) + "' is not a positive number");
    }
    if (!out.empty()) {
      if (line_total != total) {
        throw log_error(file, number,
                        "a run of " + std::to_string(line_total + 1) + " steps after one of " + std::to_string(total + 1) +
                            ": two runs interleaved");
      }
      require_growing(file, number, "step", step, previous);
    }
    // LogInterval's fields in order: line, last_iteration, iterations, time_us.
    out.push_back(LogInterval{number, step, out.empty() ? 1 : step - previous, seconds * 1e6});
    per_step_first = kind == Kind::kDelta;
    previous = step;
    total = line_total;
  }
  if (out.empty()) throw log_error(file, log.lines.size(), "no 'train_step_timing in s' line (NeMo's TimingCallback)");
  if (!per_step_first && out.size() > 1)
    out.front().iterations = std::max<int64_t>(1, std::min(out.front().last_iteration + 1, out[1].iterations));
  return out;
}

}  // namespace itertime::formats
