// ops_calibration.hpp: `itertime calibrate ops`: traces the operators of every pipeline stage of a job's
// configurations under their precision policy (and the precision-blind fp32 variant), profiles every
// distinct operator signature in isolation at every occupancy of the job, and stores it all in /ops.
// Torch-free interface.
// Invariants:
//  - A stage trace covers one micro-batch's forward and backward (TP-sharded shapes; the TP collectives
//    recorded as comm operations by a communicator that moves no data), one optimizer step, and the DP
//    gradient-buffer operations; traced after one untraced warm-up step, so lazily created state
//    (optimizer moments) exists as in steady-state training.
//  - A stage is traced with the job configuration's training techniques (common/training_techniques.hpp)
//    as calibrate/trainer.cpp runs them: sequence parallelism and the vocabulary-parallel head in the
//    TpContext, recompute in the stage, and with SP the per-iteration TP sum of the norms' gradients
//    (phase sp_grads). The distributed optimizer (ZeRO-1) is traced at the configuration's dp, as DP
//    rank 0 runs it (also at dp 1, where the trainer shards over one rank): phase dp_buffer fills the
//    flat gradient buffer (padded to shards of ceil(local parameters / dp)), divides it and records the
//    comm dp_reduce_scatter; phase optimizer is AdamW on that one flat shard, then the comm dp_all_gather
//    and the copies of the gathered values into the parameters. Both comms' bytes are one rank's shard.
//    What the trainer refuses (SP with seq_len % tp, the vocabulary-parallel head with vocab_size % tp)
//    is left out of the plan with one printed line each; trace_stage_info refuses it (UserError).
//  - Interleaved 1F1B (vp > 1): the stages of the pp*vp pipeline are traced (chunk c of rank r runs
//    stage c*pp + r of it, predict/predictor.hpp).
//  - Context parallelism (cp > 1): a stage is traced as CP rank 0 runs it (chunks 0 and 2cp-1 of the
//    sequence; every CP rank runs the same operators at the same shapes): seq_len / cp tokens, the
//    rotary tables index_select-ed at the global positions, keys and values all-gathered over CP by a
//    tracing communicator (comm cp_all_gather, phase forward, or backward when full recompute reruns
//    it; its backward's cp_reduce_scatter in the backward; bytes one rank's part, at the tensor's dtype)
//    and the mask built from global positions. The reduction size is dp*cp: the techniques are taken at
//    at_dp(.., dp*cp), the distributed optimizer shards over dp*cp, and the stage key carries dp*cp (with
//    dopt) and /cp<N>. What the trainer refuses with cp (seq_len % (2*cp), SP with (seq_len/cp) % tp,
//    vp > 1 with overlapped reduction at dp*cp > 1) is left out with one line each.
//  - Every rank traces the same stages and obtains the same ordered signature list (checked); rank 0
//    alone writes. Profiling at occupancy k: ranks 0..k-1 time every signature at once (the others
//    sleep), so each operator is timed with as many busy ranks as the configurations of k ranks have.
//  - Signatures are timed in chunks; a chunk timed while the machine carried outside load
//    (runtime/outside_load_probe.hpp, the job's rounds policy) is timed again, up to the job's
//    max_extra_rounds more times, and counted when it stays loaded.
//  - Signatures already timed at an occupancy (same file, --resume) are not measured again.
//  - The speed reference (runtime/speed_reference.hpp) is timed at the occupancy being profiled before its
//    first chunk and after every chunk; /reference/probes keeps it (stage ops, the pass).
//  - remeasure_drifted (`calibrate drift`, after the ground truth): profiles every signature again, as a new
//    pass in /ops/retimings, at each occupancy common/speed_drift.hpp's rule names (its compute drift
//    against the ground truth's reference above the job's drift_pct, fewer than 1 + max_extra_rounds
//    passes), until none is named; a pass is recorded whole, with its reference samples, or not at all.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/collective.hpp"
#include "calibrate/job_stage_options.hpp"
#include "common/job.hpp"
#include "common/training_techniques.hpp"

namespace itertime::calibrate {

struct OpsCalibrationOptions : JobStageOptions {
  // calibrate drift: profile again, as passes 1.., the occupancies whose speed reference drifted from
  // the ground truth's (common/speed_drift.hpp), instead of profiling what is missing
  bool remeasure_drifted = false;
  int warmup_repeats = 2;
  int min_repeats = 5;
  int max_repeats = 200;
  double min_time_us = 5000.0;  // keep repeating a signature until this much time was spent on it
};

struct OpsCalibrationSummary {
  std::size_t stages_traced = 0, stages_present = 0, signatures = 0, timings_measured = 0, timings_present = 0,
              replay_failures = 0;
  std::size_t timings_disturbed = 0;  // rank 0: timed under outside load on every try the job allowed
  double elapsed_s = 0.0;
};

OpsCalibrationSummary calibrate_ops(const OpsCalibrationOptions& options);

// What one traced stage holds, in plain types (for tests and reports).
struct TracedOpInfo {
  std::string name;
  std::string phase;
  std::vector<std::string> input_dtypes;
  std::string output_dtype;
  std::string signature;
};
struct TracedCommInfo {
  CommKind kind = CommKind::kTpAllReduce;
  std::string phase;
  std::string dtype;
  long long bytes = 0;
};
struct StageTraceInfo {
  std::vector<TracedOpInfo> ops;
  std::vector<TracedCommInfo> comms;
  long long local_params = 0;
};

// dp: the DP degree, which only the distributed optimizer's and overlapped reduction's stages depend on
// (>= 1); cp: the context-parallel degree (>= 1; seq_len % (2*cp) == 0): the stage as CP rank 0 runs it,
// reducing over dp*cp ranks.
StageTraceInfo trace_stage_info(const LlamaSpec& model, int tp, int pp, int stage, int micro_batch, int seq_len,
                                PrecisionName precision, AttentionKernel attention, Backend backend,
                                const TrainingTechniques& techniques = {}, int dp = 1, int cp = 1);

}  // namespace itertime::calibrate
