// predictor.cpp: predict() as a sequence of small pure steps over a StageResolver, and the calibration
// fit on ground truth (predictor.hpp).
#include "predict/predictor.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/errors.hpp"
#include "common/regularized_fit.hpp"
#include "common/stats.hpp"
#include "predict/device/described_comm.hpp"
#include "predict/schedule/schedule.hpp"

namespace itertime::predict {
namespace {

constexpr std::size_t kMaxTracedNotes = 8;  // occupancy fallbacks of traced stages
constexpr std::size_t kMaxNotes = 16;       // with those of built stages and their "built" lines

// Step 1: the configuration is one a training run can have.
std::optional<std::string> illegal_reason(const ParallelConfig& c, const LlamaSpec* model) {
  if (c.dp < 1 || c.tp < 1 || c.pp < 1 || c.cp < 1 || c.vp < 1 || c.micro_batch < 1 ||
      c.global_batch % (c.dp * c.micro_batch) != 0) {
    return "configuration " + c.to_string() +
           " is not legal: dp, tp, pp, cp, vp, micro_batch must be positive and global_batch divisible by dp*micro_batch";
  }
  if (c.cp > 1 && c.seq_len % (2 * c.cp) != 0) {
    return "configuration " + c.to_string() + " is not legal: cp " + std::to_string(c.cp) +
           " needs seq_len divisible by 2*cp (each context-parallel rank holds two of 2*cp chunks)";
  }
  if (c.vp > 1 && (c.pp == 1 || c.num_micro_batches() % c.pp != 0)) {
    return "configuration " + c.to_string() + " is not legal: vp " + std::to_string(c.vp) +
           " (interleaved 1F1B) needs pp > 1 and a number of micro-batches that is a multiple of pp";
  }
  if (model != nullptr && static_cast<int64_t>(c.pp) * c.vp > model->num_layers) {
    return "configuration " + c.to_string() + " is not legal: pp*vp = " + std::to_string(c.pp * c.vp) +
           " pipeline chunks exceed the model's " + std::to_string(model->num_layers) + " layers";
  }
  return std::nullopt;
}

// Step 2: the occupancy operators are timed at. Oversubscribed CPU ranks (more ranks than the node's rank
// slots, but no more than the calibrated node ran) take their time as profiled with every slot busy
// (the profile's median leaves time-sharing out); the schedule stretches them by processor sharing
// (predict/schedule/schedule.hpp), the tail by ranks / slots.
struct OccupancyPlan {
  int64_t occupancy = 1;          // ranks busy at once
  int64_t profile_occupancy = 1;  // the occupancy operator times are taken at
  bool shared = false;            // ranks share rank slots
  double slots = 0;
  double tail_stretch = 1.0;  // ranks / slots when shared
};

OccupancyPlan plan_occupancy(const FittedModel& model, const TargetDevice* target, const ParallelConfig& c) {
  OccupancyPlan plan;
  plan.occupancy = c.world_size();
  plan.slots = target != nullptr ? 0.0 : model.rank_slots;  // a described device: every rank on its own device
  plan.shared = plan.slots > 0 && static_cast<double>(plan.occupancy) > plan.slots &&
                static_cast<double>(plan.occupancy) <= model.node_ranks;
  plan.profile_occupancy = plan.shared ? static_cast<int64_t>(plan.slots) : plan.occupancy;
  plan.tail_stretch = plan.shared ? static_cast<double>(plan.occupancy) / plan.slots : 1.0;
  return plan;
}

// Step 3: the calibration applied (an override, the model's for this occupancy, or the identity).
const Calibration& choose_calibration(const FittedModel& model, const TargetDevice* target, const PredictRequest& request,
                                      int64_t occupancy, const Calibration& identity) {
  if (request.override_calibration != nullptr) return *request.override_calibration;
  if (!request.calibrated || target != nullptr) return identity;  // factors fitted on another device do not carry
  return (request.blind ? model.calibration_blind : model.calibration).for_occupancy(occupancy);
}

// Step 4: one stage's communication times: TP all-reduces per micro-batch (per phase), the sends to its
// neighbours (set only where the stage has that neighbour) and the DP all-reduce per iteration, or with
// overlapped reduction (dp_all_reduce, or with the distributed optimizer dp_reduce_scatter, recorded in
// the backward) its buckets in completion order, each
// complete after the share of the stage's gradient bytes up to and including it (the backward's work
// per parameter taken as even; the stage's last bucket is complete when the backward ends). With
// overlapped parameter gather (overlap_gather: opg at the configuration's reduction ranks) the
// once-per-iteration dp_all_gather comms are not in dp_us but in `gathers`, one per call (their
// before_fraction set at the end of stage_comm).
struct StageComm {
  double tp_forward_us = 0, tp_backward_us = 0, dp_us = 0;
  double cp_forward_us = 0, cp_backward_us = 0;  // context parallelism's per micro-batch (inside the passes)
  std::vector<BucketReduction> buckets;
  std::vector<BucketGather> gathers;  // overlapped parameter gather's, in the order they are started
  double tp_iteration_us = 0;         // TP communication once per iteration (sequence parallelism's norm gradients)
  std::optional<double> send_forward_us, send_backward_us;  // to stage s+1, to stage s-1
  std::string failure;                                      // the comm model has no table for one of them
  bool inter_node_from_intra = false;  // a group across nodes timed with one-node figures (comm_model.hpp rule 3)
};

// One collective's time for stage_comm, the group placed on nodes by its rank stride (stride_ranks: TP 1,
// DP*CP and CP tp, pipeline neighbours dp*cp*tp): the comm model's at that placement (ranks_per_node
// world ranks per node; 0: all on one node), or on a described target (no calibration of it) the
// description's NCCL model on its GPUs per node. A collective it cannot time is nullopt, with the
// reason in `failure`.
struct CommTimer {
  const CommModel& comm_model;
  const TargetDevice* target;
  const ParallelConfig& c;
  int64_t ranks_per_node;
  std::string& failure;
  bool& inter_node_from_intra;

  int64_t stride_of(Collective collective, GroupLayout layout) const {
    if (layout == GroupLayout::kConsecutive) return 1;
    return is_point_to_point(collective) ? int64_t{c.dp} * c.cp * c.tp : c.tp;
  }
  std::optional<double> operator()(Collective collective, const CommOp& op, int64_t group_size, GroupLayout layout) const {
    if (target != nullptr) {
      const int64_t gpus_per_node = target->hardware.gpus_per_node.value_or(1);
      const std::optional<DescribedCommTime> described = described_comm_us(
          target->hardware, collective, place_group(group_size, stride_of(collective, layout), gpus_per_node), op.bytes);
      if (!described) {
        failure = target->hardware.name + " describes no link for " + to_string(collective) + " over " +
                  std::to_string(group_size) + " ranks (its NVLink or NIC figures are missing)";
      }
      return described ? std::optional<double>(described->time_us) : std::nullopt;
    }
    const GroupPlacement placement = ranks_per_node > 0 ? place_group(group_size, stride_of(collective, layout), ranks_per_node)
                                                        : GroupPlacement{group_size, std::max<int64_t>(1, group_size)};
    const std::optional<CommPrediction> found =
        comm_model.find_us(collective, op.dtype, placement, layout, op.bytes, ranks_per_node);
    if (!found) failure = comm_model.missing_reason(collective, placement, layout);
    if (found && found->inter_node_from_intra) inter_node_from_intra = true;
    return found ? std::optional<double>(found->time_us) : std::nullopt;
  }
};

// stage_comm's overlapped buckets: the reduction's, in completion order, and overlapped parameter gather's,
// with their bytes; their positions set by place() once all are in.
// Overlapped parameter gather's buckets, assuming the stage's dp_all_gather comms come in the order the
// trainer starts them, the next forward's (bucket K-1, holding the stage's first parameters, first; the
// builder's and tracer's opg order) and that each call's bytes are its bucket's share of the padded
// parameter buffer (one rank's slice: the shares are those of the whole buffer). A bucket's first
// parameter then lies after the bytes of the buckets gathered before it; the padding (< dp elements per
// bucket) is counted as parameters. Comms are aggregated per (phase, kind, dtype, bytes) in order of
// first appearance, so buckets of equal size are taken back to back at the first one's place (exact
// when equal sizes are consecutive; otherwise an approximation of where in the forward they lie).
struct OverlapBuckets {
  StageComm& out;
  std::vector<double> bucket_bytes;  // per overlapped bucket, in completion order
  std::vector<double> gather_bytes;

  void add_buckets(const CommOp& op, int64_t bytes, double t) {
    for (int64_t i = 0; i < op.count; ++i) {
      bucket_bytes.push_back(static_cast<double>(bytes));
      out.buckets.push_back(BucketReduction{1.0, t});
    }
  }
  void add_gathers(const CommOp& op, int64_t bytes, double t) {
    for (int64_t i = 0; i < op.count; ++i) {
      gather_bytes.push_back(static_cast<double>(bytes));
      out.gathers.push_back(BucketGather{0.0, t});
    }
  }
  void place() const {
    // Each bucket is complete after the buckets' bytes so far, over all of them.
    double total_bytes = 0, done_bytes = 0;
    for (double bytes : bucket_bytes) total_bytes += bytes;
    for (std::size_t k = 0; k < out.buckets.size(); ++k) {
      done_bytes += bucket_bytes[k];
      out.buckets[k].ready_fraction = total_bytes > 0 ? std::min(1.0, done_bytes / total_bytes) : 1.0;
    }
    // Each gathered bucket's first parameter lies after the bytes gathered before it, over all of them.
    double gather_total_bytes = 0, gathered_bytes = 0;
    for (double bytes : gather_bytes) gather_total_bytes += bytes;
    for (std::size_t k = 0; k < out.gathers.size(); ++k) {
      out.gathers[k].before_fraction = gather_total_bytes > 0 ? std::min(1.0, gathered_bytes / gather_total_bytes) : 0.0;
      gathered_bytes += gather_bytes[k];
    }
  }
};

// Long because it is one pass over the stage's comms with one case per comm kind (82 lines with its wrapped
// signature); its pieces are CommTimer and OverlapBuckets above.
StageComm stage_comm(const CommModel& comm_model, const TargetDevice* target, const ParallelConfig& c, int64_t ranks_per_node,
                     int stage, const std::vector<CommOp>& comms, bool overlap_gather) {
  StageComm out;
  const CommTimer time_us{comm_model, target, c, ranks_per_node, out.failure, out.inter_node_from_intra};
  OverlapBuckets overlap{out, {}, {}};
  // Neighbouring stages are dp*cp*tp ranks apart (consecutive only when that is 1); the DP*CP group's
  // ranks and the CP group's are tp apart (consecutive when tp == 1).
  const int reduction = c.reduction_ranks();
  const GroupLayout send_layout = c.dp * c.cp * c.tp == 1 ? GroupLayout::kConsecutive : GroupLayout::kStrided;
  const GroupLayout dp_layout = c.tp == 1 ? GroupLayout::kConsecutive : GroupLayout::kStrided;
  const GroupLayout cp_layout = dp_layout;
  const auto add_tp = [&](const CommOp& op, double t) {
    double& sum = op.phase == Phase::kForward    ? out.tp_forward_us
                  : op.phase == Phase::kBackward ? out.tp_backward_us
                                                 : out.tp_iteration_us;
    sum += t * static_cast<double>(op.count);
  };
  const auto add_cp = [&](const CommOp& op, double t) {  // inside the passes, like TP's
    (op.phase == Phase::kForward ? out.cp_forward_us : out.cp_backward_us) += t * static_cast<double>(op.count);
  };
  for (const CommOp& op : comms) {
    std::optional<double> t = 0.0;
    switch (op.kind) {
      case CommKind::kTpAllReduce:
        t = time_us(Collective::kAllReduce, op, c.tp, GroupLayout::kConsecutive);
        if (t) add_tp(op, *t);
        break;
      case CommKind::kTpAllGather:
      case CommKind::kTpReduceScatter: {
        // Recorded as one rank's part; the comm model's size is nccl-tests' (the whole gathered buffer).
        CommOp whole = op;
        whole.bytes = op.bytes * c.tp;
        t = time_us(op.kind == CommKind::kTpAllGather ? Collective::kAllGather : Collective::kReduceScatter, whole, c.tp,
                    GroupLayout::kConsecutive);
        if (t) add_tp(op, *t);
        break;
      }
      case CommKind::kPpSendForward:
      case CommKind::kPpSendBackward:
        if (c.pp > 1) t = time_us(Collective::kSend, op, 2, send_layout);
        if (t && op.kind == CommKind::kPpSendForward && stage < c.pp - 1) out.send_forward_us = *t;
        if (t && op.kind == CommKind::kPpSendBackward && stage > 0) out.send_backward_us = *t;
        break;
      case CommKind::kCpAllGather:
      case CommKind::kCpReduceScatter: {
        // Context parallelism's keys and values (one rank's part recorded), timed at the whole buffer.
        CommOp whole = op;
        whole.bytes = op.bytes * c.cp;
        t = time_us(collective_of(op.kind), whole, c.cp, cp_layout);
        if (t) add_cp(op, *t);
        break;
      }
      case CommKind::kDpAllReduce:
        if (reduction > 1) t = time_us(Collective::kAllReduce, op, reduction, dp_layout);
        if (t && reduction > 1 && op.phase == Phase::kBackward) {
          overlap.add_buckets(op, op.bytes, *t);
        } else if (t && reduction > 1) {
          out.dp_us += *t * static_cast<double>(op.count);
        }
        break;
      case CommKind::kDpReduceScatter:
      case CommKind::kDpAllGather:  // the distributed optimizer's, once per iteration, one rank's part recorded
        if (reduction > 1) {
          CommOp whole = op;
          whole.bytes = op.bytes * reduction;
          t = time_us(op.kind == CommKind::kDpAllGather ? Collective::kAllGather : Collective::kReduceScatter, whole, reduction,
                      dp_layout);
          if (t && op.phase == Phase::kBackward) {  // with overlapped reduction: one per bucket, started in the backward
            overlap.add_buckets(op, whole.bytes, *t);
          } else if (t && overlap_gather && op.kind == CommKind::kDpAllGather) {  // opg: one per bucket, started after the update
            overlap.add_gathers(op, whole.bytes, *t);
          } else if (t) {
            out.dp_us += *t * static_cast<double>(op.count);
          }
        }
        break;
    }
    if (!t) return out;
  }
  overlap.place();
  return out;
}

// Step 5: one stage's figures per iteration at the calibration's per-call overhead (and without it).
struct StageFigures {
  StageTimes times, raw_times;  // per micro-batch, TP comm included; raw: without the overhead
  double compute_us = 0;        // m * (forward + backward), TP comm excluded
  double tp_us = 0;             // m * TP comm
  double cp_us = 0;             // m * CP comm (context parallelism's gathers and reduce-scatters)
  double dp_us = 0;             // DP gradient-buffer work (when the phase runs) and DP communication
  double optimizer_us = 0;
  double sp_grads_us = 0;               // sequence parallelism's TP sum of the norms' gradients (ops and comm)
  double tail_us = 0, tail_raw_us = 0;  // after the pipeline: sp_grads + dp + optimizer
  // The tail's parts without the per-call overhead: sp_grads_raw_us + dp_raw_us + optimizer_raw_us == tail_raw_us.
  double sp_grads_raw_us = 0, dp_raw_us = 0, optimizer_raw_us = 0;
  double compute_with_optimizer_us = 0;
  int64_t calls = 0;                                  // operator calls per iteration
  std::array<double, kPhaseCount> extrapolated_us{};  // per phase and iteration; dp_buffer not counted
  // Per model chunk (one with vp 1; a pipeline rank's with vp > 1, chunk 0 first): overlapped reduction's
  // buckets, started in that chunk's last backward, and overlapped parameter gather's, started after the
  // update and waited for in that chunk's first forward.
  std::vector<std::vector<BucketReduction>> buckets;
  std::vector<std::vector<BucketGather>> gathers;
};

// dp_phase: whether the DP gradient-buffer phase runs (dp*cp > 1, or the distributed optimizer's, at any dp).
StageFigures stage_figures(const ResolvedStage& ops, const StageComm& comm, double overhead_us, int m, bool dp_phase,
                           double tail_stretch) {
  StageFigures out;
  std::array<double, kPhaseCount> phase_us{}, phase_raw_us{};
  for (Phase phase : kAllPhases) {
    const std::size_t i = phase_index(phase);
    const PhaseTotals& totals = ops.phase(phase);
    phase_us[i] = totals.at_overhead(overhead_us);
    phase_raw_us[i] = totals.at_overhead(0.0);
    const bool per_micro_batch = runs_per_micro_batch(phase);
    if (per_micro_batch || phase == Phase::kOptimizer || phase == Phase::kSpGradients || dp_phase) {
      out.calls += static_cast<int64_t>(totals.calls) * (per_micro_batch ? m : 1);
    }
    // The share is of the compute time (forward, backward, optimizer); dp_buffer work is not in it.
    if (phase != Phase::kDpBuffer)
      out.extrapolated_us[i] = totals.extrapolated_at_overhead(overhead_us) * (per_micro_batch ? m : 1);
  }
  const double forward = phase_us[phase_index(Phase::kForward)], backward = phase_us[phase_index(Phase::kBackward)];
  const double dp_buffer = phase_us[phase_index(Phase::kDpBuffer)], optimizer = phase_us[phase_index(Phase::kOptimizer)];
  const double sp_grads = phase_us[phase_index(Phase::kSpGradients)];
  const double fixed_forward = comm.tp_forward_us + comm.cp_forward_us,
               fixed_backward = comm.tp_backward_us + comm.cp_backward_us;
  out.times = StageTimes{forward + fixed_forward, backward + fixed_backward, fixed_forward, fixed_backward};
  out.raw_times = StageTimes{phase_raw_us[phase_index(Phase::kForward)] + fixed_forward,
                             phase_raw_us[phase_index(Phase::kBackward)] + fixed_backward, fixed_forward, fixed_backward};
  out.compute_us = m * (forward + backward);
  out.tp_us = m * (comm.tp_forward_us + comm.tp_backward_us);
  out.cp_us = m * (comm.cp_forward_us + comm.cp_backward_us);
  out.dp_us = (dp_phase ? dp_buffer * tail_stretch : 0.0) + comm.dp_us;
  out.optimizer_us = optimizer * tail_stretch;
  out.sp_grads_us = sp_grads * tail_stretch + comm.tp_iteration_us;
  out.tail_us = out.sp_grads_us + out.dp_us + out.optimizer_us;
  out.sp_grads_raw_us = phase_raw_us[phase_index(Phase::kSpGradients)] * tail_stretch + comm.tp_iteration_us;
  out.dp_raw_us = (dp_phase ? phase_raw_us[phase_index(Phase::kDpBuffer)] * tail_stretch : 0.0) + comm.dp_us;
  out.optimizer_raw_us = phase_raw_us[phase_index(Phase::kOptimizer)] * tail_stretch;
  out.tail_raw_us = out.sp_grads_raw_us + out.dp_raw_us + out.optimizer_raw_us;
  out.compute_with_optimizer_us = out.compute_us + optimizer + sp_grads;
  out.buckets = {comm.buckets};
  out.gathers = {comm.gathers};
  return out;
}

void add_stage_notes(const std::string& stage_key, const ResolvedStage& stage, std::vector<std::string>& notes) {
  const std::size_t limit = stage.built ? kMaxNotes : kMaxTracedNotes;
  for (const std::string& note : stage.fallback_notes) {
    if (notes.size() < limit) notes.push_back(note);
  }
  if (!stage.described_on.empty()) {
    if (notes.size() < kMaxNotes) {
      notes.push_back("stage " + stage_key + " built from the model, its " + std::to_string(stage.operators) +
                      " operators timed by the operator roofline of " + stage.described_on);
    }
  } else if (stage.built && notes.size() < kMaxNotes) {
    notes.push_back(
        "stage " + stage_key + " built from the model (not traced): " + std::to_string(stage.profiled) + " of " +
        std::to_string(stage.operators) + " operators profiled, the rest from the regression" +
        (stage.without_time ? " (" + std::to_string(stage.without_time) + " without a regression, counted as 0)" : ""));
  }
}

// A pipeline rank's figures from its chunks' (interleaved 1F1B): their per-micro-batch work and tails
// summed, with `dp_comm_us`, the rank's DP communication over all its chunks' parameters, added to the
// tail; each chunk's overlapped buckets and gathers kept as that chunk's.
StageFigures rank_figures(const std::vector<const StageFigures*>& chunks, double dp_comm_us) {
  StageFigures out;
  for (const StageFigures* chunk : chunks) {
    out.compute_us += chunk->compute_us;
    out.tp_us += chunk->tp_us;
    out.cp_us += chunk->cp_us;
    out.dp_us += chunk->dp_us;
    out.optimizer_us += chunk->optimizer_us;
    out.sp_grads_us += chunk->sp_grads_us;
    out.tail_us += chunk->tail_us;
    out.tail_raw_us += chunk->tail_raw_us;
    out.sp_grads_raw_us += chunk->sp_grads_raw_us;
    out.dp_raw_us += chunk->dp_raw_us;
    out.optimizer_raw_us += chunk->optimizer_raw_us;
    out.compute_with_optimizer_us += chunk->compute_with_optimizer_us;
    out.calls += chunk->calls;
    for (std::size_t i = 0; i < out.extrapolated_us.size(); ++i) out.extrapolated_us[i] += chunk->extrapolated_us[i];
    ITERTIME_CHECK(chunk->buckets.size() == 1 && chunk->gathers.size() == 1, "a virtual stage's figures hold one chunk");
    out.buckets.push_back(chunk->buckets.front());
    out.gathers.push_back(chunk->gathers.front());
  }
  out.dp_us += dp_comm_us;
  out.dp_raw_us += dp_comm_us;
  out.tail_us += dp_comm_us;
  out.tail_raw_us += dp_comm_us;
  return out;
}

// The DP collectives run once per iteration (not overlapped ones, which are in the backward).
bool once_per_iteration_dp(const CommOp& op) {
  return op.phase != Phase::kBackward &&
         (op.kind == CommKind::kDpAllReduce || op.kind == CommKind::kDpReduceScatter || op.kind == CommKind::kDpAllGather);
}

// A rank's chunks' once-per-iteration DP collectives as the trainer runs them over its one flat buffer
// (or one shard): one call per (kind, phase, dtype) carrying all their bytes.
std::vector<CommOp> merged_dp_comms(const std::vector<CommOp>& ops) {
  std::vector<CommOp> merged;
  for (const CommOp& op : ops) {
    const auto same = std::find_if(merged.begin(), merged.end(), [&](const CommOp& m) {
      return m.kind == op.kind && m.phase == op.phase && m.dtype == op.dtype;
    });
    if (same == merged.end()) {
      CommOp first = op;
      first.bytes = op.bytes * op.count;
      first.count = 1;
      merged.push_back(first);
    } else {
      same->bytes += op.bytes * op.count;
    }
  }
  return merged;
}

// Every stage resolved and timed, in pipeline order, or the first reason one could not be. With
// interleaved 1F1B (vp > 1) the stages are the pp*vp virtual stages: chunk c of pipeline rank r is
// stage c*pp + r of a pp*vp pipeline (the same layers, embedding or head and P2P; traced or built as
// that stage), and each rank's once-per-iteration tail is its chunks' tails with their DP collectives
// merged into the one the trainer runs over the rank's flat buffer (the operators of the tails are
// summed: v smaller flattens, divides and sequence-parallel norm sums instead of one each). With
// overlapped reduction (at dp*cp > 1) the trainer keeps buckets per chunk (calibrate/gradient_sync.hpp),
// each chunk's those of its virtual stage: nothing is merged, each chunk's buckets (and with opg its
// all-gathers, or with dopt its blocking ones) stay its own.
struct PipelineFigures {
  std::vector<StageFigures> stages;                       // per virtual stage (pp*vp of them): the schedule's passes
  std::vector<StageFigures> ranks;                        // per pipeline rank: what it runs per iteration, its tail included
  std::vector<double> send_forward_us, send_backward_us;  // pp*vp-1 entries each
  std::string failure;
  bool inter_node_from_intra = false;  // some group across nodes was timed with one-node figures
  // What the stages rest on (Prediction's basis fields), over the virtual stages.
  int stages_traced = 0, stages_built = 0, stages_described = 0;
  int64_t built_operators = 0, built_profiled = 0, built_without_time = 0;
};

void count_basis(const ResolvedStage& stage, PipelineFigures& out) {
  if (!stage.described_on.empty()) {
    ++out.stages_described;
  } else if (stage.built) {
    ++out.stages_built;
    out.built_operators += static_cast<int64_t>(stage.operators);
    out.built_profiled += static_cast<int64_t>(stage.profiled);
    out.built_without_time += static_cast<int64_t>(stage.without_time);
  } else {
    ++out.stages_traced;
  }
}

PipelineFigures pipeline_figures(StageResolver& resolver, const PredictRequest& request, const OccupancyPlan& occupancy,
                                 double overhead_us, std::vector<std::string>& notes) {
  const ParallelConfig& c = request.config;
  ParallelConfig chunked = c;  // the pp*vp pipeline whose stages the chunks are
  chunked.pp = c.pp * c.vp;
  chunked.vp = 1;
  const int virtual_stages = chunked.pp;
  PipelineFigures out;
  out.send_forward_us.assign(static_cast<std::size_t>(virtual_stages - 1), 0.0);
  out.send_backward_us.assign(static_cast<std::size_t>(virtual_stages - 1), 0.0);
  std::vector<std::vector<CommOp>> rank_dp_comms(static_cast<std::size_t>(c.pp));
  // ovl and opg at the reduction ranks (at_dp drops them at 1).
  const TrainingTechniques at_reduction = at_dp(request.techniques, c.reduction_ranks());
  const bool overlap_gather = at_reduction.overlap_parameter_gather;
  const bool merge_dp = c.vp > 1 && !at_reduction.overlap_gradient_reduction;  // one flat buffer per rank
  for (int s = 0; s < virtual_stages; ++s) {
    StageQuery query;
    query.model_name = request.model_name;
    query.model = request.model;
    query.config = chunked;
    query.stage = s;
    query.precision = request.precision;
    query.blind = request.blind;
    query.occupancy = occupancy.profile_occupancy;
    query.techniques = request.techniques;
    const StageOutcome resolved = resolver.resolve(query);
    if (resolved.stage == nullptr) {
      out.failure = resolved.reason;
      return out;
    }
    add_stage_notes(store::stage_key(request.model_name, c.tp, chunked.pp, s, c.micro_batch, c.seq_len,
                                     to_string(request.precision), request.blind ? "blind" : "aware",
                                     at_dp(request.techniques, c.reduction_ranks()), c.reduction_ranks(), c.cp),
                    *resolved.stage, notes);
    count_basis(*resolved.stage, out);
    std::vector<CommOp> comms = resolved.stage->comms;
    if (merge_dp) {  // the rank's DP collectives are timed once, merged (below)
      std::vector<CommOp>& dp_comms = rank_dp_comms[static_cast<std::size_t>(s % c.pp)];
      for (const CommOp& op : comms) {
        if (once_per_iteration_dp(op)) dp_comms.push_back(op);
      }
      comms.erase(std::remove_if(comms.begin(), comms.end(), once_per_iteration_dp), comms.end());
    }
    const StageComm comm =
        stage_comm(resolver.model().comm, resolver.target(), chunked, request.ranks_per_node, s, comms, overlap_gather);
    out.inter_node_from_intra = out.inter_node_from_intra || comm.inter_node_from_intra;
    if (!comm.failure.empty()) {
      out.failure = comm.failure;
      return out;
    }
    if (comm.send_forward_us) out.send_forward_us[static_cast<std::size_t>(s)] = *comm.send_forward_us;
    if (comm.send_backward_us) out.send_backward_us[static_cast<std::size_t>(s - 1)] = *comm.send_backward_us;
    out.stages.push_back(stage_figures(*resolved.stage, comm, overhead_us, c.num_micro_batches(),
                                       c.reduction_ranks() > 1 || request.techniques.distributed_optimizer,
                                       occupancy.tail_stretch));
  }
  if (c.vp == 1) {
    out.ranks = out.stages;
    return out;
  }
  for (int r = 0; r < c.pp; ++r) {
    const StageComm dp = stage_comm(resolver.model().comm, resolver.target(), c, request.ranks_per_node, r,
                                    merged_dp_comms(rank_dp_comms[static_cast<std::size_t>(r)]), /*overlap_gather=*/false);
    out.inter_node_from_intra = out.inter_node_from_intra || dp.inter_node_from_intra;
    if (!dp.failure.empty()) {
      out.failure = dp.failure;
      return out;
    }
    std::vector<const StageFigures*> chunks;
    for (int chunk = 0; chunk < c.vp; ++chunk) chunks.push_back(&out.stages[static_cast<std::size_t>(chunk * c.pp + r)]);
    out.ranks.push_back(rank_figures(chunks, dp.dp_us));
  }
  return out;
}

ScheduleInput schedule_input(const PipelineFigures& pipeline, const ParallelConfig& c, const OccupancyPlan& occupancy, bool raw) {
  ScheduleInput input;
  for (const StageFigures& stage : pipeline.stages) input.stages.push_back(raw ? stage.raw_times : stage.times);
  input.p2p_forward_us = pipeline.send_forward_us;
  input.p2p_backward_us = pipeline.send_backward_us;
  input.num_micro_batches = c.num_micro_batches();
  input.virtual_stages = c.vp;
  input.blocking_send = true;
  input.rank_slots = occupancy.shared ? occupancy.slots : 0.0;
  input.ranks_per_stage = static_cast<double>(c.dp * c.cp * c.tp);
  return input;
}

// Step 6: the iteration time and its breakdown on the busiest stage.
// Each stage's ranks finish their update after their timeline is free, their overlapped buckets'
// reductions have ended (with interleaving each chunk's buckets from that chunk's last backward, all on
// one chain), and their tail (once-per-iteration work) has run; the step ends with the last
// stage to finish. With overlapped parameter gather the tail holds no DP all-gather: each stage's
// all-gathers run from its update's end into the next step, whose first forward on stage s (at the
// step's end + its first forward's start in this schedule, taking as long as this one's) waits for the
// buckets still being gathered (predict/schedule/schedule.hpp exposed_parameter_gather_us). The iteration is
// longer by the largest wait over the stages: an approximation, as one stage's wait also shifts the
// pipeline behind it (and a stage whose update ended early has that head start).
struct StepEnd {
  double total_us = 0;
  std::vector<double> exposed_reduction_us;  // per stage
  std::vector<double> exposed_gather_us;     // per stage: its next first forward's wait for the all-gathers
  double gather_delay_us = 0;                // max of exposed_gather_us: what it adds to the iteration
  std::size_t last = 0;                      // the stage whose update ends last (the first such): the critical one
};

StepEnd step_end(const ScheduleResult& schedule, const std::vector<StageFigures>& stages, bool raw) {
  StepEnd out;
  std::vector<double> update_end_us;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const double free_us = schedule.end_us[s];
    // Each chunk's buckets complete in that chunk's last backward (vp 1: the stage's last backward).
    std::vector<ChunkReduction> chunks;
    for (std::size_t k = 0; k < stages[s].buckets.size(); ++k) {
      chunks.push_back(ChunkReduction{stages[s].buckets[k], schedule.chunk_last_backward_start_us[s][k],
                                      schedule.chunk_last_backward_end_us[s][k]});
    }
    const double exposed_us = exposed_reduction_us(chunks, free_us);
    out.exposed_reduction_us.push_back(exposed_us);
    update_end_us.push_back(free_us + exposed_us + (raw ? stages[s].tail_raw_us : stages[s].tail_us));
    if (update_end_us.back() > out.total_us) out.last = s;
    out.total_us = std::max(out.total_us, update_end_us.back());
  }
  const double next_step_us = out.total_us;  // where the next step's schedule starts
  for (std::size_t s = 0; s < stages.size(); ++s) {
    // Each chunk's first forward of the next step waits for its own all-gathers (chunk 0's started first).
    std::vector<ChunkGathers> chunks;
    for (std::size_t k = 0; k < stages[s].gathers.size(); ++k) {
      const double forward_start_us = schedule.chunk_first_forward_start_us[s][k];
      chunks.push_back(ChunkGathers{stages[s].gathers[k], next_step_us + forward_start_us,
                                    schedule.chunk_first_forward_end_us[s][k] - forward_start_us});
    }
    const double wait_us = exposed_parameter_gather_us(chunks, update_end_us[s]);
    out.exposed_gather_us.push_back(wait_us);
    out.gather_delay_us = std::max(out.gather_delay_us, wait_us);
  }
  out.total_us += out.gather_delay_us;
  return out;
}

// The raw step (no per-call overhead) split on its critical pipeline rank r, the one whose update ends
// last: its timeline up to its end (passes: operators + TP + CP inside them; blocking sends; idle: the
// bubble), its exposed overlapped reduction, its tail (sequence parallelism's norm-gradient sum, DP
// buffer and collectives, optimizer) and the exposed parameter gather of the next step. These parts sum
// to the raw step's total exactly (step_end's max). What overlap hid on r is kept apart, not counted.
void split_raw_step(const ScheduleResult& schedule, const StepEnd& end, const std::vector<StageFigures>& stages,
                    Prediction& out) {
  const std::size_t r = end.last;
  const StageFigures& rank = stages[r];
  out.critical_rank = static_cast<int>(r);
  const double busy_us = schedule.busy_us[r];
  const double send_us = schedule.send_us.empty() ? 0.0 : schedule.send_us[r];
  out.cp_comm_us = rank.cp_us;
  out.compute_us = busy_us - rank.tp_us - rank.cp_us;  // the passes' operators (stretched when ranks share cores)
  out.pp_comm_us = send_us;
  out.bubble_us = schedule.end_us[r] - busy_us - send_us;
  out.tp_comm_us = rank.tp_us + rank.sp_grads_raw_us;
  out.dp_comm_us = rank.dp_raw_us + end.exposed_reduction_us[r] + end.gather_delay_us;
  out.optimizer_us = rank.optimizer_raw_us;
  double reduction_us = 0, gather_us = 0;
  for (const std::vector<BucketReduction>& chunk : rank.buckets) {
    for (const BucketReduction& bucket : chunk) reduction_us += bucket.time_us;
  }
  for (const std::vector<BucketGather>& chunk : rank.gathers) {
    for (const BucketGather& gather : chunk) gather_us += gather.time_us;
  }
  out.hidden_reduction_us = std::max(0.0, reduction_us - end.exposed_reduction_us[r]);
  out.hidden_gather_us = std::max(0.0, gather_us - end.exposed_gather_us[r]);
}

Prediction assemble(const PipelineFigures& pipeline, const ParallelConfig& c, const OccupancyPlan& occupancy,
                    const Calibration& calibration, std::vector<std::string> notes) {
  const std::vector<StageFigures>& stages = pipeline.ranks;  // per pipeline rank, as the schedule reports
  const ScheduleResult schedule = simulate_1f1b(schedule_input(pipeline, c, occupancy, /*raw=*/false));
  const StepEnd end = step_end(schedule, stages, /*raw=*/false);
  std::size_t busiest = 0;
  for (std::size_t s = 0; s < schedule.busy_us.size(); ++s) {
    if (schedule.busy_us[s] > schedule.busy_us[busiest]) busiest = s;
  }
  double extrapolated_us = 0, compute_total_us = 0;
  for (const StageFigures& stage : stages) {
    for (Phase phase : kAllPhases) {
      if (phase != Phase::kDpBuffer) extrapolated_us += stage.extrapolated_us[phase_index(phase)];
    }
    compute_total_us += stage.compute_with_optimizer_us;
  }
  const StageFigures& top = stages[busiest];
  Prediction out;
  out.notes = std::move(notes);
  const double overhead_us = calibration.op_overhead_us;
  const double total_with_overhead = end.total_us;
  out.extrapolated_fraction = compute_total_us > 0 ? extrapolated_us / compute_total_us : 0.0;
  out.op_calls = top.calls;
  out.op_overhead_us = overhead_us;
  // The breakdown is the raw step's (simulated again without the overhead when there is one), split on
  // its critical rank; the overhead and the factor add what they add to it.
  const bool simulate_raw = occupancy.shared || overhead_us != 0.0;
  const ScheduleResult raw_schedule =
      simulate_raw ? simulate_1f1b(schedule_input(pipeline, c, occupancy, /*raw=*/true)) : schedule;
  const StepEnd raw_end = simulate_raw ? step_end(raw_schedule, stages, /*raw=*/true) : end;
  split_raw_step(raw_schedule, raw_end, stages, out);
  if (occupancy.shared) {  // the overhead is stretched with the operators: the raw simulation is the raw total
    out.raw_total_us = raw_end.total_us;
    out.notes.push_back(std::to_string(occupancy.occupancy) + " ranks share " +
                        std::to_string(static_cast<int64_t>(occupancy.slots)) +
                        " rank slots (cores / threads per rank): operators timed at occupancy " +
                        std::to_string(occupancy.profile_occupancy) + ", stretched by processor sharing");
  } else {
    out.raw_total_us = total_with_overhead - overhead_us * static_cast<double>(out.op_calls);
  }
  for (const StageFigures& stage : pipeline.stages) {
    out.stage_forward_us.push_back(stage.times.forward_us);
    out.stage_backward_us.push_back(stage.times.backward_us);
  }
  out.calibration_factor = calibration.factor;
  out.total_us = total_with_overhead * calibration.factor;
  out.split_raw_us = raw_end.total_us;
  out.overhead_total_us = total_with_overhead - raw_end.total_us;
  out.calibration_adjust_us = out.total_us - total_with_overhead;
  out.calibration_rows = calibration.rows;
  out.stages_traced = pipeline.stages_traced;
  out.stages_built = pipeline.stages_built;
  out.stages_described = pipeline.stages_described;
  out.built_operators = pipeline.built_operators;
  out.built_operators_profiled = pipeline.built_profiled;
  out.built_operators_without_time = pipeline.built_without_time;
  return out;
}

}  // namespace

PredictOutcome predict(StageResolver& resolver, const PredictRequest& request) {
  if (std::optional<std::string> reason = illegal_reason(request.config, request.model)) return {std::nullopt, *reason};
  if (request.ranks_per_node < 0) {
    return {std::nullopt, "ranks per node " + std::to_string(request.ranks_per_node) + ": give a positive count (0: one node)"};
  }
  if (precision_policy(request.precision).fp8_matmul && !request.blind && resolver.target() == nullptr) {
    return {std::nullopt, "fp8 is predicted from a hardware description only (--hardware NAME): no calibration measures fp8"};
  }
  const OccupancyPlan occupancy = plan_occupancy(resolver.model(), resolver.target(), request.config);
  const Calibration identity;
  const Calibration& calibration =
      choose_calibration(resolver.model(), resolver.target(), request, occupancy.occupancy, identity);
  std::vector<std::string> notes;
  const PipelineFigures pipeline = pipeline_figures(resolver, request, occupancy, calibration.op_overhead_us, notes);
  if (!pipeline.failure.empty()) return {std::nullopt, pipeline.failure};
  Prediction prediction = assemble(pipeline, request.config, occupancy, calibration, std::move(notes));
  prediction.communication_described = resolver.target() != nullptr;
  prediction.inter_node_from_intra = pipeline.inter_node_from_intra;
  if (pipeline.inter_node_from_intra) {
    prediction.notes.push_back(
        "communication across nodes timed with one-node figures: the calibration measured no "
        "group across nodes (calibrate comm on several nodes to measure them)");
  }
  return {std::move(prediction), ""};
}

PredictRequest request_for(const store::GroundTruthRecord& row, bool blind, const LlamaSpec* model_spec) {
  PredictRequest request;
  request.model_name = row.model;
  request.config = row.config;
  request.precision = row.precision;
  request.techniques = row.techniques;
  request.blind = blind;
  request.model = model_spec;
  request.ranks_per_node = row.ranks_per_node;  // as the ground-truth job sat on its nodes
  return request;
}

namespace {

// The terms' described values and how far the rows may move them (the prior), in one place:
//  - the per-call overhead: 0, the isolated operator timings being the whole step until rows say otherwise;
//    10 us of pull (PyTorch's eager dispatch and autograd bookkeeping cost a few us a call on a CPU);
//  - the shared factor: 1 (the timings as measured), ln-sigma 0.5;
//  - each occupancy's contention: the shared factor (ln 0), ln-sigma 0.1: occupancies differ by what the busy
//    ranks take from each other, not by a free factor each (the per-occupancy grid fit this replaces moved a
//    one-rank prediction 24-36 % on 5 % of profile noise);
//  - a row: trusted to 5 % (ln), this machine's cross-run noise.
constexpr double kOverheadPriorUs = 0.0, kOverheadPriorSigmaUs = 10.0;
constexpr double kLnFactorPriorSigma = 0.5;
constexpr double kContentionSigma = 0.1;
constexpr double kRowSigma = 0.05;

// The per-call overheads (us) at which each row is predicted once; between two knots its time is
// interpolated linearly (a step's time is piecewise linear in the overhead: a pass adds it once per call,
// the pipeline and the exposed communication take sums and maxima of passes), so the fit predicts no row
// again. The last knot is the overhead's upper bound.
constexpr std::array<double, 9> kOverheadKnotsUs = {0, 1, 2, 4, 8, 16, 32, 64, 128};

// A row's raw time (factor 1) at overhead `overhead_us`, from its times at the knots.
double raw_at(const std::array<double, kOverheadKnotsUs.size()>& at_knots, double overhead_us) {
  std::size_t k = 1;
  while (k + 1 < kOverheadKnotsUs.size() && kOverheadKnotsUs[k] < overhead_us) ++k;
  const double x0 = kOverheadKnotsUs[k - 1], x1 = kOverheadKnotsUs[k];
  const double w = std::clamp((overhead_us - x0) / (x1 - x0), 0.0, 1.0);
  return at_knots[k - 1] + w * (at_knots[k] - at_knots[k - 1]);
}

// The terms for rows at `occupancies` (ascending): overhead, shared factor, then one contention each.
std::vector<FitParameter> calibration_parameters(const std::vector<int64_t>& occupancies) {
  std::vector<FitParameter> parameters = {
      {"op_overhead_us", kOverheadPriorUs, kOverheadPriorSigmaUs, 0.0, kOverheadKnotsUs.back()},
      {"ln_factor", 0.0, kLnFactorPriorSigma, std::log(0.1), std::log(10.0)},
  };
  for (int64_t occupancy : occupancies)
    parameters.push_back({"ln_contention@" + std::to_string(occupancy), 0.0, kContentionSigma, -1.0, 1.0});
  return parameters;
}

}  // namespace

CalibrationFit fit_calibration(StageResolver& resolver, const std::vector<store::GroundTruthRecord>& rows, bool blind,
                               const std::set<std::string>& exclude_tuples, const LlamaSpec* model_spec) {
  CalibrationFit fit;
  // Each predictable row's raw time at every knot; the others are listed with their reason.
  struct Row {
    std::array<double, kOverheadKnotsUs.size()> raw_us{};
    double measured_us = 0;
    int64_t occupancy = 0;
    std::size_t occupancy_index = 0;  // in `occupancies`
  };
  std::vector<Row> fitted_rows;
  std::map<int64_t, int64_t> rows_at;  // occupancy -> its fitted rows
  for (const store::GroundTruthRecord& record : rows) {
    if (record.status != store::RunStatus::kOk || exclude_tuples.count(record.tuple())) continue;
    PredictRequest request = request_for(record, blind, model_spec);
    Row row;
    row.measured_us = record.time_us_median;
    row.occupancy = record.occupancy();
    std::string failure;
    for (std::size_t k = 0; k < kOverheadKnotsUs.size() && failure.empty(); ++k) {
      Calibration at_knot;
      at_knot.op_overhead_us = kOverheadKnotsUs[k];
      request.override_calibration = &at_knot;
      const PredictOutcome outcome = predict(resolver, request);
      if (outcome.ok()) {
        row.raw_us[k] = outcome.prediction->total_us;
      } else {
        ITERTIME_CHECK(k == 0, "a calibration row predicted without overhead failed with one: " + outcome.reason);
        failure = outcome.reason;
      }
    }
    if (!failure.empty()) {
      fit.unpredicted.push_back(UnpredictedRow{record.key, failure});
      continue;
    }
    fitted_rows.push_back(row);
    ++rows_at[row.occupancy];
  }
  if (fitted_rows.empty()) return fit;
  std::vector<int64_t> occupancies;  // ascending, those with rows
  for (const auto& [occupancy, count] : rows_at) occupancies.push_back(occupancy);
  for (Row& row : fitted_rows) {
    row.occupancy_index =
        static_cast<std::size_t>(std::lower_bound(occupancies.begin(), occupancies.end(), row.occupancy) - occupancies.begin());
  }
  // Residual of row i: ln(predicted / measured) / kRowSigma, predicted = exp(ln_factor + ln_contention of
  // its occupancy) x its raw time at the overhead.
  const auto residuals = [&](const std::vector<double>& x) {
    std::vector<double> r;
    r.reserve(fitted_rows.size());
    for (const Row& row : fitted_rows) {
      const double raw = raw_at(row.raw_us, x[0]);
      const double ln_scale = x[1] + x[2 + row.occupancy_index];
      r.push_back(raw > 0 && row.measured_us > 0 ? (ln_scale + std::log(raw / row.measured_us)) / kRowSigma : 0.0);
    }
    return r;
  };
  const std::vector<FitParameter> parameters = calibration_parameters(occupancies);
  const RegularizedFit result = fit_regularized(parameters, residuals, 200, 1e-4, 1e-12);
  for (std::size_t j = 0; j < occupancies.size(); ++j) {
    Calibration& c = fit.calibration.per_occupancy[occupancies[j]];
    c.op_overhead_us = result.values[0];
    c.factor = std::exp(result.values[1] + result.values[2 + j]);
    c.rows = rows_at[occupancies[j]];
  }
  for (std::size_t k = 0; k < parameters.size(); ++k)
    fit.terms.push_back(FittedCalibrationTerm{parameters[k].name, parameters[k].prior, result.values[k], result.sigma[k]});
  fit.converged = result.converged;
  return fit;
}

}  // namespace itertime::predict
