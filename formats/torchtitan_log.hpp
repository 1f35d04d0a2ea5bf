// torchtitan_log.hpp: the metrics lines of a torchtitan training log (issue 34). Format followed
// (pytorch/torchtitan, commit b5bcd76): torchtitan/components/metrics.py MetricsProcessor.log prints,
// through the "[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s" logger
// (torchtitan/tools/logging.py), every log_freq steps (and at step 1):
//   "step: {step:2}  loss: {:8.5f}  grad_norm: {:7.4f}  memory: {:5.2f}GiB({:.2f}%)  tps: {round(tps):,}
//    tflops: {:,.2f}  mfu: {:.2f}%" (ANSI colours around the fields on a terminal).
// The iteration time is derived from tps, which is defined there as the tokens this rank consumed since the
// last log over (elapsed time x non_data_parallel_size): a rank consumes global_batch x seq_len / dp tokens
// per step, so the time per step is global_batch x seq_len / (tps x world_size), world_size = dp x tp x pp x
// cp (exact but for tps being rounded to a whole number). Its 'time_metrics/end_to_end(s)' goes to the
// metric loggers only, not to the text log. "validate step:" lines are not training steps and are skipped.
// Malformed logs are one UserError "FILE:LINE: what" (log_timings.hpp): a step not after the previous
// one (interleaved runs), a tps that is not a number, a metrics line cut mid-line, no metrics line.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/log_timings.hpp"

namespace itertime::formats {

struct TorchtitanStep {
  std::size_t line = 0;
  int64_t step = 0;
  int64_t steps = 1;  // steps since the previous metrics line
  double tps = 0;     // tokens per second per device
};

std::vector<TorchtitanStep> parse_torchtitan_log(const LogText& log);
bool is_torchtitan_log(const LogText& log);

// The intervals of those lines for a run of `tokens_per_step` (global batch x sequence) on `world_size`
// devices: time_us = tokens_per_step / (tps x world_size).
std::vector<LogInterval> torchtitan_intervals(const std::vector<TorchtitanStep>& steps, int64_t tokens_per_step,
                                              int64_t world_size);

}  // namespace itertime::formats
