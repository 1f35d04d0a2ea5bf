// megatron_log.cpp: see the header (format strings: megatron/training/arguments.py _print_args,
// megatron/training/training.py training_log).
#include "formats/megatron_log.hpp"

#include <algorithm>

namespace itertime::formats {

namespace {

constexpr std::string_view kHeader = "------------------------ arguments ------------------------";
constexpr std::string_view kFooter = "-------------------- end of arguments ---------------------";
constexpr std::string_view kIteration = " iteration ";
constexpr std::string_view kElapsed = "elapsed time per iteration (ms):";

// "  num_layers ........ 32" (after the launcher's prefix): name and value; false when not that shape.
bool argument_line(std::string_view line, std::string& name, std::string& value) {
  if (line.size() < 3 || line.substr(0, 2) != "  ") return false;
  line.remove_prefix(2);
  const std::size_t space = line.find(' ');
  if (space == 0 || space == std::string_view::npos) return false;
  name = std::string(line.substr(0, space));
  std::size_t at = space + 1;
  while (at < line.size() && line[at] == '.') ++at;
  if (at >= line.size() || line[at] != ' ') return false;
  value = std::string(line.substr(at + 1));
  return true;
}

}  // namespace

bool is_megatron_log(const LogText& log) {
  for (const std::string& line : log.lines) {
    if (line.find(kElapsed) != std::string::npos || line.find(kHeader) != std::string::npos) return true;
  }
  return false;
}

// Long because it is one pass over the log's lines whose state (inside the arguments block, its prefix,
// the iteration lines' last step) every case reads; split, each piece would take that whole state.
MegatronLog parse_megatron_log(const LogText& log, bool arguments_required, bool timings_required) {
  MegatronLog out;
  out.arguments.source = log.source;
  const std::string& file = log.source;
  bool in_block = false, block_done = false;
  std::size_t block_line = 0;
  std::string prefix;
  int64_t previous = 0;
  for (std::size_t i = 0; i < log.lines.size(); ++i) {
    const std::string& raw = log.lines[i];
    const std::size_t number = i + 1;
    const std::size_t header = raw.find(kHeader);
    if (header != std::string::npos) {
      if (in_block)
        throw log_error(
            file, number,
            "a second arguments block inside the first (line " + std::to_string(block_line) + "): two runs interleaved");
      if (block_done) {
        throw log_error(file, number,
                        "a second arguments block (the first at line " + std::to_string(block_line) +
                            "): two runs in one log; import each run's log on its own");
      }
      in_block = true;
      block_line = number;
      prefix = raw.substr(0, header);
      continue;
    }
    if (in_block) {
      if (raw.find(kFooter) != std::string::npos) {
        in_block = false;
        block_done = true;
        continue;
      }
      if (log.is_cut(i)) throw log_error(file, number, "the log ends mid-line inside the arguments block");
      // Rank 0 prints the block while the other ranks start up: a line that is not an argument line (of
      // the block's prefix) is another process's output, skipped; an argument printed twice is refused below.
      std::string_view line(raw);
      if (line.substr(0, prefix.size()) != prefix) continue;
      line.remove_prefix(prefix.size());
      std::string name, value;
      if (!argument_line(line, name, value)) continue;
      if (out.arguments.values.count(name) != 0 || out.arguments.line_of.count(name) != 0) {
        throw log_error(
            file, number,
            "argument " + name + " printed twice (first at line " + std::to_string(out.arguments.line_of[name]) + ")");
      }
      out.arguments.line_of[name] = static_cast<int>(number);
      if (value == "None") continue;
      if (value == "True") value = "true";
      if (value == "False") value = "false";
      out.arguments.values[name] = value;
      continue;
    }
    if (!timings_required) continue;  // the arguments block only (--from a log)
    const std::size_t elapsed = raw.find(kElapsed);
    const std::size_t iteration_at = raw.find(kIteration);
    if (elapsed == std::string::npos) {
      // A timing line cut before its time: the iteration counter is there, the time is not.
      if (log.is_cut(i) && iteration_at != std::string::npos && raw.find("consumed samples") != std::string::npos) {
        throw log_error(file, number, "the log ends mid-line (a timing line without its elapsed time)");
      }
      continue;
    }
    if (!block_done && arguments_required) {
      throw log_error(file, number,
                      "a timing line before any arguments block: not the whole Megatron-LM log (its start, with "
                      "'" +
                          std::string(kHeader) +
                          "', is needed for the layout; a Megatron-Bridge log prints none: give its --config)");
    }
    if (log.is_cut(i) && raw.find(" |", elapsed) == std::string::npos) {
      throw log_error(file, number, "the log ends mid-line (the timing line is cut)");
    }
    if (iteration_at == std::string::npos || iteration_at > elapsed) {
      throw log_error(file, number, "a timing line without 'iteration N/TOTAL'");
    }
    const std::string_view counter = std::string_view(raw).substr(iteration_at + kIteration.size());
    const std::size_t slash = counter.find('/');
    int64_t iteration = 0, total = 0;
    if (slash == std::string_view::npos || !parse_integer(counter.substr(0, slash), iteration) ||
        !parse_integer(counter.substr(slash + 1), total)) {
      throw log_error(file, number, "'iteration' is not N/TOTAL");
    }
    double ms = 0;
    const std::string_view time_text = std::string_view(raw).substr(elapsed + kElapsed.size());
    if (!parse_number(time_text, ms) || ms <= 0) {
      throw log_error(file, number, "elapsed time per iteration (ms) '" + field_text(time_text) + "' is not a positive number");
    }
    if (out.intervals.empty()) {
      out.train_iters = total;
    } else {
      if (total != out.train_iters) {
        throw log_error(file, number,
                        "iteration " + std::to_string(iteration) + "/" + std::to_string(total) + " after one of /" +
                            std::to_string(out.train_iters) + ": two runs interleaved");
      }
      require_growing(file, number, "iteration", iteration, previous);
    }
    // LogInterval's fields in order: line, last_iteration, iterations (the first: set below), time_us.
    out.intervals.push_back(LogInterval{number, iteration, out.intervals.empty() ? 0 : iteration - previous, ms * 1000.0});
    previous = iteration;
  }
  if (in_block) throw log_error(file, block_line, "the arguments block has no end ('end of arguments'): the log is truncated");
  if (!block_done && arguments_required) {
    throw log_error(file, log.lines.size(), "no Megatron-LM arguments block ('" + std::string(kHeader) + "')");
  }
  if (!timings_required) return out;
  if (out.intervals.empty()) {
    throw log_error(file, log.lines.size(), "no timing line ('iteration N/TOTAL | ... | elapsed time per iteration (ms): T')");
  }
  // The first line covers the iterations since the run (or its resumed checkpoint) started: the log
  // interval, as the later lines show, or its own iteration count when that is smaller.
  LogInterval& first = out.intervals.front();
  const int64_t interval = out.intervals.size() > 1 ? out.intervals[1].iterations : first.last_iteration;
  first.iterations = std::max<int64_t>(1, std::min(first.last_iteration, interval));
  return out;
}

}  // namespace itertime::formats
