// predictor.hpp: the precision-aware prediction of one configuration's iteration time, with its
// breakdown, from a FittedModel.
// Invariants:
//  - Per pipeline stage, forward and backward time per micro-batch = the stage's traced operators
//    (counts x profiled time at the configuration's occupancy, dp*tp*pp busy ranks) + its TP
//    all-reduces (comm model, the TP group's consecutive layout, at the dtype the trace recorded).
//  - The pipeline is simulated (predict/schedule/schedule.hpp, 1F1B, blocking sends) with P2P at the policy's
//    activation dtype; then each stage's sequence-parallel norm-gradient sum, DP gradient-buffer work,
//    DP all-reduce (gradient dtype, the DP group's layout) and optimizer step follow its own timeline
//    (see the step end below).
//  - Training techniques (common/training_techniques.hpp): sequence parallelism, the vocabulary-parallel
//    head and recompute come with the stage (its trace under the recipe's key, or the builder with the
//    recipe): their operators, their TP all-gathers and reduce-scatters (the comm model's all_gather and
//    reduce_scatter at the TP group, sized as nccl-tests sizes them: the whole gathered buffer) and the
//    recomputed forward inside the backward. The distributed optimizer's stage (keyed by dp) holds its
//    DP reduce-scatter of the gradient buffer, its AdamW step on one shard and its DP all-gather of the
//    parameters (all_gather and reduce_scatter at the DP group, the whole buffer), added after the
//    pipeline at any dp (the trainer shards over one rank too). Overlapped gradient reduction (dp > 1;
//    at dp 1 the plain stage) records its buckets' dp_all_reduce (with the distributed optimizer
//    dp_reduce_scatter) in the backward: they run one after another from when the stage's last backward
//    completes each (after its share of the bucket bytes) and only what outlasts the stage's timeline
//    adds to its time (predict/schedule/schedule.hpp exposed_reduction_us; no contention term).
//  - Overlapped parameter gather (opg, at dp*cp > 1; at 1 dropped with ovl): the stage's dp_all_gather
//    comms (phase optimizer) leave the tail. Taken to be recorded one per bucket in the order the trainer
//    starts them (the next forward's: the bucket with the stage's first parameters first), each bucket's
//    first parameter after the bytes of those gathered before it; they run one after another from the
//    stage's update end, and the next step (starting at this step's end without them) waits, on each stage,
//    before its first forward (micro-batch 0's, as long as in this schedule) reaches a bucket not yet
//    gathered (schedule/schedule.hpp exposed_parameter_gather_us). The iteration is longer by the largest wait over
//    the stages (an approximation: a wait shifts the pipeline behind it), counted in dp_comm_us.
//  - The step ends when the last stage finishes: its timeline's end, its exposed reduction, then its
//    once-per-iteration tail (sp_grads, dp_buffer, DP communication, optimizer); with opg, plus the
//    exposed parameter gather.
//  - Interleaved 1F1B (config.vp = v > 1): chunk c of pipeline rank r runs exactly stage c*pp + r of a
//    pp*v pipeline, so the schedule's pp*v virtual stages are those stages (traced, keyed pp*v, or built);
//    rank r's tail is its chunks' tails with their once-per-iteration DP collectives merged into one call
//    per kind carrying all their bytes, as the trainer reduces one flat buffer (their operators are
//    summed: v smaller flattens and sequence-parallel norm sums where the trainer runs one; a few
//    operator calls more, not modelled away). Busiest-stage figures are per pipeline rank;
//    stage_forward_us / stage_backward_us per virtual stage. Overlapped reduction (dp*cp > 1) with v > 1:
//    the trainer keeps buckets per chunk (Megatron-Core's DDP per model chunk), so nothing is merged:
//    each chunk's buckets are those of its virtual stage and become complete during that chunk's last
//    backward on its rank (ScheduleResult::chunk_last_backward_*), every chunk's reductions running one
//    after another on the rank's DP communicator, what outlasts the rank's timeline exposed; with opg
//    each chunk's all-gathers (chunk 0's first) are waited for by that chunk's first forward of the next
//    step (schedule.hpp's per-chunk exposed_reduction_us / exposed_parameter_gather_us).
//  - Context parallelism (cp > 1): stages are keyed and resolved with cp (traced or built as CP rank 0 runs
//    them); their cp_all_gather / cp_reduce_scatter (one rank's part recorded) are timed as the comm
//    model's all_gather / reduce_scatter of the whole buffer at the CP group (tp apart: consecutive when
//    tp is 1) and run inside the passes like TP's; every DP collective runs over the dp*cp ranks the
//    trainer reduces over (at_dp and the distributed optimizer's shard at dp*cp).
//  - Placement on nodes (issue 35): with request.ranks_per_node R > 0 the world's ranks fill nodes of R in
//    rank order and every communication is timed at its group's placement (place_group by the group's rank
//    stride; comm_model.hpp's rules: exact, one node, across nodes by node count, hierarchical); R = 0 puts
//    every group on one node (as before). A group across nodes that only one-node figures could time sets
//    Prediction::inter_node_from_intra and adds a note. A described target places on its GPUs per node.
//  - Shared cores: when the model has rank slots (a single-node CPU calibration) and the configuration
//    has more ranks than slots but no more than the calibrated node ran, operators take their time at
//    occupancy = slots, the schedule runs with processor sharing (TP all-reduces and transfers
//    unstretched), and the tail's operators are stretched by ranks / slots. Otherwise nothing changes.
//  - blind = true uses the precision-blind traces (everything fp32, no casts, fp32 messages): the
//    ablation baseline.
//  - The calibration factor (per occupancy) multiplies the raw prediction when `calibrated`; it is 1
//    when none was fitted.
//  - Stages come from a StageResolver (predict/resolver/stage_resolver.hpp) and its policy: traced stages first,
//    built from the request's LlamaSpec for the rest; or every stage built (kBuiltOnly). The blind
//    variant builds the fp32 stage.
//  - predict() is a sequence of pure steps (legality, occupancy, calibration, per-stage times, schedule,
//    assembly) over the resolver; a configuration it cannot predict (illegal layout, a stage neither
//    traced nor buildable, a communication the comm model has no table for) comes back as a
//    PredictOutcome with its reason, never as an exception.
//  - fit_calibration() records every ground-truth row it cannot predict, with the reason, in
//    CalibrationFit::unpredicted; none is dropped silently.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/resolver/stage_resolver.hpp"

namespace itertime::predict {

struct PredictRequest {
  std::string model_name;
  ParallelConfig config;
  PrecisionName precision = PrecisionName::kFp32;
  bool blind = false;
  TrainingTechniques techniques;                      // the recipe trained with (all off: plain)
  bool calibrated = true;                             // apply the model's fitted Calibration for this occupancy
  const Calibration* override_calibration = nullptr;  // use this one instead (leave-one-out validation)
  const LlamaSpec* model = nullptr;  // when set, stages are built from it as the resolver's policy says (not owned)
  // World ranks per node, filled node by node (rank r on node r / ranks_per_node); 0: all ranks on one node.
  // Each group is placed by its rank stride (TP 1; DP*CP and CP tp; pipeline neighbours dp*cp*tp) with
  // place_group (predict/device/described_comm.hpp) and the comm model is asked at that placement. A
  // described target places on its own GPUs per node instead.
  int64_t ranks_per_node = 0;
};

struct Prediction {
  double total_us = 0;      // calibrated when a factor exists
  double raw_total_us = 0;  // before the calibration factor
  double calibration_factor = 1;
  double op_overhead_us = 0;  // per operator call, included in total_us (not in raw_total_us)
  int64_t op_calls = 0;       // operator calls of the busiest stage per iteration
  // Breakdown of the raw step (without the per-call overhead and the factor; simulated again without the
  // overhead when there is one) on its critical pipeline rank (critical_rank: the one whose update ends
  // last), microseconds per iteration; the parts sum to split_raw_us exactly: compute (the passes'
  // operators) + tp_comm + cp_comm + pp_comm (blocking sends) + bubble (idle before the rank's timeline
  // ends) + dp_comm + optimizer. tp_comm includes sequence parallelism's once-per-iteration TP sum of the
  // norms' gradients; dp_comm the DP buffer work, the DP collectives of the tail, the exposed overlapped
  // reduction and (opg) the exposed parameter gather (the largest wait over the ranks):
  double compute_us = 0, tp_comm_us = 0, pp_comm_us = 0, bubble_us = 0, dp_comm_us = 0, optimizer_us = 0;
  double cp_comm_us = 0;  // context parallelism's key/value all-gathers and their gradients' reduce-scatters
  // The framework model's training-condition lines (clock, contention, sync, host, straggler), each a
  // part of the sum too (empty for itertime's own trainer).
  std::vector<std::pair<std::string, double>> training_costs_us;
  int critical_rank = 0;
  double split_raw_us = 0;  // the raw step the parts sum to (raw_total_us's simulated form)
  // total_us == split_raw_us + overhead_total_us + calibration_adjust_us (up to rounding):
  double overhead_total_us = 0;      // what the per-call overhead adds to the step (with its delays)
  double calibration_adjust_us = 0;  // what the calibration factor adds (negative: takes away)
  // Overlapped on the critical rank and hidden behind its work: not part of the iteration.
  double hidden_reduction_us = 0, hidden_gather_us = 0;
  double extrapolated_fraction = 0;  // share of compute time from the regression (no usable profile)
  // What it rests on: the virtual stages by how their operators were found (traced and profiled; built
  // from the model and priced by profiles and the regression; built and timed by a description's
  // roofline), the built stages' operators, the communication's source, and the ground-truth runs the
  // applied calibration was fitted on (0: none applied).
  int stages_traced = 0, stages_built = 0, stages_described = 0;
  int64_t built_operators = 0, built_operators_profiled = 0, built_operators_without_time = 0;
  bool communication_described = false;  // NCCL's cost model of a description, not the calibration's /comm
  // A group across nodes was timed with one-node figures (the calibration measured none across nodes).
  bool inter_node_from_intra = false;
  int64_t calibration_rows = 0;
  std::vector<double> stage_forward_us, stage_backward_us;  // per micro-batch, TP comm included
  std::vector<std::string> notes;
};

// A prediction, or why none could be made.
struct PredictOutcome {
  std::optional<Prediction> prediction;  // set when the configuration could be predicted
  std::string reason;                    // otherwise why not (never empty then)
  bool ok() const { return prediction.has_value(); }
};

// Predicts one configuration with the stages `resolver` finds (its policy, its cache).
PredictOutcome predict(StageResolver& resolver, const PredictRequest& request);

// The request that predicts a ground-truth configuration (its model name, layout, precision and the
// ranks per node its job ran with, GroundTruthRecord::ranks_per_node).
PredictRequest request_for(const store::GroundTruthRecord& row, bool blind, const LlamaSpec* model_spec = nullptr);

// A ground-truth configuration left out of a calibration fit, and why.
struct UnpredictedRow {
  std::string key;
  std::string reason;
};

struct CalibrationFit {
  CalibrationSet calibration;
  std::vector<UnpredictedRow> unpredicted;   // rows with status ok that could not be predicted
  std::vector<FittedCalibrationTerm> terms;  // empty when no row was fitted
  bool converged = true;
};

// The terms, fitted jointly on every row (common/regularized_fit.hpp, NLopt): one per-call overhead shared
// by all occupancies, one shared factor, and per occupancy with rows a contention term (ln) pulled toward
// the shared factor; each bounded and pulled toward its described value (predictor.cpp says which and
// why). A row's residual is ln(factor x contention x raw / measured) / 5 %, raw being its prediction at
// the overhead without factor. The result per occupancy: that overhead, factor x contention, its rows.
// Rows: ground truth with status ok, leaving out every row whose (dp,tp,pp) tuple string is in
// `exclude_tuples`, predicted with `resolver` (its policy) and `model_spec` (nullptr: traced stages only,
// as `fit` does).
CalibrationFit fit_calibration(StageResolver& resolver, const std::vector<store::GroundTruthRecord>& rows, bool blind,
                               const std::set<std::string>& exclude_tuples, const LlamaSpec* model_spec = nullptr);

}  // namespace itertime::predict
