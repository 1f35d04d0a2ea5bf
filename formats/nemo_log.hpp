// nemo_log.hpp: the step timings of a NeMo 2 (Lightning) training log (issue 34). Formats followed
// (NVIDIA/NeMo, commit 8cfedd7):
//  - nemo/lightning/pytorch/callbacks/progress_printer.py ProgressPrinter.on_train_batch_end and
//    format_string: every log_interval steps, "Training epoch {E}, iteration {n-1}/{total-1}" followed by
//    " | {metric}: {val}" per metric (integers whole, others '{val:.4}'), the metrics averaged over the
//    interval; TimingCallback (nemo/utils/exp_manager.py) adds "train_step_timing in s" to them and
//    MegatronStrategy "global_step".
//  - nemo/utils/exp_manager.py DeltaTimingCallback._on_batch_end: one line per step through NeMo's logger,
//    "Step {step}: train_step_timing in s={dt}".
// The log states no layout: the run's layout, model and precision come from the command line (or a
// configuration file) at import. Malformed logs are one UserError "FILE:LINE: what" (log_timings.hpp):
// a step not after the previous one or a different total (interleaved runs), a time that is not a
// number, a timing line cut mid-line, no timing line.
#pragma once

#include <vector>

#include "formats/log_timings.hpp"

namespace itertime::formats {

std::vector<LogInterval> parse_nemo_log(const LogText& log);
bool is_nemo_log(const LogText& log);

}  // namespace itertime::formats
