// ops_calibration.cpp: calibrate ops: stage traces and isolated operator replays into /ops (ops_calibration.hpp).
#include "calibrate/ops_calibration.hpp"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "calibrate/gradient_sync.hpp"
#include "calibrate/llama_model.hpp"
#include "calibrate/op_tracer.hpp"
#include "calibrate/recipe_stamp.hpp"
#include "calibrate/torch_compat.hpp"
#include "calibrate/torch_info.hpp"
#include "calibrate/tp_comm.hpp"
#include "common/errors.hpp"
#include "common/h5store.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/resume_plan.hpp"
#include "runtime/speed_reference.hpp"
#include "calibrate/replay_timer.hpp"
#include "runtime/outside_load_probe.hpp"
#include "common/ops_store.hpp"
#include "common/reference_store.hpp"
#include "common/speed_drift.hpp"
#include "common/stats.hpp"
#include "common/store_meta.hpp"
#include "common/training_recipe.hpp"

namespace itertime::calibrate {
using namespace itertime::store;

namespace {

using Clock = std::chrono::steady_clock;

struct StageTrace {
  std::vector<TracedOp> ops;
  std::vector<TracedComm> comms;
  int64_t local_params = 0;
  int num_layers = 0;
};

struct StageRequest {
  int tp, pp, stage, micro_batch, seq_len;
  int dp;                   // the reduction size dp*cp; the stage depends on it only with dopt (and ovl)
  int cp;                   // context parallelism: the stage as CP rank 0 runs it (seq_len / cp tokens)
  PrecisionName precision;  // the policy traced
  PrecisionName labelled;   // the configuration's policy (differs for the blind variant)
  std::string variant;      // aware | blind
  TrainingTechniques techniques;
  std::string key;
};

// Pipeline and data-parallel transfers, from the policy (the trainer sends the residual stream at the
// activation dtype, with SP the rank's sequence shard of it, and all-reduces gradients at the gradient
// dtype, unless the distributed optimizer reduce-scatters them or overlapped reduction reduces them in
// buckets: the gradient sync records those comms where they run). Appended after the traced step's
// comms, in the stage builder's order.
void add_pipeline_and_dp_comms(StageTrace& trace, const LlamaSpec& model, const PrecisionPolicy& policy, int pp, int stage_index,
                               int micro_batch, int sent_seq_len, int64_t local_params, bool dp_all_reduce) {
  const int64_t activation_bytes = static_cast<int64_t>(micro_batch) * sent_seq_len * model.hidden_size *
                                   static_cast<int64_t>(dtype_bytes(policy.activation_dtype));
  if (stage_index < pp - 1) {
    trace.comms.push_back(TracedComm{CommKind::kPpSendForward, policy.activation_dtype, activation_bytes, Phase::kForward});
  }
  if (stage_index > 0) {
    trace.comms.push_back(TracedComm{CommKind::kPpSendBackward, policy.activation_dtype, activation_bytes, Phase::kBackward});
  }
  if (!dp_all_reduce) return;
  trace.comms.push_back(TracedComm{CommKind::kDpAllReduce, policy.grad_dtype,
                                   local_params * static_cast<int64_t>(dtype_bytes(policy.grad_dtype)), Phase::kDpBuffer});
}

// Why a stage cannot be traced with these techniques ("" when it can): the trainer's own refusals
// (calibrate/trainer.cpp's check_trainable).
// techniques: already at the reduction size (at_dp(.., dp*cp)).
std::string untraceable_reason(const LlamaSpec& model, int tp, int seq_len, const TrainingTechniques& techniques, int cp = 1) {
  if (cp > 1 && seq_len % (2 * cp) != 0) {
    return "context parallelism (cp " + std::to_string(cp) + ") needs seq_len " + std::to_string(seq_len) +
           " to be a multiple of 2*cp";
  }
  if (techniques.sequence_parallel && cp == 1 && seq_len % tp != 0) {
    return "sequence parallelism needs seq_len " + std::to_string(seq_len) + " to be a multiple of tp " + std::to_string(tp);
  }
  if (techniques.sequence_parallel && cp > 1 && (seq_len / cp) % tp != 0) {
    return "sequence parallelism with cp " + std::to_string(cp) + " needs seq_len/cp " + std::to_string(seq_len / cp) +
           " to be a multiple of tp " + std::to_string(tp);
  }
  if (techniques.vocab_parallel && model.vocab_size % tp != 0) {
    return "a vocabulary-parallel head needs vocab_size " + std::to_string(model.vocab_size) + " of model " + model.name +
           " to be a multiple of tp " + std::to_string(tp);
  }
  return "";
}

// The trainer's pieces (calibrate/trainer.cpp) for one stage, as TP rank 0, CP rank 0 and DP rank 0 hold
// them, over communicators that move no data and record their calls while a session traces: the
// TpContext and CpContext, the stage, the gradient synchronization (gradient_sync.hpp, with opg its waits
// in the forward) and AdamW. trace() runs one untraced warm-up step (optimizer state, allocator, autocast
// caches), then the traced one: one micro-batch's forward and backward, the reduction and the update.
class StageUnderTrace {
 public:
  StageUnderTrace(const LlamaSpec& model, const StageLayers& layers, const PrecisionPolicy& policy, Backend backend,
                  AttentionKernel attention, uint64_t seed, const TrainingTechniques& techniques, int tp, int micro_batch,
                  int seq_len, int dp, int cp);
  StageUnderTrace(const StageUnderTrace&) = delete;
  StageUnderTrace& operator=(const StageUnderTrace&) = delete;
  StageTrace trace();
  int64_t local_params() const { return local_params_; }
  // With SP a stage's input and output are the rank's [batch, seq/tp, hidden] shard.
  int residual_seq_len() const { return tp_context_.sp() ? local_seq_len_ / tp_context_.size : local_seq_len_; }
  bool dp_recorded_in_place() const { return dp_recorded_in_place_; }

 private:
  void make_sync(const TrainingTechniques& techniques, int dp);
  void one_step();
  void set_session(TraceSession* session);
  void phase(Phase p) {
    if (session_) session_->set_phase(p);
  }

  const LlamaSpec& model_;
  const StageLayers layers_;
  const PrecisionPolicy& policy_;
  const Backend backend_;
  const torch::Device device_;
  const int micro_batch_, local_seq_len_;  // the stage runs seq_len / cp tokens (the rotary tables still cover seq_len)
  TracingCommunicator tp_comm_, cp_comm_, dp_comm_;
  CommTimer tp_timer_, cp_timer_;
  TpContext tp_context_;
  CpContext cp_context_;
  LlamaStage stage_{nullptr};
  std::vector<torch::Tensor> parameters_;
  int64_t local_params_ = 0;
  std::unique_ptr<GradientSync> sync_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  bool dp_recorded_in_place_ = false;
  TraceSession* session_ = nullptr;  // the traced step's (none in the warm-up)
};

// With context parallelism the trainer's CpContext as CP rank 0 sees it (chunks 0 and 2cp-1), its
// all-gathers and reduce-scatters recorded (cp_all_gather, cp_reduce_scatter).
StageUnderTrace::StageUnderTrace(const LlamaSpec& model, const StageLayers& layers, const PrecisionPolicy& policy,
                                 Backend backend, AttentionKernel attention, uint64_t seed, const TrainingTechniques& techniques,
                                 int tp, int micro_batch, int seq_len, int dp, int cp)
    : model_(model),
      layers_(layers),
      policy_(policy),
      backend_(backend),
      device_(backend == Backend::kCuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU)),
      micro_batch_(micro_batch),
      local_seq_len_(seq_len / cp),
      tp_comm_(tp, nullptr, TracedGroup::kTp),
      cp_comm_(cp, nullptr, TracedGroup::kCp),
      dp_comm_(dp, nullptr, TracedGroup::kDp),
      tp_context_{
          &tp_comm_, tp, 0, backend == Backend::kCuda, &tp_timer_, techniques.sequence_parallel, techniques.vocab_parallel},
      cp_context_{cp > 1 ? &cp_comm_ : nullptr, cp, 0, false, &cp_timer_} {
  stage_ = LlamaStage(model, layers, seed, &tp_context_, seq_len, resolve_attention(attention), techniques.recompute,
                      cp > 1 ? &cp_context_ : nullptr);
  stage_->to(device_, to_torch(policy.param_dtype));
  for (auto& p : stage_->parameters()) {
    parameters_.push_back(p);
    local_params_ += p.numel();
  }
  make_sync(techniques, dp);
  optimizer_ =
      std::make_unique<torch::optim::AdamW>(sync_->optimizer_parameters(), torch::optim::AdamWOptions(kAdamW.learning_rate)
                                                                               .betas(std::make_tuple(kAdamW.beta1, kAdamW.beta2))
                                                                               .weight_decay(kAdamW.weight_decay)
                                                                               .eps(adamw_eps(policy)));
}

// The trainer's gradient sync as DP rank 0 runs it (techniques at dp: overlap only at dp > 1). The
// all-reduce strategies' operators do not depend on the group's size (the divisor is a wrapped number):
// they are traced as at 2 ranks, so that the plain all-reduce runs (at 1 rank the trainer skips it); the
// distributed optimizer's are traced at dp (its shard and padding depend on it). The plain all-reduce's
// comm is appended with the pipeline's (add_pipeline_and_dp_comms), in the stage builder's order; the
// other strategies' DP comms are recorded where they run.
void StageUnderTrace::make_sync(const TrainingTechniques& techniques, int dp) {
  GradientSyncSetup setup;
  setup.parameters = parameters_;
  if (tp_context_.sp()) {  // the norms' gradients, from sequence shards, summed over TP (sp_grads)
    for (const auto& module : stage_->modules(/*include_self=*/false)) {
      if (module->as<RMSNormImpl>() == nullptr) continue;
      for (auto& p : module->parameters()) setup.norm_weights.push_back(p);
    }
  }
  setup.techniques = techniques;
  setup.dp_comm = &dp_comm_;
  setup.ranks = techniques.distributed_optimizer ? dp : 2;
  setup.rank = 0;
  setup.tp_comm = &tp_comm_;
  setup.cuda = backend_ == Backend::kCuda;
  setup.mark_phase = [this](Phase p) { phase(p); };
  sync_ = make_gradient_sync(std::move(setup));
  dp_recorded_in_place_ = techniques.distributed_optimizer || techniques.overlap_gradient_reduction;
  if (sync_->gathers_parameters()) {
    GradientSync* sync = sync_.get();
    stage_->set_before_parameters([sync](std::size_t begin, std::size_t end) { sync->wait_for_parameters(begin, end); });
  }
}

void StageUnderTrace::set_session(TraceSession* session) {
  session_ = session;
  tp_comm_.set_session(session);
  cp_comm_.set_session(session);
  if (dp_recorded_in_place_) dp_comm_.set_session(session);
}

// One micro-batch, the step's only one: its backward is the step's last.
void StageUnderTrace::one_step() {
  sync_->begin_step();     // the trainer's step start (the buckets' views zeroed: dp_buffer)
  phase(Phase::kForward);  // the inputs are drawn in the forward
  const auto activation_options = torch::TensorOptions().dtype(to_torch(policy_.activation_dtype)).device(device_);
  const auto token_options = torch::TensorOptions().dtype(torch::kInt64).device(device_);
  torch::Tensor input;
  torch::Tensor targets;
  if (layers_.has_embedding) {
    input = torch::randint(model_.vocab_size, {micro_batch_, local_seq_len_}, token_options);
  } else {
    input = torch::randn({micro_batch_, residual_seq_len(), model_.hidden_size}, activation_options).requires_grad_(true);
  }
  if (layers_.has_head) targets = torch::randint(model_.vocab_size, {micro_batch_, local_seq_len_}, token_options);
  torch::Tensor output;
  {
    const torch::DeviceType device_type = backend_ == Backend::kCuda ? torch::kCUDA : torch::kCPU;
    AutocastGuard autocast(device_type, to_torch(policy_.compute_dtype), policy_.autocast);
    output = stage_->forward(input, targets);
  }
  if (layers_.has_head) output = output * 0.25;  // the trainer's loss * (loss_scale / m)
  phase(Phase::kBackward);
  sync_->before_backward(0, true);
  if (layers_.has_head) {
    output.backward();
  } else {
    torch::autograd::backward({output}, {torch::randn_like(output)});
  }
  sync_->reduce();
  phase(Phase::kOptimizer);
  optimizer_->step();
  sync_->after_update();
}

StageTrace StageUnderTrace::trace() {
  one_step();  // warm-up
  StageTrace trace;
  {
    TraceSession session;
    set_session(&session);
    one_step();
    set_session(nullptr);
    trace.ops = session.operators();
    trace.comms = session.comms();
  }
  return trace;
}

StageTrace trace_stage(const LlamaSpec& model, int tp, int pp, int stage_index, int micro_batch, int seq_len,
                       PrecisionName precision_name, AttentionKernel attention, Backend backend, uint64_t seed,
                       const TrainingTechniques& requested, int dp, int cp) {
  const PrecisionPolicy& policy = precision_policy(precision_name);
  require_supported(policy, backend, backend_capabilities());
  if (dp < 1) throw UserError("trace_stage: dp must be at least 1, not " + std::to_string(dp));
  if (cp < 1) throw UserError("trace_stage: cp must be at least 1, not " + std::to_string(cp));
  if (dp % cp != 0) throw InternalError("trace_stage: the reduction size dp*cp is not a multiple of cp", __FILE__, __LINE__);
  const TrainingTechniques techniques = at_dp(requested, dp);
  const std::string untraceable = untraceable_reason(model, tp, seq_len, techniques, cp);
  if (!untraceable.empty()) throw UserError("training recipe '" + recipe_text(techniques) + "': " + untraceable);
  const auto stages = stage_layers(static_cast<int>(model.num_layers), pp);
  const StageLayers& layers = stages[static_cast<std::size_t>(stage_index)];
  StageUnderTrace stage(model, layers, policy, backend, attention, seed, techniques, tp, micro_batch, seq_len, dp, cp);
  StageTrace trace = stage.trace();
  add_pipeline_and_dp_comms(trace, model, policy, pp, stage_index, micro_batch, stage.residual_seq_len(), stage.local_params(),
                            !stage.dp_recorded_in_place());
  trace.local_params = stage.local_params();
  trace.num_layers = layers.num_layers;
  return trace;
}

struct ProfileResult {
  double median_us = 0.0, min_us = 0.0, cv = 0.0;
  int repeats = 0;
  bool ok = false;
};

ProfileResult profile(const TracedOp& op, torch::Device device, ReplayTimer& timer, const OpsCalibrationOptions& options) {
  ProfileResult result;
  try {
    OpReplay replay(op, device);
    for (int i = 0; i < options.warmup_repeats; ++i) replay.run();
    timer.synchronize();
    std::vector<double> samples;
    double spent_us = 0.0;
    while (static_cast<int>(samples.size()) < options.max_repeats &&
           (static_cast<int>(samples.size()) < options.min_repeats || spent_us < options.min_time_us)) {
      const double us = timer.time_us([&] { replay.run(); });
      samples.push_back(us);
      spent_us += us;
    }
    const stats::Summary s = stats::summarize(samples);
    result.median_us = s.median;
    result.min_us = s.min;
    result.cv = s.cv;
    result.repeats = static_cast<int>(samples.size());
    result.ok = true;
  } catch (const std::exception&) {
    result.ok = false;  // not replayable in isolation (recorded with ok = 0)
  }
  return result;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out;
}

}  // namespace

StageTraceInfo trace_stage_info(const LlamaSpec& model, int tp, int pp, int stage, int micro_batch, int seq_len,
                                PrecisionName precision, AttentionKernel attention, Backend backend,
                                const TrainingTechniques& techniques, int dp, int cp) {
  set_compute_threads(1);
  if (dp < 1 || cp < 1) throw UserError("trace_stage_info: dp and cp must be at least 1");
  const StageTrace trace =
      trace_stage(model, tp, pp, stage, micro_batch, seq_len, precision, attention, backend, 1234, techniques, dp * cp, cp);
  StageTraceInfo info;
  for (const TracedOp& op : trace.ops) {
    info.ops.push_back(TracedOpInfo{op.name, to_string(op.phase), op.input_dtypes(), op.output_dtype, op.signature()});
  }
  for (const TracedComm& comm : trace.comms) {
    info.comms.push_back(TracedCommInfo{comm.kind, to_string(comm.phase), to_string(comm.dtype), comm.bytes});
  }
  info.local_params = trace.local_params;
  return info;
}

namespace {

// The stages to trace (deterministic on every rank), the occupancies to profile at, and the recipes
// left out (not traceable yet), one line each.
struct StagePlan {
  std::vector<StageRequest> requests;
  std::set<int> occupancies;
  std::set<std::string> left_out;
};

StagePlan plan_stages(const Job& job, int world_size) {
  const BackendCapabilities capabilities = backend_capabilities();
  StagePlan plan;
  std::set<std::string> request_keys;
  for (const JobConfig& config : job.configs) {
    const ParallelConfig& p = config.parallel;
    if (!p.violations(job.model, 0).empty()) continue;  // ground truth records it as skipped
    if (!precision_policy(config.precision).supports(job.backend, capabilities)) continue;
    if (p.world_size() > world_size) continue;
    // The reduction size: with context parallelism the gradients are reduced (and the distributed
    // optimizer sharded) over dp*cp ranks (trainer.hpp); the stage runs at it.
    const int reduction = p.reduction_ranks();
    const TrainingTechniques techniques = at_dp(config.techniques, reduction);  // what the stage runs at this dp*cp
    const std::string untraceable = untraceable_reason(job.model, p.tp, p.seq_len, techniques, p.cp);
    if (!untraceable.empty()) {
      plan.left_out.insert("recipe " + recipe_text(techniques) + (p.cp > 1 ? " at cp " + std::to_string(p.cp) : "") + ": " +
                           untraceable);
      continue;
    }
    plan.occupancies.insert(p.world_size());
    // With vp chunks per pipeline rank, chunk c of rank r runs exactly stage c*pp + r of a pp*vp pipeline
    // (its layers, embedding or head, its P2P; with overlapped reduction its own buckets, as the trainer
    // keeps them per chunk, gradient_sync.hpp): those stages are traced, and the predictor assembles
    // each rank from them (predict/predictor.hpp).
    const int pipeline = p.pp * p.vp;
    for (int s = 0; s < pipeline; ++s) {
      for (const std::string variant : {"aware", "blind"}) {
        StageRequest request{p.tp,
                             pipeline,
                             s,
                             p.micro_batch,
                             p.seq_len,
                             reduction,
                             p.cp,
                             variant == std::string("aware") ? config.precision : PrecisionName::kFp32,
                             config.precision,
                             variant,
                             techniques,
                             ""};
        request.key = stage_key(job.model.name, p.tp, pipeline, s, p.micro_batch, p.seq_len, to_string(config.precision), variant,
                                techniques, reduction, p.cp);
        if (request_keys.insert(request.key).second) plan.requests.push_back(request);
      }
    }
  }
  return plan;
}

// What rank 0 knows of the /ops tables: read when the store opens, signature ids kept up to date.
struct StoredOps {
  std::map<std::string, int64_t> signature_ids;  // stored signature text -> id
  std::set<std::pair<int64_t, int64_t>> timed;   // (signature id, active ranks), as found at the start
};

void read_stored_ops(h5::Store& store, StoredOps& stored) {
  if (store.exists(kOpSignatures)) {
    for (const auto& row : store.table<OpSignatureRow>(kOpSignatures).read_all()) {
      stored.signature_ids[h5::get_string(row.signature)] = row.id;
    }
  }
  if (store.exists(kOpTimings)) {
    for (const auto& row : store.table<OpTimingRow>(kOpTimings).read_all())
      stored.timed.insert({row.signature_id, row.active_ranks});
  }
}

// One ops calibration in progress: what every step of it reads, and the summary it fills.
struct OpsRun {
  const OpsCalibrationOptions& options;
  int world_rank;
  int world_size;
  torch::Device device;
  AttentionKernel attention;
  StagePlan stages;
  ResumePlan plan;
  StoredOps stored;                  // rank 0
  std::vector<TracedOp> unique_ops;  // one per stored signature text, in order of first appearance
  OpsCalibrationSummary summary;
  int pass = 0;                            // the profiling pass being measured (0: calibrate ops)
  std::vector<ReferenceSample> reference;  // rank 0: /reference/probes, as read at the start and recorded since
};

void print_start(const OpsRun& run) {
  const Job& job = run.options.job;
  std::printf("# itertime calibrate ops: job %s, model %s, %zu stage traces (%zu present), occupancies", job.name.c_str(),
              job.model.name.c_str(), run.stages.requests.size(), run.summary.stages_present);
  for (int k : run.stages.occupancies) std::printf(" %d", k);
  std::printf(" rank(s)\n");
  for (const std::string& line : run.stages.left_out) std::printf("  not traced: %s\n", line.c_str());
  std::fflush(stdout);
}

// New signatures of `trace` get the next ids (rank 0).
void append_new_signatures(h5::Store& store, const StageTrace& trace, StoredOps& stored) {
  auto signature_table = store.table<OpSignatureRow>(kOpSignatures);
  std::vector<OpSignatureRow> new_rows;
  for (const TracedOp& op : trace.ops) {
    const std::string signature = stored_signature(op.signature());  // ids are keyed by the stored text
    if (stored.signature_ids.count(signature)) continue;
    OpSignatureRow row{};
    row.id = static_cast<int64_t>(signature_table.size() + new_rows.size());
    h5::set_string(row.name, op.name);
    h5::set_string(row.signature, signature);
    h5::set_string(row.input_dtypes, join(op.input_dtypes()));
    h5::set_string(row.output_dtype, op.output_dtype);
    row.flops = op.flops();
    row.bytes = op.bytes();
    stored.signature_ids[signature] = row.id;
    new_rows.push_back(row);
  }
  signature_table.append(new_rows);
}

// Sequence: counts per (phase, signature), in order of first appearance.
std::vector<OpSequenceRow> sequence_rows(const StageRequest& request, const StageTrace& trace, const StoredOps& stored) {
  std::vector<OpSequenceRow> sequence;
  std::map<std::pair<std::string, int64_t>, std::size_t> position;
  for (const TracedOp& op : trace.ops) {
    const std::string phase = to_string(op.phase);
    const int64_t id = stored.signature_ids.at(stored_signature(op.signature()));
    const auto found = position.find({phase, id});
    if (found != position.end()) {
      sequence[found->second].count += 1;
      continue;
    }
    OpSequenceRow row{};
    h5::set_string(row.stage_key, request.key);
    h5::set_string(row.phase, phase);
    row.signature_id = id;
    row.count = 1;
    position[{phase, id}] = sequence.size();
    sequence.push_back(row);
  }
  return sequence;
}

// Communication operations: counts per (phase, kind, dtype, bytes), in order of first appearance.
std::vector<OpCommRow> comm_rows(const StageRequest& request, const StageTrace& trace) {
  std::vector<OpCommRow> comms;
  std::map<std::string, std::size_t> comm_position;
  for (const TracedComm& comm : trace.comms) {
    const std::string kind = to_string(comm.kind);  // text only here, at the HDF5 boundary
    const std::string comm_key =
        to_string(comm.phase) + "/" + kind + "/" + to_string(comm.dtype) + "/" + std::to_string(comm.bytes);
    const auto found = comm_position.find(comm_key);
    if (found != comm_position.end()) {
      comms[found->second].count += 1;
      continue;
    }
    OpCommRow row{};
    h5::set_string(row.stage_key, request.key);
    h5::set_string(row.phase, to_string(comm.phase));
    h5::set_string(row.kind, kind);
    h5::set_string(row.dtype, to_string(comm.dtype));
    row.bytes = comm.bytes;
    row.count = 1;
    comm_position[comm_key] = comms.size();
    comms.push_back(row);
  }
  return comms;
}

OpStageRow stage_row(const StageRequest& request, const StageTrace& trace, const std::string& model_name) {
  OpStageRow row{};
  h5::set_string(row.stage_key, request.key);
  h5::set_string(row.model, model_name);
  row.tp = request.tp;
  row.pp = request.pp;
  row.stage = request.stage;
  row.micro_batch = request.micro_batch;
  row.seq_len = request.seq_len;
  h5::set_string(row.precision, to_string(request.labelled));
  h5::set_string(row.variant, request.variant);
  row.local_params = trace.local_params;
  row.num_layers = trace.num_layers;
  return row;
}

// Rank 0: a stage trace not yet stored: its new signatures, then its sequence, comms and stage row.
void store_stage_trace(OpsRun& run, const StageRequest& request, const StageTrace& trace) {
  h5::Store& store = *run.plan.store;
  const h5::Store::Transaction together(store);  // a stage's new signatures reach the file with its rows
  append_new_signatures(store, trace, run.stored);
  const std::vector<OpSequenceRow> sequence = sequence_rows(request, trace, run.stored);
  append_stage(store, stage_row(request, trace, run.options.job.model.name), sequence, comm_rows(request, trace));
  ++run.summary.stages_traced;
  std::printf("  traced %-60s %5zu operators, %3zu distinct in its sequence\n", request.key.c_str(), trace.ops.size(),
              sequence.size());
  std::fflush(stdout);
}

// Traces every stage on every rank (replay needs the recorded calls); rank 0 stores the new ones.
void trace_all_stages(OpsRun& run) {
  const Job& job = run.options.job;
  std::map<std::string, std::size_t> unique_index;
  std::map<std::string, StageTrace> traces_by_policy;  // "tp/pp/s/mbs/seq/precision/recipe[/dpN]" -> trace
  for (std::size_t i = 0; i < run.stages.requests.size(); ++i) {
    const StageRequest& r = run.stages.requests[i];
    const std::string trace_key =
        std::to_string(r.tp) + "/" + std::to_string(r.pp) + "/" + std::to_string(r.stage) + "/" + std::to_string(r.micro_batch) +
        "/" + std::to_string(r.seq_len) + "/" + to_string(r.precision) + "/" + recipe_text(r.techniques) +
        (r.techniques.distributed_optimizer ? "/dp" + std::to_string(r.dp) : "") + (r.cp > 1 ? "/cp" + std::to_string(r.cp) : "");
    if (!traces_by_policy.count(trace_key)) {
      traces_by_policy[trace_key] = trace_stage(job.model, r.tp, r.pp, r.stage, r.micro_batch, r.seq_len, r.precision,
                                                run.attention, job.backend, job.seed, r.techniques, r.dp, r.cp);
    }
    const StageTrace& trace = traces_by_policy[trace_key];
    for (const TracedOp& op : trace.ops) {
      const std::string signature = stored_signature(op.signature());  // one measurement per stored text
      if (!unique_index.count(signature)) {
        unique_index[signature] = run.unique_ops.size();
        run.unique_ops.push_back(op);
      }
    }
    if (run.world_rank == 0 && !run.plan.present[i]) store_stage_trace(run, r, trace);
  }
  run.summary.signatures = run.unique_ops.size();
}

// Every rank must hold the same signature list, or the profiles would not line up (collective).
void check_same_signatures(const std::vector<TracedOp>& unique_ops) {
  uint64_t digest = 1469598103934665603ull;
  for (const TracedOp& op : unique_ops) {
    for (char c : op.signature()) digest = (digest ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  uint64_t root_digest = digest;
  MPI_Bcast(&root_digest, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  ITERTIME_CHECK(root_digest == digest, "ranks traced different operator signatures; tracing must be deterministic");
}

int64_t signature_id(const OpsRun& run, std::size_t unique_index) {
  return run.stored.signature_ids.at(stored_signature(run.unique_ops[unique_index].signature()));
}

// Indices into unique_ops of the signatures not yet timed at `occupancy`, as rank 0 knows (collective).
std::vector<std::size_t> signatures_to_time(const OpsRun& run, int occupancy) {
  std::vector<uint8_t> needed(run.unique_ops.size(), 1);
  if (run.world_rank == 0 && run.pass == 0) {  // a later pass is recorded whole or not at all: it times every one
    for (std::size_t i = 0; i < run.unique_ops.size(); ++i) {
      needed[i] = run.stored.timed.count({signature_id(run, i), occupancy}) ? 0 : 1;
    }
  }
  needed = broadcast_flags(std::move(needed));
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < needed.size(); ++i) {
    if (needed[i]) todo.push_back(i);
  }
  return todo;
}

constexpr std::size_t kProfileValues = 5;  // per signature and rank: median, min, cv, repeats, ok

// Rank 0: one timing row per profiled signature from every active rank's values (`all`, rank-major).
std::vector<OpTimingRow> timing_rows(OpsRun& run, int occupancy, const std::vector<std::size_t>& chunk,
                                     const std::vector<double>& all) {
  const std::size_t per_rank = chunk.size() * kProfileValues;
  std::vector<OpTimingRow> rows;
  for (std::size_t j = 0; j < chunk.size(); ++j) {
    const std::size_t offset = j * kProfileValues;
    std::vector<double> medians;
    double minimum = 0.0;
    bool ok = true;
    for (int r = 0; r < occupancy; ++r) {
      const double* v = &all[static_cast<std::size_t>(r) * per_rank + offset];
      ok = ok && v[4] > 0.5;
      medians.push_back(v[0]);
      minimum = r == 0 ? v[1] : std::min(minimum, v[1]);
    }
    OpTimingRow row{};
    row.signature_id = signature_id(run, chunk[j]);
    row.active_ranks = occupancy;
    h5::set_string(row.backend, to_string(run.options.job.backend));
    row.ok = ok ? 1 : 0;
    if (ok) {
      row.time_us_median = stats::median(medians);
      row.time_us_min = minimum;
      row.time_us_max_rank = stats::max(medians);
      row.time_cv = all[offset + 2];
      row.repeats = static_cast<int64_t>(all[offset + 3]);
    } else {
      ++run.summary.replay_failures;
      std::printf("  cannot replay %s in isolation; recorded with ok = 0\n", run.unique_ops[chunk[j]].signature().c_str());
    }
    rows.push_back(row);
  }
  return rows;
}

// The active ranks time the `chunk` of signatures at once, and again while they saw outside load (the
// job's rounds policy: above outside_load_cores, up to max_extra_rounds more tries, each after waiting
// for a quiet moment; what stays loaded is kept and counted); rank 0 gathers and appends their rows (collective over `active`).
std::vector<OpTimingRow> profile_chunk(OpsRun& run, int occupancy, const std::vector<std::size_t>& chunk, MPI_Comm active,
                                       OutsideLoadProbe& probe, ReplayTimer& timer) {
  const RoundPolicy& policy = run.options.job.rounds;
  std::vector<double> local;  // per signature: median, min, cv, repeats, ok
  const auto time_chunk = [&](int) {
    local.clear();
    for (std::size_t index : chunk) {
      const ProfileResult r = profile(run.unique_ops[index], run.device, timer, run.options);
      local.insert(local.end(), {r.median_us, r.min_us, r.cv, static_cast<double>(r.repeats), r.ok ? 1.0 : 0.0});
    }
  };
  const auto report = [&](double load_cores, bool again) {
    if (run.world_rank != 0) return;
    std::printf("  outside load %.2f cores while timing %zu signatures at occupancy %d: %s\n", load_cores, chunk.size(),
                occupancy, again ? "timing them again" : "kept as they are");
    std::fflush(stdout);
  };
  if (probe.repeat_while_loaded(policy.outside_load_cores, policy.max_extra_rounds, time_chunk, report).stayed_loaded) {
    run.summary.timings_disturbed += chunk.size();
  }
  std::vector<double> all(local.size() * static_cast<std::size_t>(occupancy));
  MPI_Gather(local.data(), static_cast<int>(local.size()), MPI_DOUBLE, all.data(), static_cast<int>(local.size()), MPI_DOUBLE, 0,
             active);
  if (run.world_rank != 0) return {};
  std::vector<OpTimingRow> rows = timing_rows(run, occupancy, chunk, all);
  run.summary.timings_measured += rows.size();
  return rows;
}

// Rank 0: a later pass's rows for /ops/retimings.
std::vector<OpRetimingRow> retiming_rows(int pass, const std::vector<OpTimingRow>& rows) {
  std::vector<OpRetimingRow> out;
  for (const OpTimingRow& row : rows) {
    OpRetimingRow r{};
    r.pass = pass;
    r.signature_id = row.signature_id;
    r.active_ranks = row.active_ranks;
    std::copy(std::begin(row.backend), std::end(row.backend), std::begin(r.backend));
    r.time_us_median = row.time_us_median;
    r.time_us_min = row.time_us_min;
    r.time_us_max_rank = row.time_us_max_rank;
    r.time_cv = row.time_cv;
    r.repeats = row.repeats;
    r.ok = row.ok;
    out.push_back(r);
  }
  return out;
}

// Rank 0: records what a pass measured so far with the reference samples taken after it: pass 0 chunk by
// chunk (one commit each), a later pass whole, at its end (a killed one leaves nothing of itself).
void record_profiles(OpsRun& run, const std::vector<OpTimingRow>& rows, const std::vector<ReferenceSample>& samples,
                     const std::string& when) {
  h5::Store& store = *run.plan.store;
  const h5::Store::Transaction together(store);
  if (run.pass == 0) {
    store.table<OpTimingRow>(kOpTimings).append(rows);
  } else {
    store.table<OpRetimingRow>(kOpRetimings).append(retiming_rows(run.pass, rows));
  }
  record_reference(store, samples, when);
  run.reference.insert(run.reference.end(), samples.begin(), samples.end());
}

// Profiles, with ranks 0..occupancy-1 busy at once, the signatures not yet timed at `occupancy`
// (collective over MPI_COMM_WORLD; the other ranks wait quietly).
void profile_occupancy(OpsRun& run, int occupancy) {
  const std::vector<std::size_t> todo = signatures_to_time(run, occupancy);
  run.summary.timings_present += run.unique_ops.size() - todo.size();
  if (run.world_rank == 0) {
    std::printf("# profiling %zu signatures with %d rank(s) busy at once (%zu already timed)\n", todo.size(), occupancy,
                run.unique_ops.size() - todo.size());
    std::fflush(stdout);
  }
  MPI_Comm active = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, run.world_rank < occupancy ? 0 : MPI_UNDEFINED, run.world_rank, &active);
  if (active != MPI_COMM_NULL) {
    MpiComm owned(active, true);
    OutsideLoadProbe probe(owned.get());
    ReplayTimer timer(run.device);
    if (run.world_rank == 0) {
      std::printf("  operator replays timed by %s\n", timer.kind().c_str());
      std::fflush(stdout);
    }
    // The speed reference before the first chunk and after every chunk, at this occupancy.
    SpeedReference reference;
    std::vector<ReferenceSample> samples{reference.measure(owned.get(), ReferenceStage::kOps, run.pass)};
    std::vector<OpTimingRow> pass_rows;  // a later pass: every row, recorded at its end
    constexpr std::size_t kChunk = 32;   // gathered and flushed every kChunk signatures
    for (std::size_t begin = 0; begin < todo.size(); begin += kChunk) {
      const std::size_t end = std::min(todo.size(), begin + kChunk);
      const std::vector<OpTimingRow> rows =
          profile_chunk(run, occupancy,
                        std::vector<std::size_t>(todo.begin() + static_cast<long>(begin), todo.begin() + static_cast<long>(end)),
                        owned.get(), probe, timer);
      samples.push_back(reference.measure(owned.get(), ReferenceStage::kOps, run.pass));
      if (run.world_rank != 0) continue;
      // printed after the first and the last chunk
      const std::string when = begin > 0 && end < todo.size()
                                   ? std::string()
                                   : "pass " + std::to_string(run.pass) + ", occupancy " + std::to_string(occupancy) + ", " +
                                         std::to_string(end) + "/" + std::to_string(todo.size()) + " signatures";
      if (run.pass == 0) {
        record_profiles(run, rows, samples, when);
        samples.clear();
      } else {
        pass_rows.insert(pass_rows.end(), rows.begin(), rows.end());
        if (end == todo.size()) record_profiles(run, pass_rows, samples, when);
      }
      std::printf("  %zu/%zu signatures timed at occupancy %d\n", end, todo.size(), occupancy);
      std::fflush(stdout);
    }
  }
  quiet_barrier(MPI_COMM_WORLD);
}

// Rank 0: the drift of the ground truth's speed reference against each occupancy's chosen pass, printed.
void print_drift(const OpsRun& run, double threshold_pct) {
  const std::vector<OccupancyDrift> drifts = drift_by_occupancy(run.reference, choose_ops_passes(run.reference));
  if (drifts.empty()) {
    std::printf("# speed reference: no occupancy has samples of both the operator profiles and the ground truth\n");
  }
  const auto pct = [](double value) {
    char text[24];
    std::snprintf(text, sizeof(text), "%+.1f%%", value);
    return std::isfinite(value) ? std::string(text) : std::string("-");
  };
  for (const OccupancyDrift& d : drifts) {
    std::printf(
        "# drift at occupancy %d (ground truth against profiling pass %d of %zu): matrix product %s, element-wise %s, "
        "all-reduce %s; compute %s (%s %.1f%%)\n",
        d.occupancy, d.ops_pass, ops_passes(run.reference, d.occupancy).size(), pct(d.matmul_pct).c_str(),
        pct(d.elementwise_pct).c_str(), pct(d.allreduce_pct).c_str(), pct(d.compute_pct()).c_str(),
        std::fabs(d.compute_pct()) > threshold_pct ? "above" : "within", threshold_pct);
  }
  std::fflush(stdout);
}

// calibrate drift: while the speed reference says the profiles at an occupancy were taken in another
// state than the ground truth (common/speed_drift.hpp's rule, the job's drift_pct and max_extra_rounds),
// profile every signature there again as a new pass (collective over MPI_COMM_WORLD).
void remeasure_drifted(OpsRun& run) {
  const RoundPolicy& policy = run.options.job.rounds;
  bool traced = false;
  for (;;) {
    std::vector<int> todo;
    if (run.world_rank == 0) {
      print_drift(run, policy.drift_pct);
      for (int occupancy : occupancies_to_remeasure(run.reference, policy.drift_pct, policy.max_extra_rounds)) {
        if (occupancy <= run.world_size) {
          todo.push_back(occupancy);
        } else {
          std::printf("# occupancy %d drifted, but this job has %d ranks: start calibrate drift with %d to profile it again\n",
                      occupancy, run.world_size, occupancy);
        }
      }
    }
    int count = static_cast<int>(todo.size());
    MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (count == 0) break;
    todo.resize(static_cast<std::size_t>(count));
    MPI_Bcast(todo.data(), count, MPI_INT, 0, MPI_COMM_WORLD);
    if (!traced) {
      trace_all_stages(run);
      check_same_signatures(run.unique_ops);
      traced = true;
    }
    for (int occupancy : todo) {
      int pass = 0;
      if (run.world_rank == 0) pass = ops_passes(run.reference, occupancy).back() + 1;
      MPI_Bcast(&pass, 1, MPI_INT, 0, MPI_COMM_WORLD);
      run.pass = pass;
      if (run.world_rank == 0) {
        std::printf("# occupancy %d drifted more than %.1f%% from the ground truth's state: profiling it again (pass %d)\n",
                    occupancy, policy.drift_pct, pass);
      }
      profile_occupancy(run, occupancy);
    }
  }
  if (run.world_rank == 0) {
    std::printf("# predictions use, per occupancy, the profiling pass whose speed reference is nearest the ground truth's\n");
    std::fflush(stdout);
  }
}

std::vector<std::string> request_keys(const StagePlan& stages) {
  std::vector<std::string> keys;
  for (const StageRequest& request : stages.requests) keys.push_back(request.key);
  return keys;
}

}  // namespace

OpsCalibrationSummary calibrate_ops(const OpsCalibrationOptions& options) {
  const auto started = Clock::now();
  const Job& job = options.job;
  int world_rank = 0;
  int world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  set_compute_threads(job.compute_threads);  // LibTorch's pool and OpenBLAS's
  const torch::Device device = job.backend == Backend::kCuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  if (job.backend == Backend::kCuda && !torch::cuda::is_available()) {
    throw CollectiveUserError(
        "job " + job.path +
        " asks for backend cuda, but this LibTorch has no CUDA device; use a CUDA build of LibTorch on a GPU node");
  }
  const AttentionKernel attention = resolve_attention(job.attention);  // the same on every rank

  // 1. The stages to trace and the occupancies; 2. open the store and learn what is there.
  OpsRun run{options, world_rank, world_size, device, attention, plan_stages(job, world_size), {}, {}, {}, {}, 0, {}};
  run.plan = open_resume_plan(StoreTarget{options.output_path, options.force, options.resume, options.provenance},
                              request_keys(run.stages), existing_stage_keys, [&](h5::Store& store) {
                                read_stored_ops(store, run.stored);
                                if (world_rank == 0) run.reference = read_reference_samples(store);
                                stamp_recipe(store, attention);
                                store.set_meta(store::meta_key::kOpsJob, job.path);
                                // per rank, for rank slots
                                store.set_meta(store::meta_key::kOpsComputeThreads, static_cast<int64_t>(job.compute_threads));
                              });
  run.summary.stages_present = run.plan.present_count();
  if (world_rank == 0) print_start(run);

  if (options.remeasure_drifted) {
    remeasure_drifted(run);
  } else {
    // 3. Trace every stage; 4. profile, per occupancy, the signatures not yet timed at it.
    trace_all_stages(run);
    check_same_signatures(run.unique_ops);
    for (int occupancy : run.stages.occupancies) profile_occupancy(run, occupancy);
  }

  OpsCalibrationSummary& summary = run.summary;
  summary.elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  if (world_rank == 0) {
    std::printf(
        "# %zu stages traced (%zu present), %zu distinct signatures, %zu timings measured (%zu present), %zu not replayable; "
        "%.1f s; %zu timed under outside load\n",
        summary.stages_traced, summary.stages_present, summary.signatures, summary.timings_measured, summary.timings_present,
        summary.replay_failures, summary.elapsed_s, summary.timings_disturbed);
  }
  return summary;
}

}  // namespace itertime::calibrate
