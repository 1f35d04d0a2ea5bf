// parallel_config_json.hpp: a layout's fields as JSON, the same names in every JSON output that shows a layout
// with its batches (validate's prediction reports, the Python module's view of a calibration).
// Invariants: the keys are the ParallelConfig members' names (dp, tp, pp, cp, vp, micro_batch, global_batch,
// seq_len), each a number; the object is a plain nlohmann::json (keys sorted), for the caller to add its own
// fields to. Header-only.
#pragma once

#include <nlohmann/json.hpp>

#include "common/parallel_config.hpp"

namespace itertime {

inline nlohmann::json parallel_config_json(const ParallelConfig& config) {
  return {{"dp", config.dp},
          {"tp", config.tp},
          {"pp", config.pp},
          {"cp", config.cp},
          {"vp", config.vp},
          {"micro_batch", config.micro_batch},
          {"global_batch", config.global_batch},
          {"seq_len", config.seq_len}};
}

}  // namespace itertime
