// megatron_log.hpp: a Megatron-LM training log read into its arguments and its timing lines (issue 34).
// Formats followed (NVIDIA/Megatron-LM, commit d98e8a6):
//  - megatron/training/arguments.py _print_args: rank 0 prints
//      "------------------------ arguments ------------------------", then one line per argument,
//      '  {} {} {}'.format(arg, '.' * (48 - len(arg)), value), sorted, then
//      "-------------------- end of arguments ---------------------".
//  - megatron/training/training.py training_log: every log_interval iterations the last rank prints
//      " [YYYY-MM-DD hh:mm:ss.ffffff] iteration {:8d}/{:8d} | consumed samples: {:12d} | elapsed time per
//      iteration (ms): {:.1f} | ... | global batch size: {:5d} | ..." (the time is the interval's mean).
// Invariants:
//  - A prefix a launcher puts before each line (srun's "0: ", a timestamp) is allowed: it is whatever
//    precedes the block's header, and lines are read after it. Inside the block, a line that is not an
//    argument line of that prefix is another process's output (the other ranks start up meanwhile):
//    skipped.
//  - The arguments become MegatronArguments (megatron_arguments.hpp): True/False -> "true"/"false",
//    None not stored, line_of the log's line.
//  - Every malformed log is one UserError "FILE:LINE: what" (log_timings.hpp): no arguments block
//    before the first timing line (when required), a block without its end, a second block (two runs in one log), an
//    iteration not after the previous one or a different total (interleaved runs), a time that is not a
//    number, a timing line cut mid-line, no timing line at all.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/log_timings.hpp"
#include "formats/megatron_arguments.hpp"

namespace itertime::formats {

struct MegatronLog {
  MegatronArguments arguments;
  std::vector<LogInterval> intervals;
  int64_t train_iters = 0;  // the total the timing lines name
};

// `arguments_required` false: a log without an arguments block is read for its timing lines only (a
// Megatron-Bridge log: NVIDIA-NeMo/Megatron-Bridge 067f987, src/megatron/bridge/training/utils/train_utils.py
// prints the same timing line and saves its configuration to a YAML file instead of printing arguments).
// `timings_required` false (--from a log: its arguments only): the timing lines are not read, and a log
// without any is accepted; the arguments block is then required.
MegatronLog parse_megatron_log(const LogText& log, bool arguments_required = true, bool timings_required = true);

// Whether `log` looks like a Megatron-LM log (a timing line's label or the arguments header in it).
bool is_megatron_log(const LogText& log);

}  // namespace itertime::formats
