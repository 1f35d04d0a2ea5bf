// framework_predictor.cpp: a Megatron-Core + Transformer Engine iteration from its stage records
// (megatron_te_stage.hpp), the GPU's published kernel figures and the described communication
// (framework_predictor.hpp).
// Invariants:
//  - A GEMM takes the longer of its time at the measured throughput and its bytes (A, B, C) at the
//    achieved bandwidth (the unfused attention's score GEMMs are memory-bound).
//  - A kernel's time: GEMM and attention at their figures' throughput over the sustained clock fraction
//    (the difference is the clock line), memory-bound kernels at the achieved bandwidth; each scaled by
//    the fitted terms (1 unless fitted).
//  - A pass's time = its kernels' times + each collective's exposed part + the contention it causes. A
//    collective of time c beside a kernel of time k (NCCL, its own SMs): the kernel runs f = 1 + slowdown
//    times slower while they overlap, so the pair ends at c when c >= k f (exposed c - k f, contention
//    k (f - 1)), else at k + c (1 - 1/f) (contention c (1 - 1/f), nothing exposed). Beside a GEMM under
//    TP comm overlap (TE userbuffers, tp_overlap_sms of the SMs for the whole GEMM): the GEMM takes
//    k' = k (1 + u), u = sm / (sm - tp_overlap_sms) - 1 (contention k u), and the pipelined form
//    max(c, k') - k' + min(c, k') / tp is exposed (the first of tp chunks cannot overlap). With neutral
//    conditions both reduce to max(0, c - k) and max(c, k) - k + min(c, k) / tp.
//  - Groups as Megatron-Core orders ranks (tp fastest, then cp, dp, pp: parallel_state's default order
//    "tp-cp-ep-dp-pp"): TP consecutive, CP stride tp, DP stride tp*cp (gradients over dp*cp, stride tp),
//    PP stride tp*cp*dp; placements by device/described_comm.hpp place_group.
//  - The pipeline is the schedule simulation (schedule/schedule.hpp) with transfers of [s/(cp*tp) with SP,
//    b, h] activations: blocking on the sender with vp 1 (Megatron's 1F1B without interleaving waits for
//    its batched send/recv: schedules.py forward_backward_pipelining_without_interleaving,
//    send_forward_recv_backward; NeMo sets batch_p2p_comm there), overlapped with vp > 1 (the interleaved
//    schedule with overlap_p2p_comm, NeMo's MegatronCommOverlapCallback). Blocking sends are the pp line.
//  - Per pipeline rank after its timeline: the exposed part of the DP gradient reduction (bucketed, each
//    bucket started when the backward that finishes it ends: the rank's last backward with vp 1, each
//    chunk's own last backward with vp > 1, one bucket after another on one communicator; without
//    overlap one reduction of everything after the timeline), the optimizer's kernels, and the parameter
//    all-gather of the distributed optimizer (exposed, or with overlapped gather the wait of the next
//    step's first forward, schedule.hpp exposed_parameter_gather_us). The compute beside the overlapped
//    part of the reduction and the gather is slowed as above (contention).
//  - Every rank then meets the others at the gradient-norm all-reduce before the optimizer step
//    (megatron/core/optimizer/clip_grads.py get_grad_norm_fp32, over all model-parallel and data-parallel
//    ranks, and its .item() on the host): the step resumes at the latest rank's arrival + one small
//    all-reduce over every GPU (the sync line: that wait and the all-reduce). After it, each rank's tail.
//  - Host: a rank's host issues kernels_on_rank x host_us_per_kernel of CPU time per iteration; where that
//    exceeds the rank's timeline the GPU waits for the difference, and after each host synchronization
//    (the gradient norm, the loss) the GPU waits for the first kernel to be issued again (the host line).
//  - The step waits for the slowest of its GPUs: the critical rank's kernels (compute, clock, contention)
//    times TrainingConditions::straggler_slowdown(GPUs of the job) (the straggler line).
//  - The iteration is the latest rank's end, plus the straggler line.
#include "predict/framework/framework_predictor.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "common/errors.hpp"
#include "predict/framework/megatron_layout_rules.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/framework/megatron_te_stage.hpp"
#include "predict/schedule/schedule.hpp"

namespace itertime::predict::framework {
OverlapCost overlap_beside_compute(double comm_us, double kernel_us, double slowdown) {
  const double f = 1.0 + slowdown;
  if (comm_us >= kernel_us * f) return {comm_us - kernel_us * f, kernel_us * (f - 1.0)};
  return {0.0, comm_us * (1.0 - 1.0 / f)};
}

namespace {

// Collective times on the described fabric, memoized per (collective, group, bytes).
class CommTimer {
 public:
  CommTimer(const FrameworkTarget& target, const ParallelConfig& config) : target_(target), config_(config) {
    gpus_per_node_ = target.hardware.gpus_per_node.value_or(8);
  }

  double time_us(Collective collective, CommGroup group, int64_t bytes) {
    if (bytes <= 0) return 0.0;
    const auto key = std::make_tuple(static_cast<int>(collective), static_cast<int>(group), bytes);
    const auto found = cache_.find(key);
    if (found != cache_.end()) return found->second;
    const GroupPlacement placement = placement_of(collective, group);
    double time = 0.0;
    if (placement.group_size > 1 || is_point_to_point(collective)) {
      const std::optional<DescribedCommTime> described =
          described_comm_us(target_.hardware, collective, placement, bytes, target_.tuning);
      if (!described) {
        throw UserError("the description " + target_.hardware.name + " cannot time " + to_string(collective) + " of " +
                        std::to_string(bytes) + " bytes over " + std::to_string(placement.group_size) + " GPUs");
      }
      time = described->time_us * target_.terms.comm_time_scale;
    }
    cache_.emplace(key, time);
    return time;
  }

 private:
  GroupPlacement placement_of(Collective collective, CommGroup group) const {
    const int tp = config_.tp, cp = config_.cp, dp = config_.dp;
    int64_t size = 1, stride = 1;
    switch (group) {
      case CommGroup::kTensor: size = tp, stride = 1; break;
      case CommGroup::kContext: size = cp, stride = tp; break;
      case CommGroup::kData: size = static_cast<int64_t>(dp) * cp, stride = tp; break;
      case CommGroup::kPipeline: size = config_.pp, stride = static_cast<int64_t>(tp) * cp * dp; break;
      case CommGroup::kModel: size = static_cast<int64_t>(tp) * cp * dp, stride = 1; break;
    }
    if (is_point_to_point(collective)) {
      // A neighbour exchange: within a node unless the group's members sit on different nodes.
      const GroupPlacement whole = place_group(std::max<int64_t>(size, 2), stride, gpus_per_node_);
      return GroupPlacement{2, whole.ranks_per_node >= std::max<int64_t>(size, 2) ? 2 : 1};
    }
    return place_group(size, stride, gpus_per_node_);
  }

  const FrameworkTarget& target_;
  const ParallelConfig& config_;
  int64_t gpus_per_node_ = 8;
  std::map<std::tuple<int, int, int64_t>, double> cache_;
};

struct PassTime {
  double compute_us = 0, clock_us = 0, contention_us = 0, tp_us = 0, cp_us = 0, other_us = 0;
  int64_t kernels = 0;
  double total_us() const { return compute_us + clock_us + contention_us + tp_us + cp_us + other_us; }
  double kernels_us() const { return compute_us + clock_us + contention_us; }  // what a slower GPU stretches
  PassTime& operator+=(const PassTime& o) {
    compute_us += o.compute_us, clock_us += o.clock_us, contention_us += o.contention_us;
    tp_us += o.tp_us, cp_us += o.cp_us, other_us += o.other_us, kernels += o.kernels;
    return *this;
  }
  PassTime scaled(double k) const {
    PassTime out = *this;
    out.compute_us *= k, out.clock_us *= k, out.contention_us *= k, out.tp_us *= k, out.cp_us *= k, out.other_us *= k;
    out.kernels = static_cast<int64_t>(std::llround(static_cast<double>(kernels) * k));
    return out;
  }
};

// One kernel's time: at the figures' own conditions (`ideal_us`) and under training (`actual_us` >=
// ideal when the clock fraction <= 1), both scaled by the fitted terms.
struct KernelTime {
  double ideal_us = 0, actual_us = 0;
};

KernelTime kernel_time(const FrameworkTarget& target, const Kernel& kernel) {
  const GpuKernelFigures& figures = target.kernels;
  const FrameworkTerms& terms = target.terms;
  const double clock = target.conditions.sustained_clock_fraction;
  switch (kernel.kind) {
    case KernelKind::kGemm: {  // the measured throughput, or its bytes at the achieved bandwidth if longer
      const double scale = kernel.dtype == ComputeDType::kFp8 ? terms.gemm8_time_scale : terms.gemm16_time_scale;
      const double math = figures.gemm_time_us(kernel.dtype, kernel.gemm) * scale;
      const double bytes = figures.memory_bound_time_us(kernel.gemm_bytes) * terms.memory_time_scale;
      return {std::max(math, bytes), std::max(math / clock, bytes)};
    }
    case KernelKind::kAttention: {
      const double t = figures.attention_time_us(ComputeDType::kBf16, kernel.attention, kernel.attention_backward) *
                       terms.attention_time_scale;
      return {t, t / clock};
    }
    case KernelKind::kMemoryBound: {
      const double t = figures.memory_bound_time_us(kernel.bytes) * terms.memory_time_scale;
      return {t, t};
    }
  }
  return {};
}

double overlap_slowdown(const FrameworkTarget& target) {
  return target.terms.overlap_compute_slowdown >= 0 ? target.terms.overlap_compute_slowdown
                                                    : target.conditions.overlap_compute_slowdown;
}

double host_us_per_kernel(const FrameworkTarget& target) {
  return target.terms.host_us_per_kernel >= 0 ? target.terms.host_us_per_kernel : target.conditions.host_us_per_kernel;
}

// The contention of `overlapped_us` of communication that ran entirely beside compute (the DP reduction
// and the parameter gather beside the passes): the compute's loss over that time, c (1 - 1/f).
double contention_beside(double overlapped_us, double slowdown) { return overlapped_us * (1.0 - 1.0 / (1.0 + slowdown)); }

PassTime time_pass(const PassWork& pass, const FrameworkTarget& target, CommTimer& comms, const ParallelConfig& config,
                   bool tp_comm_overlap) {
  PassTime out;
  std::vector<double> kernel_us;
  kernel_us.reserve(pass.kernels.size());
  for (const Kernel& kernel : pass.kernels) {
    const KernelTime time = kernel_time(target, kernel);
    kernel_us.push_back(time.actual_us);
    out.compute_us += time.ideal_us;
    out.clock_us += time.actual_us - time.ideal_us;
  }
  out.kernels = static_cast<int64_t>(pass.kernels.size());
  const double slowdown = overlap_slowdown(target);
  const double userbuffers = target.conditions.userbuffers_slowdown();
  for (const Comm& comm : pass.comms) {
    const double comm_us = comms.time_us(comm.collective, comm.group, comm.bytes) * static_cast<double>(comm.repeats);
    double exposed = comm_us;
    if (comm.hidden_behind >= 0 && (!comm.needs_tp_comm_overlap || tp_comm_overlap)) {
      const double beside = kernel_us.at(static_cast<size_t>(comm.hidden_behind));
      if (comm.needs_tp_comm_overlap) {
        const double slowed = beside * (1.0 + userbuffers);
        out.contention_us += slowed - beside;
        exposed = std::max(comm_us, slowed) - slowed + std::min(comm_us, slowed) / static_cast<double>(config.tp);
      } else {
        const OverlapCost pair = overlap_beside_compute(comm_us, beside, slowdown);
        out.contention_us += pair.contention_us;
        exposed = pair.exposed_us;
      }
    }
    if (comm.group == CommGroup::kContext) {
      out.cp_us += exposed;
    } else if (comm.group == CommGroup::kTensor) {
      out.tp_us += exposed;
    } else {
      out.other_us += exposed;
    }
  }
  return out;
}

struct VirtualStage {
  PassTime forward, backward;  // one micro-batch
  int64_t params = 0;
  double gathered_bytes = 0;  // the distributed optimizer's parameter all-gather (bf16; fp8 GEMM weights with fp8_param_gather)
  int layers = 0;
};

// Bucketed collectives one after another on one communicator, each ready at its instant: how far the
// last ends past `free_us`.
double exposed_after(std::vector<std::pair<double, double>> ready_and_time, double free_us) {
  std::sort(ready_and_time.begin(), ready_and_time.end());
  double end = -1e300;
  for (const auto& [ready, time] : ready_and_time) end = std::max(end, ready) + time;
  return ready_and_time.empty() ? 0.0 : std::max(0.0, end - free_us);
}

}  // namespace

// The per-pass times of one stage build (framework_predictor.hpp, FrameworkPassCache).
struct FrameworkPassCache::Entry {
  PassTime layer_fwd, layer_bwd, emb_fwd, emb_bwd, head_fwd, head_bwd, weight_casts;
  PassWork stage_forward;  // timed per candidate: its amax all-reduce spans dp
  int64_t layer_params = 0, layer_gemm_weights = 0, embedding_params = 0, head_params = 0, sequence_tokens = 0;
};

FrameworkPassCache::FrameworkPassCache() = default;
FrameworkPassCache::~FrameworkPassCache() = default;

const FrameworkPassCache::Entry* FrameworkPassCache::find(const std::string& key) const {
  const auto found = entries_.find(key);
  return found == entries_.end() ? nullptr : found->second.get();
}

const FrameworkPassCache::Entry& FrameworkPassCache::put(const std::string& key, std::unique_ptr<Entry> entry) {
  return *(entries_[key] = std::move(entry));
}

namespace {

// What the per-pass times depend on (not dp, pp or vp), as text: the hardware and shape, then the numbers.
std::string pass_key(const FrameworkTarget& target, const TransformerShape& shape, const ParallelConfig& c,
                     const FrameworkRecipe& r) {
  const TrainingTechniques& t = r.techniques;
  const int64_t fields[] = {shape.hidden,
                            shape.layers,
                            c.tp,
                            c.cp,
                            c.micro_batch,
                            c.seq_len,
                            static_cast<int>(r.precision),
                            static_cast<int>(r.fp8_recipe),
                            r.fp8_param_gather,
                            t.sequence_parallel,
                            static_cast<int>(t.recompute),
                            r.tp_comm_overlap,
                            r.unfused_attention,
                            r.dropout,
                            r.gradient_accumulation_fusion};
  std::string key = target.hardware.name + "/" + shape.name + "/";
  key.append(reinterpret_cast<const char*>(fields), sizeof(fields));
  return key;
}

std::unique_ptr<FrameworkPassCache::Entry> time_stage_passes(const FrameworkTarget& target, const TransformerShape& shape,
                                                             const ParallelConfig& config, const FrameworkRecipe& recipe,
                                                             CommTimer& comms) {
  const MegatronTeStage stage = build_megatron_te_stage(shape, config, recipe);
  const bool overlap = recipe.tp_comm_overlap;
  auto entry = std::make_unique<FrameworkPassCache::Entry>();
  entry->layer_fwd = time_pass(stage.layer_forward, target, comms, config, overlap);
  entry->layer_bwd = time_pass(stage.layer_backward, target, comms, config, overlap);
  entry->emb_fwd = time_pass(stage.embedding_forward, target, comms, config, overlap);
  entry->emb_bwd = time_pass(stage.embedding_backward, target, comms, config, overlap);
  entry->head_fwd = time_pass(stage.head_forward, target, comms, config, overlap);
  entry->head_bwd = time_pass(stage.head_backward, target, comms, config, overlap);
  entry->weight_casts = time_pass(stage.first_micro_batch, target, comms, config, overlap);
  entry->stage_forward = stage.stage_forward;
  entry->layer_params = stage.layer_params;
  entry->layer_gemm_weights = stage.layer_gemm_weights;
  entry->embedding_params = stage.embedding_params;
  entry->head_params = stage.head_params;
  entry->sequence_tokens = stage.sequence_tokens;
  return entry;
}

// From the cache when it has them, else timed (and kept there when there is a cache). `owned` holds them
// without a cache.
const FrameworkPassCache::Entry& stage_passes(const FrameworkTarget& target, const TransformerShape& shape,
                                              const ParallelConfig& config, const FrameworkRecipe& recipe, CommTimer& comms,
                                              FrameworkPassCache* cache, std::unique_ptr<FrameworkPassCache::Entry>& owned) {
  if (cache == nullptr) {
    owned = time_stage_passes(target, shape, config, recipe, comms);
    return *owned;
  }
  const std::string key = pass_key(target, shape, config, recipe);
  if (const FrameworkPassCache::Entry* found = cache->find(key)) return *found;
  return cache->put(key, time_stage_passes(target, shape, config, recipe, comms));
}

}  // namespace

namespace {

// The virtual stages of a layout: each one's passes of one micro-batch, parameters, layers and the bytes
// its distributed optimizer gathers (bf16; fp8 GEMM weights with fp8_param_gather).
std::vector<VirtualStage> virtual_stages(const FrameworkPassCache::Entry& stage, const PassTime& stage_fwd,
                                         const std::vector<VirtualStageLayers>& layers, const FrameworkRecipe& recipe) {
  const int virtual_count = static_cast<int>(layers.size());
  std::vector<VirtualStage> stages(static_cast<size_t>(virtual_count));
  for (int j = 0; j < virtual_count; ++j) {
    VirtualStage& vs = stages[static_cast<size_t>(j)];
    vs.layers = static_cast<int>(layers[static_cast<size_t>(j)].num_layers);
    vs.forward = stage.layer_fwd.scaled(vs.layers);
    vs.forward += stage_fwd;
    vs.backward = stage.layer_bwd.scaled(vs.layers);
    vs.params = stage.layer_params * vs.layers;
    if (j == 0) vs.forward += stage.emb_fwd, vs.backward += stage.emb_bwd, vs.params += stage.embedding_params;
    if (j == virtual_count - 1) vs.forward += stage.head_fwd, vs.backward += stage.head_bwd, vs.params += stage.head_params;
    const bool fp8_weights = recipe.precision == PrecisionName::kFp8 && recipe.fp8_param_gather;
    vs.gathered_bytes =
        2.0 * static_cast<double>(vs.params) - (fp8_weights ? static_cast<double>(stage.layer_gemm_weights * vs.layers) : 0.0);
  }
  return stages;
}

// One pipeline rank after its timeline: its arrival at the gradient-norm synchronization, and what follows it.
struct RankEnd {
  double arrival_us = 0;  // timeline end + exposed reduction + contention beside the reduction
  double dp_exposed_us = 0, gather_exposed_us = 0;
  double contention_us = 0;         // beside the reduction (before the arrival)
  double gather_contention_us = 0;  // beside the overlapped parameter gather (the next step's first forwards)
  PassTime tail;
  int64_t kernels = 0;
};

// What every rank's end is computed from.
struct RankContext {
  const FrameworkTarget& target;
  const ParallelConfig& config;
  const FrameworkRecipe& recipe;
  const TrainingTechniques& techniques;
  const std::vector<VirtualStage>& stages;
  const ScheduleResult& schedule;
  const PassTime& weight_casts;
  CommTimer& comms;
};

// The distributed optimizer's parameter gather on a rank, its buckets in `gathers`: all exposed, or with
// overlapped gather what the next first forward (of first_forward_us) waits for, and the contention of
// the part that ran beside it. Nothing without buckets.
void gather_exposure(std::vector<BucketGather> gathers, bool overlapped, double first_forward_us, double slowdown,
                     RankEnd& rank) {
  if (gathers.empty()) return;
  double gather_total = 0.0;
  for (const BucketGather& g : gathers) gather_total += g.time_us;
  if (!overlapped) {
    rank.gather_exposed_us = gather_total;
    return;
  }
  std::sort(gathers.begin(), gathers.end(),
            [](const BucketGather& a, const BucketGather& b) { return a.before_fraction < b.before_fraction; });
  rank.gather_exposed_us = exposed_parameter_gather_us(gathers, 0.0, 0.0, first_forward_us);
  const double gather_overlapped = std::max(0.0, gather_total - rank.gather_exposed_us);
  rank.gather_contention_us = contention_beside(gather_overlapped, slowdown);
}

// Rank r's exposed DP reduction (bucketed, each bucket ready when the backward that finishes it ends), the
// contention beside the overlapped part, its tail, and its parameter gather (exposed, or waited for by the
// next first forward with overlapped gather, and its contention).
RankEnd rank_end(const RankContext& x, int r) {
  const ParallelConfig& config = x.config;
  const TrainingTechniques& techniques = x.techniques;
  const std::vector<VirtualStage>& stages = x.stages;
  const ScheduleResult& schedule = x.schedule;
  CommTimer& comms = x.comms;
  const int pp = config.pp, v = config.vp, m = config.num_micro_batches();
  const int reduction_ranks = config.reduction_ranks();
  const int64_t bucket_params = megatron_bucket_params(reduction_ranks);
  const bool dopt = techniques.distributed_optimizer;
  const double slowdown = overlap_slowdown(x.target);
  RankEnd rank;
  // This rank's chunks: virtual stages c*pp + r.
  std::vector<std::pair<double, double>> reductions;  // (ready instant, time)
  std::vector<BucketGather> gathers;
  int64_t rank_params = 0;
  int rank_layers = 0;
  for (int c = 0; c < v; ++c) rank_params += stages[static_cast<size_t>(c * pp + r)].params;
  for (int c = 0; c < v; ++c) rank_layers += stages[static_cast<size_t>(c * pp + r)].layers;
  const double timeline_end = schedule.end_us[static_cast<size_t>(r)];
  double reduction_total = 0.0;
  if (reduction_ranks > 1) {
    const Collective reduce = dopt ? Collective::kReduceScatter : Collective::kAllReduce;
    double params_before = 0.0;
    for (int c = 0; c < v; ++c) {
      const VirtualStage& vs = stages[static_cast<size_t>(c * pp + r)];
      const int64_t buckets =
          techniques.overlap_gradient_reduction ? std::max<int64_t>(1, (vs.params + bucket_params - 1) / bucket_params) : 1;
      // The chunk's last backward (micro-batch m-1): with vp 1 the rank's last backward.
      const double start = schedule.chunk_last_backward_start_us[static_cast<size_t>(r)][static_cast<size_t>(c)];
      const double end = schedule.chunk_last_backward_end_us[static_cast<size_t>(r)][static_cast<size_t>(c)];
      const double bytes_per_param = vs.gathered_bytes / static_cast<double>(std::max<int64_t>(1, vs.params));
      // Every bucket but the last holds bucket_params: their collectives' times are the same.
      const auto reduce_us = [&](int64_t params) { return comms.time_us(reduce, CommGroup::kData, params * 4); };
      const auto gather_us = [&](int64_t params) {
        return comms.time_us(Collective::kAllGather, CommGroup::kData,
                             static_cast<int64_t>(static_cast<double>(params) * bytes_per_param));
      };
      const double full_reduce_us = buckets > 1 ? reduce_us(bucket_params) : 0.0;
      const double full_gather_us = buckets > 1 && dopt ? gather_us(bucket_params) : 0.0;
      for (int64_t b = 0; b < buckets; ++b) {
        const bool last = b + 1 == buckets;
        const int64_t params = last ? vs.params - bucket_params * (buckets - 1) : bucket_params;
        const double time = last ? reduce_us(params) : full_reduce_us;
        const double ready = techniques.overlap_gradient_reduction
                                 ? start + (end - start) * static_cast<double>(b + 1) / static_cast<double>(buckets)
                                 : timeline_end;
        reductions.emplace_back(ready, time);
        reduction_total += time;
        if (dopt) {
          const double gather = last ? gather_us(params) : full_gather_us;
          gathers.push_back(BucketGather{params_before / static_cast<double>(std::max<int64_t>(1, rank_params)), gather});
        }
        params_before += static_cast<double>(params);
      }
    }
    rank.dp_exposed_us = exposed_after(std::move(reductions), timeline_end);
  }
  // The part of the reduction that ran beside the backward slowed it (contention), by how much of it overlapped.
  const double reduction_overlapped = std::max(0.0, reduction_total - rank.dp_exposed_us);
  rank.contention_us = contention_beside(reduction_overlapped, slowdown);
  rank.arrival_us = timeline_end + rank.dp_exposed_us + rank.contention_us;
  rank.tail = time_pass(optimizer_step_work(rank_params, config, x.recipe), x.target, comms, config, x.recipe.tp_comm_overlap);
  rank.tail += x.weight_casts.scaled(rank_layers);
  gather_exposure(std::move(gathers), techniques.overlap_parameter_gather, stages[static_cast<size_t>(r)].forward.total_us(),
                  slowdown, rank);
  PassTime passes_of_rank;
  for (int c = 0; c < v; ++c) {
    const VirtualStage& vs = stages[static_cast<size_t>(c * pp + r)];
    passes_of_rank += vs.forward.scaled(m);
    passes_of_rank += vs.backward.scaled(m);
  }
  rank.kernels = passes_of_rank.kernels + rank.tail.kernels;
  return rank;
}

// Which figures a prediction used and what it assumes.
std::vector<std::string> framework_notes(const FrameworkTarget& target, const TransformerShape& shape,
                                         const ParallelConfig& config, const FrameworkRecipe& recipe) {
  const int pp = config.pp, v = config.vp;
  std::vector<std::string> notes;
  notes.push_back("framework megatron-te: kernels from " + target.kernels.summary());
  const PipelineSplit split = resolve_pipeline_split(shape.layers, pp, v, recipe.pipeline_split);
  if (split.uneven()) {
    notes.push_back("layers split as Megatron-LM's " + pipeline_split_options(split) +
                    " (the first / last virtual stage builds fewer layers)");
  }
  notes.push_back(target.conditions.summary());
  if (!target.terms_source.empty()) notes.push_back("fitted terms from " + target.terms_source);
  notes.push_back("communication from the description " + target.hardware.name + " (NCCL cost model); " +
                  (target.conditions.is_neutral() ? std::string("overlap assumed free of contention")
                                                  : "compute beside overlapped communication slowed (contention)") +
                  (pp == 1  ? ""
                   : v == 1 ? "; 1F1B's pipeline sends block the sender (pp line)"
                            : "; pipeline transfers overlapped (inside the bubble)"));
  return notes;
}

}  // namespace

// Long because it is one walk through the step in its order (the stages, the schedule, each rank's
// end, the gradient-norm sync and the host, the critical rank's breakdown), whose parts are the functions
// above; split further it would pass a dozen intermediate figures between pieces that mean nothing alone.
FrameworkOutcome predict_framework(const FrameworkTarget& target, const FrameworkRequest& request, FrameworkPassCache* cache) {
  const TransformerShape& shape = request.shape;
  const ParallelConfig& config = request.config;
  const FrameworkRecipe& recipe = request.recipe;
  FrameworkOutcome outcome;
  const std::vector<std::string> violations = framework_violations(shape, config, recipe);  // megatron_layout_rules.hpp
  if (!violations.empty()) {
    outcome.reason = "illegal layout " + config.to_string() + " for " + shape.name + ": " + violations.front();
    return outcome;
  }
  try {
    CommTimer comms(target, config);
    const bool overlap = recipe.tp_comm_overlap;
    std::unique_ptr<FrameworkPassCache::Entry> owned;
    const FrameworkPassCache::Entry& stage = stage_passes(target, shape, config, recipe, comms, cache, owned);
    const PassTime stage_fwd = time_pass(stage.stage_forward, target, comms, config, overlap);

    const int pp = config.pp, v = config.vp, m = config.num_micro_batches();
    const int virtual_count = pp * v;
    // Megatron's split of the one rule set (the recipe's pipeline_split resolved: the stage that holds an
    // accounted embedding or loss builds one layer fewer), as the memory model splits them.
    const std::vector<VirtualStageLayers> layers = megatron_virtual_stage_layers(shape.layers, pp, v, recipe.pipeline_split);
    const std::vector<VirtualStage> stages = virtual_stages(stage, stage_fwd, layers, recipe);
    ScheduleInput input;
    input.num_micro_batches = m;
    input.virtual_stages = v;
    input.blocking_send = v == 1;  // see the invariants: 1F1B waits for its sends, the interleaved schedule overlaps them
    for (const VirtualStage& vs : stages)
      input.stages.push_back(StageTimes{vs.forward.total_us(), vs.backward.total_us(), 0.0, 0.0});
    const double act_bytes = 2.0;
    const int64_t p2p_bytes = static_cast<int64_t>(static_cast<double>(stage.sequence_tokens * shape.hidden) * act_bytes);
    const double p2p_us = comms.time_us(Collective::kSendRecv, CommGroup::kPipeline, pp > 1 ? p2p_bytes : 0);
    input.p2p_forward_us.assign(static_cast<size_t>(virtual_count - 1), p2p_us);
    input.p2p_backward_us.assign(static_cast<size_t>(virtual_count - 1), p2p_us);
    const TrainingTechniques techniques = at_dp(recipe.techniques, config.reduction_ranks());
    ScheduleResult uncached;
    const ScheduleResult& schedule = cache != nullptr ? cache->schedules().simulate(input) : (uncached = simulate_1f1b(input));

    const RankContext context{target, config, recipe, techniques, stages, schedule, stage.weight_casts, comms};
    std::vector<RankEnd> ranks;
    for (int r = 0; r < pp; ++r) ranks.push_back(rank_end(context, r));
    // The gradient-norm synchronization: every rank waits for the latest, then one small all-reduce over
    // every GPU (dp*cp*tp in one group, then across pp), then each rank's tail.
    double latest_arrival = 0.0;
    for (const RankEnd& rank : ranks) latest_arrival = std::max(latest_arrival, rank.arrival_us);
    const double norm_allreduce_us = comms.time_us(Collective::kAllReduce, CommGroup::kModel, 8) +
                                     comms.time_us(Collective::kAllReduce, CommGroup::kPipeline, pp > 1 ? 8 : 0);
    const double per_kernel_host_us = host_us_per_kernel(target);
    constexpr int kHostSyncs = 2;  // the gradient norm's and the loss's .item(): the GPU waits for the next kernel's issue
    double iteration_us = 0.0;
    int busiest = 0;
    std::vector<double> rank_host_us(static_cast<size_t>(pp));
    for (int r = 0; r < pp; ++r) {
      const RankEnd& rank = ranks[static_cast<size_t>(r)];
      const double device_end =
          latest_arrival + norm_allreduce_us + rank.tail.total_us() + rank.gather_exposed_us + rank.gather_contention_us;
      const double host_issue_us = static_cast<double>(rank.kernels) * per_kernel_host_us;
      const double host_us = std::max(0.0, host_issue_us - device_end) + kHostSyncs * per_kernel_host_us;
      rank_host_us[static_cast<size_t>(r)] = host_us;
      const double end = device_end + host_us;
      if (end > iteration_us) iteration_us = end, busiest = r;
    }

    FrameworkPrediction p;
    p.peak_memory_bytes = megatron_te_peak_memory_bytes(shape, config, recipe);
    PassTime passes;
    for (int c = 0; c < v; ++c) {
      const VirtualStage& vs = stages[static_cast<size_t>(c * pp + busiest)];
      passes += vs.forward.scaled(m);
      passes += vs.backward.scaled(m);
    }
    const RankEnd& critical = ranks[static_cast<size_t>(busiest)];
    const PassTime& tail = critical.tail;
    // The parts of the rank that ends last, adding up to total_us: its passes (their kernels at the
    // figures' clock, the clock and contention lines, exposed TP / CP and other communication), its blocking
    // sends, its idle time up to its timeline's end, its exposed DP reduction and gather (and the contention
    // beside them), its wait at the synchronization, its host wait, its tail, and the straggler line.
    p.critical_rank = busiest;
    p.compute_us = passes.compute_us;
    p.clock_us = passes.clock_us + tail.clock_us;
    p.contention_us = passes.contention_us + tail.contention_us + critical.contention_us + critical.gather_contention_us;
    p.tp_comm_us = passes.tp_us;
    p.cp_comm_us = passes.cp_us;
    p.pp_comm_us = schedule.send_us.empty() ? 0.0 : schedule.send_us[static_cast<size_t>(busiest)];
    p.bubble_us = schedule.end_us[static_cast<size_t>(busiest)] - passes.total_us() - p.pp_comm_us;
    p.dp_comm_us = critical.dp_exposed_us + critical.gather_exposed_us + passes.other_us;
    p.sync_us = latest_arrival - critical.arrival_us + norm_allreduce_us;
    p.host_us = rank_host_us[static_cast<size_t>(busiest)];
    p.optimizer_us = tail.total_us() - tail.clock_us - tail.contention_us;
    // The slowest GPU: the critical rank's kernels stretched by the expected speed of the slowest of the job's GPUs.
    const int64_t gpus = static_cast<int64_t>(config.dp) * config.tp * config.pp * config.cp;
    p.straggler_us = (passes.kernels_us() + tail.kernels_us()) * target.conditions.straggler_slowdown(gpus);
    p.total_us = iteration_us + p.straggler_us;
    size_t slowest = 0;
    for (size_t j = 0; j < stages.size(); ++j) {
      if (stages[j].forward.total_us() + stages[j].backward.total_us() >
          stages[slowest].forward.total_us() + stages[slowest].backward.total_us()) {
        slowest = j;
      }
    }
    p.stage_forward_us = stages[slowest].forward.total_us();
    p.stage_backward_us = stages[slowest].backward.total_us();
    p.kernel_launches = critical.kernels;
    p.model_flops_per_iteration =
        shape.training_flops_per_token(config.seq_len) * static_cast<double>(config.global_batch) * config.seq_len;
    p.notes = framework_notes(target, shape, config, recipe);
    outcome.prediction = p;
  } catch (const UserError& error) {
    outcome.reason = error.what();
  }
  return outcome;
}

}  // namespace itertime::predict::framework
