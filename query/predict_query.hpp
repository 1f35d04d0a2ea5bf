// predict_query.hpp: one configuration's prediction as a typed request and a typed answer, for both front
// ends (`itertime predict`, launcher/cmd_predict.cpp; the Python module's predict, python/). The
// request carries every option of the verb with the command's defaults and the set of options the user
// gave; the answer is the prediction record (its findings, range, "rests on", memory), the placement of
// a calibration's groups, and what `--from` read.
// Invariants:
//  - Every rule lives here once: the defaults of options left out (--gbs the smallest the layout allows,
//    --precision by the device), what --from supplies and a flag beside it overrides, the refusal of an
//    implausible answer (UserError unless allow_implausible, then flags that void the measured range),
//    the range's choice, the placement. A front parses its own syntax and prints or converts the answer.
//  - A user error is a UserError with one line, raised before anything is printed or written.
//  - Options are named by their command-line names in `given` ("--dp", "--gbs") and in messages.
//  - A new rule of both fronts (a default framework on a GPU description, a refusal of an answer over the
//    device's memory) goes here (configuration_answer, refuse_or_flag in the .cpp), never into a front.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "formats/user_run.hpp"
#include "query/query_options.hpp"
#include "validate/prediction_report.hpp"

namespace itertime::query {

struct PredictRequest {
  std::string source;      // a fitted model or calibration .h5 ("" with --hardware or framework megatron-te)
  std::string model_file;  // LLaMA config.json; "" with --from
  FromOptions from;        // --from FILE / --from-format / --megatron-args
  int dp = 1, tp = 1, pp = 1, cp = 1, vp = 1, micro_batch = 1, seq_len = 0;
  int global_batch = 0;   // not given: the smallest the layout allows
  std::string precision;  // not given: amp-bf16 on a GPU description, else fp32
  std::string recipe = "plain";
  bool blind = false, raw = false, allow_implausible = false;
  double device_memory_gib = 0;        // 0: the GPU description's memory
  std::string hardware;                // a data/hardware description (another than the calibration's: described)
  std::string efficiency;              // operator efficiencies carried to a described device
  std::string fitted;                  // the framework model's terms fitted on logs (megatron-te)
  int nodes = 0;                       // must agree with the layout on the described device (0: unchecked)
  int64_t ranks_per_node = -1;         // on a calibration (-1: not given, its own)
  std::string framework = "itertime";  // itertime | megatron-te (not given: default_framework's, by the device)
  std::string fp8_recipe = "delayed";
  bool tp_comm_overlap = false, fp8_param_gather = false;
  int gpus = 0;  // dp = gpus / (tp x pp x cp) when --dp is not given
  // The options the user gave, by their command-line names ("--dp", "--gbs", "--precision", ...).
  std::set<std::string> given;
  bool was_given(const std::string& flag) const { return given.count(flag) != 0; }
};

struct PredictAnswer {
  validate::PredictionRecord record;
  int64_t ranks_per_node = -1;               // >= 0: a calibration's, whose groups' placement is shown
  std::optional<formats::UserRun> from_run;  // what --from read
  std::vector<std::string> overridden;       // flags given beside --from that changed its values
};

PredictAnswer answer_predict(const PredictRequest& request);

// `itertime predict --json`'s object: the record, its placement on a calibration, the --from input.
std::string predict_json(const PredictAnswer& answer);

// The lines printed before the record's table (what --from read), and the placement line after it ("" none).
std::vector<std::string> predict_preamble_lines(const PredictAnswer& answer);
std::string predict_placement_line(const PredictAnswer& answer);

}  // namespace itertime::query
