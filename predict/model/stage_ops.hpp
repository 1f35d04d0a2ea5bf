// stage_ops.hpp: the records of one pipeline stage's operators and communications: how a traced stage is
// stored in the fitted model (SequenceEntry, StageOps: /ops/sequences and /ops/comms) and what the stage
// builder emits for an untraced one (BuiltOp, BuiltStage); CommOp is the communication record of both.
// Invariants:
//  - Plain data, no Boost: the fitted model's archive (model/fitted_model_io.cpp) writes phases, comm
//    kinds and dtypes as their canonical names.
//  - Ops and comms are aggregated as /ops stores them: per (phase, signature) with counts, per
//    (phase, kind, dtype, bytes) with counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/collective.hpp"
#include "common/dtype.hpp"
#include "common/phase.hpp"

namespace itertime::predict {

// One /ops/sequences row: a traced stage calls signature `signature_id` `count` times in `phase`.
struct SequenceEntry {
  Phase phase = Phase::kForward;
  int64_t signature_id = 0;
  int64_t count = 0;
};

// One communication of a stage (/ops/comms, or the builder's): `count` calls of `bytes` each.
struct CommOp {
  Phase phase = Phase::kForward;
  CommKind kind = CommKind::kTpAllReduce;
  DType dtype = DType::kFloat32;
  int64_t bytes = 0, count = 0;
};

// A traced stage as the fitted model keeps it.
struct StageOps {
  std::vector<SequenceEntry> sequence;
  std::vector<CommOp> comms;
  int64_t local_params = 0;
};

// One operator of a built stage (predict/builder/op_builder.hpp), with what /ops/signatures would store.
struct BuiltOp {
  Phase phase = Phase::kForward;
  std::string name;          // aten::mm
  std::string signature;     // the tracer's canonical text
  std::string input_dtypes;  // comma-separated, as OpSignatureRow::input_dtypes
  std::string output_dtype;  // "" when the operator returns no tensor
  double flops = 0;          // as TracedOp::flops()
  double bytes = 0;          // as TracedOp::bytes()
  int64_t count = 0;         // calls per micro-batch (forward/backward) or per iteration (others)
};

struct BuiltStage {
  std::vector<BuiltOp> ops;
  std::vector<CommOp> comms;  // same kinds, phases, dtypes, bytes and counts as trace_stage records
  int64_t local_params = 0;
  int64_t num_layers = 0;
};

}  // namespace itertime::predict
