// import_query.hpp: `itertime import LOG... -o CAL` as a typed request for both front ends: users'
// training logs (Megatron-LM, NeMo 2, torchtitan) read into CAL's /groundtruth as imported ground truth
// (formats/log_import.hpp), for `validate` to score.
// Invariants:
//  - Every log is read, parsed and checked, and every key checked against CAL, before CAL is opened for
//    writing: a malformed log is one line "FILE:LINE: what" (a UserError), with CAL untouched (not created).
//  - All the logs of one request are appended in one commit (common/h5store.hpp): all or none.
//  - A Megatron-LM log states its run; for NeMo and torchtitan logs the run is given in the request
//    (--config, or --model and the layout flags), the same for every log.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/log_import.hpp"

namespace itertime::query {

struct ImportRequest {
  std::vector<std::string> logs;
  std::string output;
  std::string format = "auto";
  // The run of a NeMo or torchtitan log (a Megatron-LM log states its own): a configuration file, or
  // --model and the layout flags.
  std::string config_file;
  std::string model_file;
  int dp = 1, tp = 1, pp = 1, cp = 1, vp = 1, micro_batch = 1, global_batch = 0, seq_len = 0;
  std::string precision = "amp-bf16";
  std::string recipe = "plain";
  std::string framework = "megatron-te";
  std::string fp8_recipe = "delayed";
  bool tp_comm_overlap = false, fp8_param_gather = false;
  // The options the user gave, by their command-line names ("--dp", "--model"); the layout flags among
  // them (kLayoutFlags) describe the run of a NeMo or torchtitan log.
  std::set<std::string> given;
  std::string command_line;  // recorded in a created CAL's /meta argv
};

// The options that describe a log's run beside --model (or --dp beside --config), in the order named.
extern const std::vector<std::string> kLayoutFlags;

// The logs imported (each with its run and measurement), in the order given; CAL written.
std::vector<formats::LogImport> import_logs(const ImportRequest& request);

// One import as JSON: log, format, sha256, key, run (model, layout, precision, recipe, framework), timing
// (lines, warm-up, steady), iteration (median, min, max, floor), assumed, not_used.
nlohmann::json import_json(const formats::LogImport& imported);

}  // namespace itertime::query
