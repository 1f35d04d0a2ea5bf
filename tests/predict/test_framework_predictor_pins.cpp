// test_framework_predictor_pins.cpp: predict_framework (predict/framework/framework_predictor.hpp) pinned
// part by part on small layouts before its timing model changes (issue 45), with figures derived by hand
// from docs/framework.md's formulas, never printed from today's output.
// Method: a synthetic "roofline GPU" whose kernel figures make every kernel time a one-line formula
// (GEMM: max(flops / F, bytes / BW) + launch; attention: FlashAttention FLOPs, x2.5 backward, / A +
// launch; memory-bound: bytes / BW + launch), on the h100-sxm description's fabric (8 GPUs a node; each
// collective timed by described_comm_us on a placement written out by hand for the layout). The
// evaluator below (`Reference`) writes out the predictor's documented formulas; each test then compares
// one layout's prediction with it, breakdown line by breakdown line.
// Invariants checked:
//  - A pass = its kernels + each collective's exposed part: whole; beside a kernel max(0, c - k); beside
//    a GEMM under --tp-comm-overlap max(c, k) - k + min(c, k) / tp (both regimes c > k and c < k occur);
//    TP collectives in tp_comm, CP in cp_comm, the rest (fp8 amax over dp*cp*tp) in dp_comm.
//  - Groups: TP consecutive, CP stride tp, DP (dp*cp) stride tp, PP stride tp*cp*dp, placed on 8-GPU nodes.
//  - DP buckets of max(40M, 1M x dp*cp) parameters, each ready at its share of the last backward, reduced
//    one after another; without overlap one reduction of everything after the timeline.
//  - The distributed optimizer's gather: every bucket's all-gather added after the step, or with
//    overlapped gather the wait of the next first forward (exposed_parameter_gather_us's rule).
//  - Pipeline: 1F1B with non-blocking transfers of [s/(cp*tp), b, h] bf16; pp_comm reports 0 (transfers
//    inside the bubble).
//  - Properties: overlap never slower than no overlap; a slower link never faster; each technique's cost
//    in its own breakdown line; the breakdown adds up to the total.
//  - The stage's bytes: fp8 casts, fp8 sequence-parallel gathers, the CP output corrections.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/collective.hpp"
#include "common/hardware_spec.hpp"
#include "predict/device/described_comm.hpp"
#include "predict/framework/framework_predictor.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/framework/megatron_te_stage.hpp"
#include "predict/framework_plan.hpp"
#include "predict/schedule/schedule.hpp"

namespace itertime::predict::framework {
namespace {

constexpr double kGemmBf16 = 400e12;   // FLOP/s of every bf16 / fp16 GEMM
constexpr double kGemmFp8 = 800e12;    // FLOP/s of every fp8 GEMM
constexpr double kAttention = 300e12;  // FLOP/s of fused attention (bf16), either pass
constexpr double kBandwidth = 2e12;    // bytes/s of memory-bound kernels
constexpr double kLaunch = 5.0;        // us per kernel
// A faster attention kernel, so that the context-parallel ring outlasts some of its steps.
constexpr double kFastAttention = 3e15;

// A GEMM lattice of one node: gemm_time_us = max(1e-30 s, flops / ceiling) + launch.
GpuKernelFigures::GemmLattice flat_lattice(double flops_per_s) {
  GpuKernelFigures::GemmLattice lattice;
  lattice.log_m = {0.0}, lattice.log_n = {0.0}, lattice.log_k = {0.0};
  lattice.log_time_s = {std::log(1e-30)};
  lattice.ceiling_flops_per_s = flops_per_s;
  return lattice;
}

GpuKernelFigures roofline_gpu(double attention = kAttention) {
  GpuKernelFigures f;
  f.gpu = "h100-sxm";
  f.path = "synthetic-roofline.json";
  f.summary_text = "synthetic roofline";
  f.launch_overhead_us = kLaunch;
  f.memory_bandwidth_bytes_per_s = kBandwidth;
  f.gemm_lattice[ComputeDType::kBf16] = flat_lattice(kGemmBf16);
  f.gemm_lattice[ComputeDType::kFp16] = flat_lattice(kGemmBf16);
  f.gemm_lattice[ComputeDType::kFp8] = flat_lattice(kGemmFp8);
  for (bool causal : {true, false}) {
    for (bool backward : {true, false}) {
      f.attention_curves[ComputeDType::kBf16].push_back({64, causal, backward, {0.0}, {attention}});
    }
  }
  f.attention_peak_flops_per_s[ComputeDType::kBf16] = attention;
  return f;
}

FrameworkTarget roofline_target(double attention = kAttention) {
  FrameworkTarget target;
  target.hardware = find_hardware_spec("h100-sxm");
  target.kernels = roofline_gpu(attention);
  return target;
}

// LLaMA-shaped, small: h 1024, 16 heads of 64, 8 KV heads (so that tp 8 is legal), ffn 2816, 8 layers,
// vocabulary 32000 (a multiple of 128, so unpadded at tp 1: 32000 / 128 = 250).
TransformerShape small_llama() {
  TransformerShape s;
  s.name = "pin-small";
  s.hidden = 1024, s.ffn = 2816, s.layers = 8, s.heads = 16, s.kv_heads = 8, s.head_dim = 64, s.vocab = 32000;
  return s;
}

ParallelConfig layout(int dp, int tp, int pp, int cp, int mbs, int gbs, int seq, int vp = 1) {
  ParallelConfig c{dp, tp, pp, mbs, gbs, seq};
  c.cp = cp;
  c.vp = vp;
  return c;
}

FrameworkRecipe recipe(const std::string& text, PrecisionName precision = PrecisionName::kAmpBf16) {
  FrameworkRecipe r;
  r.precision = precision;
  if (!text.empty()) r.techniques = parse_recipe_text(text);
  return r;
}

FrameworkPrediction predict_ok(const FrameworkTarget& target, const TransformerShape& shape, const ParallelConfig& config,
                               const FrameworkRecipe& r) {
  const FrameworkOutcome outcome = predict_framework(target, FrameworkRequest{shape, config, r});
  EXPECT_TRUE(outcome.ok()) << config.to_string() << ": " << outcome.reason;
  return outcome.prediction.value_or(FrameworkPrediction{});
}

double breakdown_sum(const FrameworkPrediction& p) {
  return p.compute_us + p.clock_us + p.contention_us + p.tp_comm_us + p.cp_comm_us + p.pp_comm_us + p.bubble_us + p.dp_comm_us +
         p.sync_us + p.host_us + p.optimizer_us + p.straggler_us;
}

// The roofline GPU's kernel times, from the formulas in this file's comment.
double kernel_us(const Kernel& k, double attention = kAttention) {
  switch (k.kind) {
    case KernelKind::kGemm: {
      const double rate = k.dtype == ComputeDType::kFp8 ? kGemmFp8 : kGemmBf16;
      return std::max(k.gemm.flops() / rate, k.gemm_bytes / kBandwidth) * 1e6 + kLaunch;
    }
    case KernelKind::kAttention:
      return k.attention.forward_flops() * (k.attention_backward ? 2.5 : 1.0) / attention * 1e6 + kLaunch;
    case KernelKind::kMemoryBound: return k.bytes > 0 ? k.bytes / kBandwidth * 1e6 + kLaunch : 0.0;
  }
  return 0.0;
}

struct Terms {
  double compute = 0, tp = 0, cp = 0, other = 0;
  int64_t kernels = 0;
  int comm_longer = 0, comm_shorter = 0;  // overlapped collectives longer / shorter than their kernel
  double total() const { return compute + tp + cp + other; }
};

// Placements written out by hand per layout (group size, members per 8-GPU node).
struct Placements {
  GroupPlacement tp{1, 1}, cp_p2p{2, 2}, dp{1, 1}, pp_p2p{2, 2}, model{1, 1};
};

struct Reference {
  HardwareSpec hw = find_hardware_spec("h100-sxm");
  Placements at;
  int tp = 1;
  double attention = kAttention;

  double collective_us(Collective c, GroupPlacement p, double bytes) const {
    if (bytes <= 0) return 0.0;
    if (p.group_size <= 1 && !is_point_to_point(c)) return 0.0;
    const auto t = described_comm_us(hw, c, p, static_cast<int64_t>(bytes));
    EXPECT_TRUE(t.has_value());
    return t ? t->time_us : 0.0;
  }
  double comm_us(const Comm& c) const {
    GroupPlacement p;
    switch (c.group) {
      case CommGroup::kTensor: p = at.tp; break;
      case CommGroup::kContext: p = at.cp_p2p; break;
      case CommGroup::kData: p = at.dp; break;
      case CommGroup::kPipeline: p = at.pp_p2p; break;
      case CommGroup::kModel: p = at.model; break;
    }
    return collective_us(c.collective, p, static_cast<double>(c.bytes)) * static_cast<double>(c.repeats);
  }
  Terms pass(const PassWork& work, bool tp_comm_overlap) const {
    Terms t;
    std::vector<double> k;
    for (const Kernel& kernel : work.kernels) {
      k.push_back(kernel_us(kernel, attention));
      t.compute += k.back();
    }
    t.kernels = static_cast<int64_t>(work.kernels.size());
    for (const Comm& c : work.comms) {
      const double time = comm_us(c);
      double exposed = time;
      if (c.hidden_behind >= 0 && (!c.needs_tp_comm_overlap || tp_comm_overlap)) {
        const double g = k.at(static_cast<size_t>(c.hidden_behind));
        // TE's userbuffers: tp chunks, the first one's collective cannot overlap its GEMM.
        exposed = c.needs_tp_comm_overlap ? std::max(time, g) - g + std::min(time, g) / tp : std::max(0.0, time - g);
        (time > g ? t.comm_longer : t.comm_shorter) += 1;
      }
      (c.group == CommGroup::kTensor ? t.tp : c.group == CommGroup::kContext ? t.cp : t.other) += exposed;
    }
    return t;
  }
  // The optimizer step's three memory-bound kernels (zeroing all P fp32 gradients, the norm over the
  // shard, Adam on the shard: 30 B per parameter).
  double optimizer_us(double params, double shard) const {
    return (params * 4 / kBandwidth + shard * 4 / kBandwidth + shard * 30 / kBandwidth) * 1e6 + 3 * kLaunch;
  }
};

Terms operator*(const Terms& t, double k) {
  Terms out = t;
  out.compute *= k, out.tp *= k, out.cp *= k, out.other *= k;
  out.kernels = static_cast<int64_t>(std::llround(static_cast<double>(t.kernels) * k));
  return out;
}
Terms operator+(const Terms& a, const Terms& b) {
  Terms out = a;
  out.compute += b.compute, out.tp += b.tp, out.cp += b.cp, out.other += b.other, out.kernels += b.kernels;
  out.comm_longer += b.comm_longer, out.comm_shorter += b.comm_shorter;
  return out;
}

// One pipeline rank with every layer (pp 1, vp 1): forward and backward of one micro-batch.
struct OneRank {
  Terms forward, backward, casts;
};
OneRank one_rank(const Reference& ref, const MegatronTeStage& s, double layers, bool overlap) {
  OneRank r;
  r.forward = ref.pass(s.layer_forward, overlap) * layers + ref.pass(s.embedding_forward, overlap) +
              ref.pass(s.head_forward, overlap) + ref.pass(s.stage_forward, overlap);
  r.backward =
      ref.pass(s.layer_backward, overlap) * layers + ref.pass(s.embedding_backward, overlap) + ref.pass(s.head_backward, overlap);
  r.casts = ref.pass(s.first_micro_batch, overlap) * layers;
  return r;
}

// Two pipeline ranks (pp 2, vp 1, no TP overlap) of `layers` layers each, the first with the embedding and
// the second with the head: forward and backward of one micro-batch on each.
struct TwoRanks {
  Terms f0, b0, f1, b1;
};
TwoRanks two_ranks(const Reference& ref, const MegatronTeStage& s, double layers) {
  const Terms lf = ref.pass(s.layer_forward, false) * layers, lb = ref.pass(s.layer_backward, false) * layers;
  return {lf + ref.pass(s.embedding_forward, false), lb + ref.pass(s.embedding_backward, false),
          lf + ref.pass(s.head_forward, false), lb + ref.pass(s.head_backward, false)};
}
// Their 1F1B without interleaving over `micro_batches`, `p2p_us` a transfer either way: each send holds its
// sender (Megatron's send_forward_recv_backward waits).
ScheduleResult blocking_1f1b(const TwoRanks& t, double p2p_us, int micro_batches) {
  return simulate_1f1b({StageTimes{t.f0.total(), t.b0.total(), 0, 0}, StageTimes{t.f1.total(), t.b1.total(), 0, 0}}, p2p_us,
                       p2p_us, micro_batches, true);
}

// A sequence-parallel pipeline of small_llama on `c` (pp 2, 4 layers a stage, m = 4) on the roofline GPU,
// with the collectives placed as `at` says: the reference (at tp c.tp), the stage, its two ranks, the bytes
// of one activation transfer ([s/(cp*tp), b, h] bf16), its time over at.pp_p2p, the ranks' blocking 1F1B,
// and the predictor's answer.
struct SpPipeline {
  Reference ref;
  MegatronTeStage s;
  TwoRanks ranks;
  int64_t transfer_bytes = 0;
  double p2p = 0;
  ScheduleResult sched;
  FrameworkPrediction p;
};
SpPipeline sp_pipeline(const ParallelConfig& c, const Placements& at) {
  SpPipeline out;
  out.ref.tp = c.tp;
  out.ref.at = at;
  out.s = build_megatron_te_stage(small_llama(), c, recipe("sp"));
  out.ranks = two_ranks(out.ref, out.s, 4);
  out.transfer_bytes = out.s.sequence_tokens * 1024 * 2;
  out.p2p = out.ref.collective_us(Collective::kSendRecv, at.pp_p2p, static_cast<double>(out.transfer_bytes));
  out.sched = blocking_1f1b(out.ranks, out.p2p, 4);
  out.p = predict_ok(roofline_target(), small_llama(), c, recipe("sp"));
  return out;
}

// The gradient-norm all-reduce every rank meets at before the optimizer step (issue 46): 8 bytes over the
// tp x cp x dp ranks (stride 1), then across the pp ranks (stride tp x cp x dp), on 8-GPU nodes.
double norm_sync_us(const Reference& ref, const ParallelConfig& c) {
  const int64_t model = int64_t{c.tp} * c.cp * c.dp;
  return ref.collective_us(Collective::kAllReduce, place_group(model, 1, 8), 8) +
         (c.pp > 1 ? ref.collective_us(Collective::kAllReduce, place_group(c.pp, model, 8), 8) : 0.0);
}

void expect_near_rel(double actual, double expected, const std::string& what) {
  EXPECT_NEAR(actual, expected, 1e-9 * std::max(1.0, std::abs(expected))) << what;
}

// --- layouts on one GPU: every kernel, nothing else --------------------------------------------------

TEST(FrameworkPins, OneGpuIsItsKernelsMicroBatchAfterMicroBatchThenTheOptimizerStep) {
  const FrameworkTarget target = roofline_target();
  const TransformerShape shape = small_llama();
  const ParallelConfig c = layout(1, 1, 1, 1, 2, 6, 2048);  // m = 3
  const FrameworkRecipe r = recipe("");
  const FrameworkPrediction p = predict_ok(target, shape, c, r);
  const MegatronTeStage s = build_megatron_te_stage(shape, c, r);
  Reference ref;
  const OneRank one = one_rank(ref, s, 8, false);
  // Parameters: layer 11,798,528 (qkv (1024 + 2 x 512) x 1024 + proj 1024x1024 + fc1 5632x1024 + fc2
  // 1024x2816 = 11,796,480, + two norms of 1024) x 8 = 94,388,224; embedding 32000 x 1024 = 32,768,000;
  // output layer 32,768,000 + final norm 1024 = 32,769,024: P = 159,925,248.
  ASSERT_EQ(s.layer_params, 11'798'528);
  const double P = 159'925'248;
  const double timeline = 3 * (one.forward.total() + one.backward.total());
  const double tail = ref.optimizer_us(P, P);  // no distributed optimizer: the shard is everything
  expect_near_rel(p.total_us, timeline + tail, "total = m (F + B) + optimizer");
  expect_near_rel(p.compute_us, 3 * (one.forward.compute + one.backward.compute), "compute");
  EXPECT_EQ(p.tp_comm_us, 0.0);
  EXPECT_EQ(p.cp_comm_us, 0.0);
  EXPECT_EQ(p.pp_comm_us, 0.0);
  EXPECT_EQ(p.dp_comm_us, 0.0);
  EXPECT_NEAR(p.bubble_us, 0.0, 1e-9 * p.total_us);
  expect_near_rel(p.optimizer_us, tail, "optimizer");
  expect_near_rel(p.stage_forward_us, one.forward.total(), "stage forward");
  expect_near_rel(p.stage_backward_us, one.backward.total(), "stage backward");
  EXPECT_EQ(p.critical_rank, 0);
  // Kernels: m x (8 layers' forward and backward + embedding + head), + the step's 3.
  const int64_t per_micro_batch =
      8 * (static_cast<int64_t>(s.layer_forward.kernels.size()) + static_cast<int64_t>(s.layer_backward.kernels.size())) +
      static_cast<int64_t>(s.embedding_forward.kernels.size() + s.embedding_backward.kernels.size() +
                           s.head_forward.kernels.size() + s.head_backward.kernels.size());
  EXPECT_EQ(p.kernel_launches, 3 * per_micro_batch + 3);
  // PaLM's FLOPs per token x the batch's 6 x 2048 tokens.
  EXPECT_DOUBLE_EQ(p.model_flops_per_iteration, shape.training_flops_per_token(2048) * 6 * 2048);
  EXPECT_EQ(p.peak_memory_bytes, megatron_te_peak_memory_bytes(shape, c, r));
  expect_near_rel(breakdown_sum(p), p.total_us, "breakdown adds up");
}

TEST(FrameworkPins, AGemmTakesTheLongerOfItsFlopsAndItsBytes) {
  // The unfused attention's score GEMM (k = head_dim 64) is memory-bound on the roofline GPU: 2 m n k
  // FLOPs over (m k + k n + m n) x 2 bytes is below the ridge 400e12 / 2e12 = 200 FLOP/B. A predictor that
  // took the FLOPs alone would be faster than the reference by exactly the difference.
  const FrameworkTarget target = roofline_target();
  FrameworkRecipe r = recipe("", PrecisionName::kAmpFp16);
  r.unfused_attention = true;
  const ParallelConfig c = layout(1, 1, 1, 1, 1, 1, 1024);
  const MegatronTeStage s = build_megatron_te_stage(small_llama(), c, r);
  int memory_bound = 0;
  for (const Kernel& k : s.layer_forward.kernels) {
    if (k.kind == KernelKind::kGemm && k.gemm_bytes / kBandwidth > k.gemm.flops() / kGemmBf16) ++memory_bound;
  }
  EXPECT_GE(memory_bound, 2) << "scores_bmm and context_bmm are memory-bound";
  Reference ref;
  const OneRank one = one_rank(ref, s, 8, false);
  const FrameworkPrediction p = predict_ok(target, small_llama(), c, r);
  expect_near_rel(p.compute_us, one.forward.compute + one.backward.compute, "GEMMs at max(flops, bytes)");
}

// --- tensor parallelism: the overlap formulas -------------------------------------------------------

// tp 4 on one node: TP group {4, 4}. Each collective: exposed whole (forward SP collectives without
// --tp-comm-overlap), max(0, c - k) (backward re-gather / reduce-scatter beside the other GEMM), or
// max(c, k) - k + min(c, k) / 4 (pipelined with --tp-comm-overlap).
TEST(FrameworkPins, TensorParallelCollectivesAreExposedAsTheirOverlapFormulaSays) {
  const FrameworkTarget target = roofline_target();
  const TransformerShape shape = small_llama();
  const ParallelConfig c = layout(1, 4, 1, 1, 1, 2, 4096);  // m = 2
  Reference ref;
  ref.tp = 4;
  ref.at.tp = {4, 4};
  for (bool overlap : {false, true}) {
    FrameworkRecipe r = recipe("sp");
    r.tp_comm_overlap = overlap;
    const MegatronTeStage s = build_megatron_te_stage(shape, c, r);
    const OneRank one = one_rank(ref, s, 8, overlap);
    const FrameworkPrediction p = predict_ok(target, shape, c, r);
    const std::string what = overlap ? "with tp-comm-overlap" : "without";
    expect_near_rel(p.tp_comm_us, 2 * (one.forward.tp + one.backward.tp), "tp_comm " + what);
    expect_near_rel(p.compute_us, 2 * (one.forward.compute + one.backward.compute), "compute " + what);
    // Parameters per GPU: layer 11,796,480 / 4 + 2048 = 2,951,168 x 8 = 23,609,344; vocabulary padded to
    // 512 x ceil(32000 / 512) = 32,256, 8,064 rows a GPU: embedding 8,257,536, head 8,258,560.
    const double P = 23'609'344 + 8'257'536 + 8'258'560;
    expect_near_rel(p.total_us, 2 * (one.forward.total() + one.backward.total()) + norm_sync_us(ref, c) + ref.optimizer_us(P, P),
                    "total " + what);
    EXPECT_EQ(p.cp_comm_us, 0.0);
    EXPECT_EQ(p.dp_comm_us, 0.0);
    if (overlap) {
      // Both branches of max / min are exercised: some collectives outlast their GEMM, some do not.
      const Terms all = one.forward + one.backward;
      EXPECT_GT(all.comm_longer, 0);
      EXPECT_GT(all.comm_shorter, 0);
    }
  }
}

TEST(FrameworkPins, TpCommOverlapIsNeverSlowerAndHidesAtMostAllButAChunk) {
  const FrameworkTarget target = roofline_target();
  for (int tp : {2, 4, 8}) {
    for (int seq : {1024, 8192}) {
      const ParallelConfig c = layout(1, tp, 1, 1, 1, 2, seq);
      FrameworkRecipe r = recipe("sp");
      const FrameworkPrediction off = predict_ok(target, small_llama(), c, r);
      r.tp_comm_overlap = true;
      const FrameworkPrediction on = predict_ok(target, small_llama(), c, r);
      EXPECT_LE(on.tp_comm_us, off.tp_comm_us) << tp << " " << seq;
      EXPECT_LE(on.total_us, off.total_us) << tp << " " << seq;
      EXPECT_LT(on.tp_comm_us, off.tp_comm_us) << "the forward collectives hide partly, tp " << tp << " seq " << seq;
      EXPECT_GT(on.tp_comm_us, 0.0) << "the first chunk and what outlasts the GEMMs stay exposed";
      EXPECT_DOUBLE_EQ(on.compute_us, off.compute_us);
    }
  }
}

// --- context parallelism: the ring beside each attention step, the group's placement ----------------

// cp 2 with tp 4 (dp 1): the CP group's two members are tp = 4 ranks apart, both on one node: a ring
// exchange over NVLink {2, 2}. With tp 8 they are 8 apart, on two nodes: over the NICs {2, 1}.
TEST(FrameworkPins, ContextParallelRingIsExposedBesideEachStepOnTheGroupsNodes) {
  const FrameworkTarget target = roofline_target(kFastAttention);
  const TransformerShape shape = small_llama();
  for (int tp : {4, 8}) {
    const ParallelConfig c = layout(1, tp, 1, 2, 1, 2, 8192);
    const FrameworkRecipe r = recipe("sp");
    const MegatronTeStage s = build_megatron_te_stage(shape, c, r);
    Reference ref;
    ref.tp = tp;
    ref.at.tp = {tp, tp};
    ref.at.cp_p2p = tp == 4 ? GroupPlacement{2, 2} : GroupPlacement{2, 1};
    ref.attention = kFastAttention;
    const OneRank one = one_rank(ref, s, 8, false);
    const FrameworkPrediction p = predict_ok(target, shape, c, r);
    ASSERT_GT(one.forward.cp + one.backward.cp, 0.0) << "the ring outlasts some step at tp " << tp;
    expect_near_rel(p.cp_comm_us, 2 * (one.forward.cp + one.backward.cp), "cp_comm at tp " + std::to_string(tp));
    expect_near_rel(p.tp_comm_us, 2 * (one.forward.tp + one.backward.tp), "tp_comm at tp " + std::to_string(tp));
  }
  // Across nodes the same exchange is slower.
  const FrameworkPrediction near = predict_ok(target, shape, layout(1, 4, 1, 2, 1, 2, 8192), recipe("sp"));
  const FrameworkPrediction far = predict_ok(target, shape, layout(1, 8, 1, 2, 1, 2, 8192), recipe("sp"));
  EXPECT_GT(far.cp_comm_us, near.cp_comm_us);
}

// --- data parallelism: buckets, their instants, the group on nodes ----------------------------------

// dp 2 at tp 1: P = 159,925,248 parameters (above) in buckets of max(40M, 1M x 2) = 40,000,000: three of
// 40M and a last of 39,925,248. The DP group {2, 2} (strided by tp = 1, one node). The timeline of one
// rank is m (F + B) = T; the last backward runs from T - B to T and bucket b (0..3) is complete at
// T - B + B (b + 1) / 4; all-reduces of 4 bytes a parameter run one after another on one communicator.
TEST(FrameworkPins, OverlappedGradientBucketsAreReducedOneAfterAnotherFromTheirShareOfTheLastBackward) {
  const FrameworkTarget target = roofline_target();
  const TransformerShape shape = small_llama();
  const ParallelConfig c = layout(2, 1, 1, 1, 1, 4, 2048);  // m = 2
  Reference ref;
  ref.at.dp = {2, 2};
  const FrameworkRecipe ovl = recipe("ovl");
  const MegatronTeStage s = build_megatron_te_stage(shape, c, ovl);
  const OneRank one = one_rank(ref, s, 8, false);
  const double B = one.backward.total();
  const double T = 2 * (one.forward.total() + B);
  const double bucket[4] = {40'000'000, 40'000'000, 40'000'000, 39'925'248};
  double end = -1e300;
  for (int b = 0; b < 4; ++b) {
    const double ready = T - B + B * (b + 1) / 4.0;
    end = std::max(end, ready) + ref.collective_us(Collective::kAllReduce, ref.at.dp, bucket[b] * 4);
  }
  const double exposed = std::max(0.0, end - T);
  ASSERT_GT(exposed, 0.0) << "the last bucket's all-reduce ends after the timeline";
  const double P = 159'925'248;
  const FrameworkPrediction p = predict_ok(target, shape, c, ovl);
  expect_near_rel(p.dp_comm_us, exposed, "exposed bucketed reduction");
  expect_near_rel(p.total_us, T + exposed + norm_sync_us(ref, c) + ref.optimizer_us(P, P), "total with ovl");

  // Without overlap: one all-reduce of all 4 P bytes after the timeline, wholly exposed.
  const FrameworkPrediction plain = predict_ok(target, shape, c, recipe(""));
  const double whole = ref.collective_us(Collective::kAllReduce, ref.at.dp, P * 4);
  expect_near_rel(plain.dp_comm_us, whole, "one reduction after the timeline");
  expect_near_rel(plain.total_us, T + whole + norm_sync_us(ref, c) + ref.optimizer_us(P, P), "total without ovl");
  EXPECT_LT(p.total_us, plain.total_us);
}

// dp 4 at tp 4 (16 GPUs, 2 nodes): the DP group's members are tp = 4 apart, 2 a node: {4, 2}, across the
// NICs. Without overlap: one all-reduce of 4 P bytes, P per GPU = 40,125,440 (tp 4, above).
TEST(FrameworkPins, TheDataParallelGroupIsStridedByTpAcrossNodes) {
  const FrameworkTarget target = roofline_target();
  const ParallelConfig c = layout(4, 4, 1, 1, 1, 8, 2048);
  const FrameworkPrediction p = predict_ok(target, small_llama(), c, recipe("sp"));
  Reference ref;
  const double P = 23'609'344 + 8'257'536 + 8'258'560;
  const double spread = ref.collective_us(Collective::kAllReduce, GroupPlacement{4, 2}, P * 4);
  const double packed = ref.collective_us(Collective::kAllReduce, GroupPlacement{4, 4}, P * 4);
  ASSERT_NE(spread, packed);
  expect_near_rel(p.dp_comm_us, spread, "DP all-reduce over {4 ranks, 2 a node}");
  // With cp 2 the reduction spans dp x cp = 8 ranks, stride tp: {8, 2}.
  ParallelConfig cp2 = layout(4, 4, 1, 2, 1, 8, 2048);
  const FrameworkPrediction q = predict_ok(target, small_llama(), cp2, recipe("sp"));
  expect_near_rel(q.dp_comm_us, ref.collective_us(Collective::kAllReduce, GroupPlacement{8, 2}, P * 4),
                  "DP x CP all-reduce over {8 ranks, 2 a node}");
}

// The distributed optimizer (dp 2, tp 1): reduce-scatters instead of all-reduces, Adam on the shard
// ceil(P / 2) = 79,962,624, and the bf16 parameters all-gathered per bucket (2 bytes a parameter):
// without opg every bucket's all-gather after the step; with opg the next first forward's wait: the
// gathers run back to back from the step's end, bucket b's first parameter is needed at F0 x (the share of
// parameters before it), one wait shifting the later needs.
TEST(FrameworkPins, TheDistributedOptimizersGatherIsAddedOrWaitedFor) {
  const FrameworkTarget target = roofline_target();
  const TransformerShape shape = small_llama();
  const ParallelConfig c = layout(2, 1, 1, 1, 1, 4, 2048);
  Reference ref;
  ref.at.dp = {2, 2};
  const MegatronTeStage s = build_megatron_te_stage(shape, c, recipe("dopt+ovl"));
  const OneRank one = one_rank(ref, s, 8, false);
  const double F = one.forward.total(), B = one.backward.total();
  const double T = 2 * (F + B);
  const double P = 159'925'248, shard = 79'962'624;
  const double bucket[4] = {40'000'000, 40'000'000, 40'000'000, 39'925'248};
  double end = -1e300, gathers = 0;
  double gather[4];
  for (int b = 0; b < 4; ++b) {
    end = std::max(end, T - B + B * (b + 1) / 4.0) + ref.collective_us(Collective::kReduceScatter, ref.at.dp, bucket[b] * 4);
    gather[b] = ref.collective_us(Collective::kAllGather, ref.at.dp, bucket[b] * 2);
    gathers += gather[b];
  }
  const double reduction = std::max(0.0, end - T);
  const double tail = ref.optimizer_us(P, shard);

  const FrameworkPrediction added = predict_ok(target, shape, c, recipe("dopt+ovl"));
  expect_near_rel(added.dp_comm_us, reduction + gathers, "reduce-scatters exposed + every all-gather");
  expect_near_rel(added.optimizer_us, tail, "Adam on the shard");
  expect_near_rel(added.total_us, T + reduction + norm_sync_us(ref, c) + tail + gathers, "total, gather after the step");

  double chain = 0, wait = 0;
  for (int b = 0; b < 4; ++b) {
    chain += gather[b];
    const double before = 40'000'000.0 * b / P;
    wait += std::max(0.0, chain - (wait + F * before));
  }
  ASSERT_LT(wait, gathers);
  const FrameworkPrediction waited = predict_ok(target, shape, c, recipe("dopt+ovl+opg"));
  expect_near_rel(waited.dp_comm_us, reduction + wait, "the first forward's wait for the gathers");
  expect_near_rel(waited.total_us, T + reduction + norm_sync_us(ref, c) + tail + wait, "total with opg");
  EXPECT_LT(waited.total_us, added.total_us);
}

// --fp8-param-gather: the decoder GEMM weights are gathered in fp8: 2 P - (GEMM weights of the layers)
// bytes in all, spread over the buckets at that mean per parameter.
TEST(FrameworkPins, Fp8ParametersAreGatheredInOneByte) {
  const FrameworkTarget target = roofline_target();
  const TransformerShape shape = small_llama();
  const ParallelConfig c = layout(2, 1, 1, 1, 1, 4, 2048);
  FrameworkRecipe r = recipe("dopt", PrecisionName::kFp8);
  const FrameworkPrediction bf16_params = predict_ok(target, shape, c, r);
  r.fp8_param_gather = true;
  const FrameworkPrediction fp8_params = predict_ok(target, shape, c, r);
  Reference ref;
  ref.at.dp = {2, 2};
  ref.at.model = {2, 2};  // the fp8 amax all-reduce over dp x cp x tp = 2
  const double P = 159'925'248, gemm_weights = 8.0 * 11'796'480;
  // Without overlap: one reduce-scatter of 4 P bytes, one all-gather of the whole rank's bytes.
  const double rs = ref.collective_us(Collective::kReduceScatter, ref.at.dp, P * 4);
  const double per_param = (2 * P - gemm_weights) / P;
  const double ag = ref.collective_us(Collective::kAllGather, ref.at.dp, std::floor(P * per_param));
  const MegatronTeStage s = build_megatron_te_stage(shape, c, r);
  const double amax = 2 * ref.pass(s.stage_forward, false).other;  // m = 2 forwards
  ASSERT_GT(amax, 0.0);
  expect_near_rel(fp8_params.dp_comm_us, rs + ag + amax, "fp8 gather + reduce-scatter + amax all-reduces");
  EXPECT_LT(fp8_params.dp_comm_us, bf16_params.dp_comm_us);
  // The tail: Adam on the shard and the weights' fp8 transposes (2 B a GEMM weight, per layer).
  expect_near_rel(fp8_params.optimizer_us, ref.optimizer_us(P, 79'962'624) + 8 * ((2 * 11'796'480) / kBandwidth * 1e6 + kLaunch),
                  "fp8 tail");
}

// --- the pipeline ----------------------------------------------------------------------------------

// pp 2, tp 2 (SP), dp 1, mbs 1, seq 2048, m = 4: 4 layers a stage; the transfers carry [2048 / 2 = 1024
// tokens, 1024 hidden] x 2 bytes = 2,097,152 bytes between ranks tp x cp x dp = 2 apart (one node:
// {2, 2}), non-blocking, in the 1F1B simulation; each rank then runs its optimizer step.
TEST(FrameworkPins, PipelineStagesRun1F1BWithTheirTransfersAndEachRankItsOwnStep) {
  const ParallelConfig c = layout(1, 2, 2, 1, 1, 4, 2048);
  Placements at;
  at.tp = {2, 2};
  at.pp_p2p = {2, 2};
  const SpPipeline pipe = sp_pipeline(c, at);
  const auto& [ref, s, ranks, transfer_bytes, p2p, sched, p] = pipe;
  const auto& [f0, b0, f1, b1] = ranks;
  ASSERT_EQ(transfer_bytes, 2'097'152);
  ASSERT_GT(p2p, 0.0);
  // Per GPU: layer 11,796,480 / 2 + 2048 = 5,900,288; 4 layers 23,601,152; vocabulary padded to 256 x 125
  // = 32,000, 16,000 rows: embedding 16,384,000; head 16,384,000 + 1,024.
  const double P0 = 23'601'152 + 16'384'000, P1 = 23'601'152 + 16'385'024;
  // Both ranks meet at the gradient-norm all-reduce, at the later timeline's end; then each its step.
  const double latest = std::max(sched.end_us[0], sched.end_us[1]);
  const double norm = norm_sync_us(ref, c);
  const double end0 = latest + norm + ref.optimizer_us(P0, P0);
  const double end1 = latest + norm + ref.optimizer_us(P1, P1);
  expect_near_rel(p.total_us, std::max(end0, end1), "the later rank's end");
  const int critical = end1 > end0 ? 1 : 0;  // rank 1's step is longer (the head's 1,024 more parameters)
  EXPECT_EQ(p.critical_rank, critical);
  const Terms passes = critical == 0 ? (f0 + b0) * 4 : (f1 + b1) * 4;
  const size_t k = static_cast<size_t>(critical);
  expect_near_rel(p.compute_us, passes.compute, "compute of the critical rank");
  expect_near_rel(p.tp_comm_us, passes.tp, "tp of the critical rank");
  expect_near_rel(p.pp_comm_us, sched.send_us[k], "the critical rank's blocking sends");
  EXPECT_GT(p.pp_comm_us, 0.0) << "1F1B's sends hold the sender";
  expect_near_rel(p.bubble_us, sched.end_us[k] - passes.total() - sched.send_us[k], "bubble");
  expect_near_rel(p.sync_us, latest - sched.end_us[k] + norm, "the wait at the gradient norm and its all-reduce");
  EXPECT_GT(p.bubble_us + p.sync_us, 0.0);
  // The slowest virtual stage's passes.
  const bool last_slower = f1.total() + b1.total() > f0.total() + b0.total();
  expect_near_rel(p.stage_forward_us, last_slower ? f1.total() : f0.total(), "stage forward");
  // The last stage waits for the first one's forward and the transfer: longer than its own passes.
  EXPECT_GT(sched.end_us[1], 4 * (f1.total() + b1.total()));
}

// tp 4, cp 2, dp 1, pp 2 (16 GPUs): the pipeline's neighbours are tp x cp x dp = 8 ranks apart, on two nodes
// ({2, 1}: over the NICs), while the CP pair (4 apart) and the DP x CP pair (dp x cp = 2, stride 4) share a
// node ({2, 2}). mbs 1, seq 2048, m = 4: T = 2048 / 2 = 1024 tokens, SP: 256; transfers of 256 x 1024 x 2 =
// 524,288 bytes. Per GPU: layer 11,796,480 / 4 + 2048 = 2,951,168, 4 layers 11,804,672; embedding
// 8,257,536, head 8,258,560 (above). Each rank: its 1F1B end, one all-reduce of its 4 P bytes, its step.
TEST(FrameworkPins, PipelineNeighboursAreTpCpDpRanksApart) {
  const ParallelConfig c = layout(1, 4, 2, 2, 1, 4, 2048);
  Placements at;
  at.tp = {4, 4};
  at.cp_p2p = {2, 2};
  at.dp = {2, 2};
  at.pp_p2p = {2, 1};
  const SpPipeline pipe = sp_pipeline(c, at);
  const Reference& ref = pipe.ref;
  const ScheduleResult& sched = pipe.sched;
  ASSERT_EQ(pipe.transfer_bytes, 524'288);
  ASSERT_NE(pipe.p2p, ref.collective_us(Collective::kSendRecv, GroupPlacement{2, 2}, 524'288)) << "NICs, not NVLink";
  const double P0 = 11'804'672 + 8'257'536, P1 = 11'804'672 + 8'258'560;
  // Each rank's reduction after its timeline, then the gradient-norm sync at the later arrival, then its step.
  const double arrival0 = sched.end_us[0] + ref.collective_us(Collective::kAllReduce, ref.at.dp, P0 * 4);
  const double arrival1 = sched.end_us[1] + ref.collective_us(Collective::kAllReduce, ref.at.dp, P1 * 4);
  const double met = std::max(arrival0, arrival1) + norm_sync_us(ref, c);
  const double end0 = met + ref.optimizer_us(P0, P0);
  const double end1 = met + ref.optimizer_us(P1, P1);
  expect_near_rel(pipe.p.total_us, std::max(end0, end1), "the later rank's end with transfers across nodes");
  EXPECT_GT(pipe.p.cp_comm_us + pipe.p.tp_comm_us, 0.0);
}

// --- layout rules ----------------------------------------------------------------------------------

TEST(FrameworkPins, EachLayoutRuleRefusesJustPastItsBoundary) {
  TransformerShape s = small_llama();  // 16 heads, 4 KV heads here, ffn 2816, 8 layers
  s.kv_heads = 4;
  auto first = [&](const ParallelConfig& c) {
    const std::vector<std::string> v = layout_violations(s, c);
    return v.empty() ? std::string() : v.front();
  };
  EXPECT_EQ(first(layout(1, 4, 1, 1, 1, 1, 2048)), "");
  EXPECT_NE(first(layout(1, 8, 1, 1, 1, 1, 2048)).find("KV heads"), std::string::npos);  // 4 % 8: replicated
  TransformerShape odd_heads = s;
  odd_heads.heads = 12, odd_heads.kv_heads = 12;
  EXPECT_NE(layout_violations(odd_heads, layout(1, 8, 1, 1, 1, 1, 2048)).front().find("attention heads"), std::string::npos);
  TransformerShape odd_ffn = s;
  odd_ffn.ffn = 2818;                                                                // 2818 % 4 = 2
  EXPECT_EQ(layout_violations(odd_ffn, layout(1, 2, 1, 1, 1, 1, 2048)).size(), 0u);  // 2818 % 2 = 0
  EXPECT_NE(layout_violations(odd_ffn, layout(1, 4, 1, 1, 1, 1, 2048)).front().find("ffn-hidden-size"), std::string::npos);
  EXPECT_EQ(first(layout(1, 1, 4, 1, 1, 4, 2048, 2)), "");  // pp x vp = 8 layers
  EXPECT_NE(first(layout(1, 1, 4, 1, 1, 4, 2048, 3)).find("do not split into vp 3"), std::string::npos);
  EXPECT_NE(first(layout(2, 1, 1, 1, 2, 6, 2048)).find("global-batch-size"), std::string::npos);  // 6 % 4
  EXPECT_EQ(first(layout(2, 1, 1, 1, 2, 8, 2048)), "");
  EXPECT_EQ(first(layout(1, 1, 1, 2, 1, 1, 2048)), "");
  EXPECT_NE(first(layout(1, 1, 1, 2, 1, 1, 2046)).find("2 x --context-parallel-size"), std::string::npos);  // 2046 % 4
  EXPECT_EQ(first(layout(1, 2, 1, 1, 1, 1, 2046)), "");  // cp 1: no chunk rule; 2046 % 2 = 0
  // Without sequence parallelism Megatron splits no tokens over tp: 2046 at tp 4 is legal (the SP rule is
  // the recipe's, test_megatron_layout_rules.cpp).
  EXPECT_EQ(first(layout(1, 4, 1, 1, 1, 1, 2046)), "");
  EXPECT_NE(first(layout(1, 1, 1, 1, 1, 4, 2048, 2)).find("need --pipeline-model-parallel-size > 1"), std::string::npos);
  EXPECT_NE(first(layout(1, 1, 2, 1, 1, 3, 2048, 2)).find("multiple of pp"), std::string::npos);  // m = 3
  EXPECT_EQ(first(layout(1, 1, 2, 1, 1, 4, 2048, 2)), "");
  EXPECT_NE(first(layout(0, 1, 1, 1, 1, 1, 2048)).find(">= 1"), std::string::npos);
  // The predictor refuses with the rule, not a number.
  const FrameworkOutcome refused =
      predict_framework(roofline_target(), FrameworkRequest{s, layout(1, 8, 1, 1, 1, 1, 2048), recipe("")});
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.reason.find("illegal layout"), std::string::npos) << refused.reason;
}

// --- properties on the shipped figures -------------------------------------------------------------

struct Case {
  int dp, tp, pp, cp, vp, gbs;
  const char* recipe;
};
const Case kCases[] = {{2, 2, 1, 1, 1, 8, "sp"},       {4, 2, 2, 1, 1, 16, "sp+dopt"}, {2, 4, 2, 2, 2, 8, "sp"},
                       {8, 8, 1, 1, 1, 16, "sp+dopt"}, {2, 8, 2, 2, 1, 8, "sp+dopt"},  {4, 1, 1, 2, 1, 8, ""},
                       {16, 1, 1, 1, 1, 32, "dopt"},   {2, 2, 4, 1, 2, 16, "sp+dopt"}};

ParallelConfig config_of(const Case& k) { return layout(k.dp, k.tp, k.pp, k.cp, 1, k.gbs, 4096, k.vp); }

TEST(FrameworkPinsProperty, OverlapIsNeverSlowerThanNoOverlap) {
  const FrameworkTarget target = framework_target("h100-sxm");
  for (const Case& k : kCases) {
    const ParallelConfig c = config_of(k);
    const std::string base = k.recipe;
    const bool dopt = base.find("dopt") != std::string::npos;
    const FrameworkPrediction none = predict_ok(target, small_llama(), c, recipe(base));
    const FrameworkPrediction ovl = predict_ok(target, small_llama(), c, recipe(base.empty() ? "ovl" : base + "+ovl"));
    EXPECT_LE(ovl.total_us, none.total_us * (1 + 1e-12)) << c.to_string() << " " << base;
    EXPECT_LE(ovl.dp_comm_us, none.dp_comm_us * (1 + 1e-12)) << c.to_string() << " " << base;
    if (dopt) {
      const FrameworkPrediction opg = predict_ok(target, small_llama(), c, recipe(base + "+ovl+opg"));
      EXPECT_LE(opg.total_us, ovl.total_us * (1 + 1e-12)) << c.to_string();
    }
    if (k.tp > 1) {
      FrameworkRecipe r = recipe(base);
      r.tp_comm_overlap = true;
      const FrameworkPrediction tpo = predict_ok(target, small_llama(), c, r);
      EXPECT_LE(tpo.total_us, none.total_us * (1 + 1e-12)) << c.to_string();
    }
  }
}

TEST(FrameworkPinsProperty, SlowerLinksAreNeverFasterAndShowInTheirOwnLine) {
  const FrameworkTarget target = framework_target("h100-sxm");
  FrameworkTarget slow_nics = target, slow_nvlink = target;
  slow_nics.hardware.nic_bandwidth_bytes_per_s = *target.hardware.nic_bandwidth_bytes_per_s / 4;
  slow_nvlink.hardware.nvlink_bandwidth_bytes_per_s = *target.hardware.nvlink_bandwidth_bytes_per_s / 4;
  for (const Case& k : kCases) {
    const ParallelConfig c = config_of(k);
    const FrameworkRecipe r = recipe(k.recipe);
    const FrameworkPrediction base = predict_ok(target, small_llama(), c, r);
    const FrameworkPrediction nic = predict_ok(slow_nics, small_llama(), c, r);
    const FrameworkPrediction nvl = predict_ok(slow_nvlink, small_llama(), c, r);
    EXPECT_GE(nic.total_us, base.total_us * (1 - 1e-12)) << c.to_string();
    EXPECT_GE(nvl.total_us, base.total_us * (1 - 1e-12)) << c.to_string();
    if (k.pp == 1) {
      EXPECT_DOUBLE_EQ(nic.compute_us, base.compute_us) << c.to_string();
    }
    if (k.tp > 1) {
      EXPECT_GT(nvl.tp_comm_us, base.tp_comm_us) << "TP inside a node, " << c.to_string();
    }
    // A DP group that spans nodes (more than 8 / tp members) reduces over the NICs.
    if (k.dp * k.cp > 8 / k.tp) {
      EXPECT_GT(nic.dp_comm_us, base.dp_comm_us) << "DP across nodes, " << c.to_string();
    }
  }
}

TEST(FrameworkPinsProperty, EachTechniquesCostAppearsInItsOwnLine) {
  const FrameworkTarget target = framework_target("h100-sxm");
  const TransformerShape s = small_llama();
  const FrameworkPrediction one = predict_ok(target, s, layout(1, 1, 1, 1, 1, 4, 4096), recipe(""));
  EXPECT_EQ(one.tp_comm_us + one.cp_comm_us + one.dp_comm_us + one.pp_comm_us, 0.0);
  EXPECT_NEAR(one.bubble_us, 0.0, 1e-9 * one.total_us);
  const FrameworkPrediction tp = predict_ok(target, s, layout(1, 2, 1, 1, 1, 4, 4096), recipe("sp"));
  EXPECT_GT(tp.tp_comm_us, 0.0);
  EXPECT_EQ(tp.cp_comm_us + tp.dp_comm_us, 0.0);
  // The CP ring shows where it outlasts the attention steps: short sequences, the group across nodes (tp 8:
  // CP members 8 ranks apart); on one node at 4,096 tokens the shipped figures hide it wholly.
  const FrameworkPrediction cp = predict_ok(target, s, layout(1, 8, 1, 2, 1, 4, 1024), recipe("sp"));
  const FrameworkPrediction no_cp = predict_ok(target, s, layout(1, 8, 1, 1, 1, 4, 1024), recipe("sp"));
  EXPECT_GT(cp.cp_comm_us, 0.0);
  EXPECT_EQ(no_cp.cp_comm_us, 0.0);
  // cp 2 alone still reduces gradients over dp x cp = 2 ranks.
  EXPECT_GT(cp.dp_comm_us, 0.0);
  EXPECT_EQ(no_cp.dp_comm_us, 0.0);
  const FrameworkPrediction dp = predict_ok(target, s, layout(2, 1, 1, 1, 1, 4, 4096), recipe(""));
  EXPECT_GT(dp.dp_comm_us, 0.0);
  EXPECT_EQ(dp.tp_comm_us + dp.cp_comm_us, 0.0);
  const FrameworkPrediction pp = predict_ok(target, s, layout(1, 1, 2, 1, 1, 4, 4096), recipe(""));
  EXPECT_GT(pp.bubble_us, 0.0);
  EXPECT_EQ(pp.tp_comm_us + pp.cp_comm_us + pp.dp_comm_us, 0.0);
  // fp8: the weights' casts in the tail; full recompute: the forward again in compute.
  const FrameworkPrediction fp8 = predict_ok(target, s, layout(1, 1, 1, 1, 1, 4, 4096), recipe("", PrecisionName::kFp8));
  EXPECT_GT(fp8.optimizer_us, one.optimizer_us);
  const FrameworkPrediction full = predict_ok(target, s, layout(1, 1, 1, 1, 1, 4, 4096), recipe("rc-full"));
  EXPECT_GT(full.compute_us, one.compute_us);
  EXPECT_DOUBLE_EQ(full.optimizer_us, one.optimizer_us);
  for (const Case& k : kCases) {
    const FrameworkPrediction p = predict_ok(target, s, config_of(k), recipe(k.recipe));
    expect_near_rel(breakdown_sum(p), p.total_us, "breakdown adds up, " + config_of(k).to_string());
    EXPECT_GE(p.bubble_us, -1e-9 * p.total_us);
    EXPECT_GT(p.stage_forward_us, 0.0);
    EXPECT_GT(p.stage_backward_us, p.stage_forward_us) << "a backward is longer than its forward";
  }
}

TEST(FrameworkPinsProperty, ThePassCacheGivesTheSameFigures) {
  const FrameworkTarget target = framework_target("h100-sxm");
  FrameworkPassCache cache;
  for (const Case& k : kCases) {
    const FrameworkRequest request{small_llama(), config_of(k), recipe(k.recipe)};
    const FrameworkOutcome cold = predict_framework(target, request);
    const FrameworkOutcome warm1 = predict_framework(target, request, &cache);
    const FrameworkOutcome warm2 = predict_framework(target, request, &cache);
    ASSERT_TRUE(cold.ok() && warm1.ok() && warm2.ok());
    EXPECT_DOUBLE_EQ(warm2.prediction->total_us, cold.prediction->total_us);
    EXPECT_DOUBLE_EQ(warm1.prediction->total_us, cold.prediction->total_us);
  }
  // Recipes that differ only after the schedule (the distributed optimizer, overlapped reduction and
  // gather) share its simulation, and their figures are still their own.
  const int64_t simulations = cache.schedules().simulations();
  for (const Case& k : kCases) {
    for (int dp_switches = 0; dp_switches < 4; ++dp_switches) {
      FrameworkRequest request{small_llama(), config_of(k), recipe(k.recipe)};
      TrainingTechniques& t = request.recipe.techniques;
      t.distributed_optimizer = dp_switches != 0;
      t.overlap_gradient_reduction = dp_switches >= 2;
      t.overlap_parameter_gather = dp_switches == 3;
      const FrameworkOutcome cold = predict_framework(target, request);
      const FrameworkOutcome warm = predict_framework(target, request, &cache);
      ASSERT_EQ(cold.ok(), warm.ok()) << k.recipe << " " << dp_switches;
      if (!cold.ok()) continue;
      EXPECT_DOUBLE_EQ(warm.prediction->total_us, cold.prediction->total_us) << k.recipe << " " << dp_switches;
      EXPECT_DOUBLE_EQ(warm.prediction->dp_comm_us, cold.prediction->dp_comm_us) << k.recipe << " " << dp_switches;
      EXPECT_DOUBLE_EQ(warm.prediction->bubble_us, cold.prediction->bubble_us) << k.recipe << " " << dp_switches;
    }
  }
  EXPECT_LT(cache.schedules().simulations() - simulations, static_cast<int64_t>(std::size(kCases)) * 4)
      << "variants that change no pass time simulate their schedule once";
}

// --- the stage's bytes -------------------------------------------------------------------------------

// tp 2, mbs 2, seq 2048: T = 4096 tokens; per GPU q = 512, kv = max(64, 512 / 2) = 256, ffn 1408,
// fc1 2816, hidden 1024; SP: norms on T / 2 = 2048 tokens.
// The kernel or comm of a pass named `name` (null where there is none), and its bytes (a failure naming it,
// and -1, where there is none).
template <typename Item>
const Item* named(const std::vector<Item>& items, const std::string& name) {
  for (const Item& item : items) {
    if (item.name == name) return &item;
  }
  return nullptr;
}
template <typename Item>
auto bytes_named(const std::vector<Item>& items, const std::string& name) -> decltype(Item::bytes) {
  const Item* item = named(items, name);
  EXPECT_NE(item, nullptr) << name;
  return item ? item->bytes : -1;
}
const Kernel* kernel_named(const PassWork& pass, const std::string& name) { return named(pass.kernels, name); }
const Comm* comm_named(const PassWork& pass, const std::string& name) { return named(pass.comms, name); }

TEST(FrameworkPinsStage, Fp8CastsReadBf16AndWriteTheFp8TensorAndItsTranspose) {
  const ParallelConfig c = layout(1, 2, 1, 1, 2, 2, 2048);
  const MegatronTeStage s = build_megatron_te_stage(small_llama(), c, recipe("sp", PrecisionName::kFp8));
  auto bytes = [](const PassWork& pass, const std::string& name) { return bytes_named(pass.kernels, name); };
  // A cast of E elements: E x (2 read + 1 + 1 written).
  EXPECT_DOUBLE_EQ(bytes(s.layer_forward, "proj_input_cast"), 4096.0 * 512 * 4);
  EXPECT_DOUBLE_EQ(bytes(s.layer_forward, "fc2_input_cast"), 4096.0 * 1408 * 4);
  EXPECT_DOUBLE_EQ(bytes(s.layer_backward, "fc2_grad_cast"), 4096.0 * 1024 * 4);
  EXPECT_DOUBLE_EQ(bytes(s.layer_backward, "fc1_grad_cast"), 4096.0 * 2816 * 4);
  EXPECT_DOUBLE_EQ(bytes(s.layer_backward, "proj_grad_cast"), 4096.0 * 1024 * 4);
  EXPECT_DOUBLE_EQ(bytes(s.layer_backward, "qkv_grad_cast"), 4096.0 * (512 + 512) * 4);
  // The norms write fp8 (2 B read + 1 B written a token's element) on the 2048 sequence tokens.
  EXPECT_DOUBLE_EQ(bytes(s.layer_forward, "input_norm"), 2048.0 * 1024 * 3);
  EXPECT_DOUBLE_EQ(bytes(s.layer_forward, "pre_mlp_norm"), 2048.0 * 1024 * 3);
  // Weights once per iteration: (qkv 1024 + proj 512) x 1024 + fc1 2816 x 1024 + fc2 1024 x 1408 =
  // 5,898,240 weights, cast-transposed at 4 B each; with fp8 parameters only transposed, 2 B each.
  ASSERT_EQ(s.layer_gemm_weights, 5'898'240);
  EXPECT_DOUBLE_EQ(bytes(s.first_micro_batch, "fp8_weight_cast_transpose"), 5'898'240.0 * 4);
  FrameworkRecipe params = recipe("sp", PrecisionName::kFp8);
  params.fp8_param_gather = true;
  const MegatronTeStage p = build_megatron_te_stage(small_llama(), c, params);
  EXPECT_DOUBLE_EQ(bytes(p.first_micro_batch, "fp8_weight_transpose"), 5'898'240.0 * 2);
  // Delayed scaling: one amax all-reduce of 4 x 3 x 4 fp32 values over dp x cp x tp per stage forward.
  ASSERT_EQ(s.stage_forward.comms.size(), 1u);
  EXPECT_EQ(s.stage_forward.comms[0].bytes, 192);
  EXPECT_EQ(s.stage_forward.comms[0].group, CommGroup::kModel);
  // Current scaling: an amax pass (2 B an element) before every cast and fp8 norm output.
  FrameworkRecipe current = recipe("sp", PrecisionName::kFp8);
  current.fp8_recipe = Fp8Recipe::kCurrent;
  const MegatronTeStage cur = build_megatron_te_stage(small_llama(), c, current);
  EXPECT_DOUBLE_EQ(bytes(cur.layer_forward, "proj_input_cast_amax"), 4096.0 * 512 * 2);
  EXPECT_DOUBLE_EQ(bytes(cur.layer_forward, "input_norm_amax"), 2048.0 * 1024 * 2);
  EXPECT_DOUBLE_EQ(bytes(cur.layer_backward, "fc1_grad_cast_amax"), 4096.0 * 2816 * 2);
  // bf16: no cast, norms write bf16.
  const MegatronTeStage b = build_megatron_te_stage(small_llama(), c, recipe("sp"));
  EXPECT_EQ(kernel_named(b.layer_forward, "proj_input_cast"), nullptr);
  EXPECT_DOUBLE_EQ(bytes(b.layer_forward, "input_norm"), 2048.0 * 1024 * 4);
}

TEST(FrameworkPinsStage, SequenceParallelGathersAreFp8WhereTheGemmIsAndBf16Elsewhere) {
  const ParallelConfig c = layout(1, 2, 1, 1, 2, 2, 2048);
  const MegatronTeStage s = build_megatron_te_stage(small_llama(), c, recipe("sp", PrecisionName::kFp8));
  auto bytes = [](const PassWork& pass, const std::string& name) { return bytes_named(pass.comms, name); };
  // [T = 4096, h = 1024]: 1 B under fp8 (the cast tensor gathered), 2 B in bf16.
  EXPECT_EQ(bytes(s.layer_forward, "sp_all_gather_qkv_input"), 4096 * 1024);
  EXPECT_EQ(bytes(s.layer_forward, "sp_all_gather_fc1_input"), 4096 * 1024);
  EXPECT_EQ(bytes(s.layer_forward, "sp_reduce_scatter_proj"), 4096 * 1024 * 2);
  EXPECT_EQ(bytes(s.layer_backward, "qkv_sp_regather_input"), 4096 * 1024);
  EXPECT_EQ(bytes(s.layer_backward, "qkv_sp_reduce_scatter_dgrad"), 4096 * 1024 * 2);
  EXPECT_EQ(bytes(s.layer_backward, "fc2_sp_all_gather_grad"), 4096 * 1024 * 2);
  EXPECT_EQ(bytes(s.head_forward, "sp_all_gather_output_input"), 4096 * 1024 * 2) << "the output layer stays bf16";
  EXPECT_EQ(bytes(s.head_backward, "output_sp_regather_input"), 4096 * 1024 * 2);
  const MegatronTeStage b = build_megatron_te_stage(small_llama(), c, recipe("sp"));
  EXPECT_EQ(bytes(b.layer_forward, "sp_all_gather_qkv_input"), 4096 * 1024 * 2);
  // Current scaling adds a 4-byte amax all-reduce over TP for each input gathered in fp8.
  FrameworkRecipe current = recipe("sp", PrecisionName::kFp8);
  current.fp8_recipe = Fp8Recipe::kCurrent;
  const MegatronTeStage cur = build_megatron_te_stage(small_llama(), c, current);
  EXPECT_EQ(bytes(cur.layer_forward, "sp_all_gather_qkv_input_amax"), 4);
  EXPECT_EQ(bytes(cur.layer_forward, "sp_all_gather_fc1_input_amax"), 4);
  EXPECT_EQ(comm_named(cur.head_forward, "sp_all_gather_output_input_amax"), nullptr);
  // Without SP: all-reduces of the bf16 [T, h] output after each row-parallel GEMM.
  const MegatronTeStage plain = build_megatron_te_stage(small_llama(), c, recipe("", PrecisionName::kFp8));
  EXPECT_EQ(bytes(plain.layer_forward, "sp_reduce_scatter_proj"), 4096 * 1024 * 2);
  EXPECT_EQ(comm_named(plain.layer_forward, "sp_all_gather_qkv_input"), nullptr);
}

TEST(FrameworkPinsStage, ContextParallelOutputIsCorrectedAfterEachLaterStep) {
  // cp 4, tp 1, mbs 2, seq 2048: T = 2 x 512 = 1024 tokens a GPU, q = 1024: each correction reads the
  // step's bf16 output and reads and writes the fp32 one: T q (2 + 8) bytes, after steps 1..3.
  const ParallelConfig c = layout(1, 1, 1, 4, 2, 2, 2048);
  const MegatronTeStage s = build_megatron_te_stage(small_llama(), c, recipe(""));
  int corrections = 0;
  for (const Kernel& k : s.layer_forward.kernels) {
    if (k.name == "fused_attention_cp_out_correction") {
      ++corrections;
      EXPECT_DOUBLE_EQ(k.bytes, 1024.0 * 1024 * 10);
    }
  }
  EXPECT_EQ(corrections, 3);
  int backward_corrections = 0;
  for (const Kernel& k : s.layer_backward.kernels) backward_corrections += k.name.find("out_correction") != std::string::npos;
  EXPECT_EQ(backward_corrections, 0) << "the backward ring corrects nothing";
  // Selective recompute reruns the forward ring in the backward, corrections included.
  const MegatronTeStage rc = build_megatron_te_stage(small_llama(), c, recipe("rc-sel"));
  int rerun = 0;
  for (const Kernel& k : rc.layer_backward.kernels) rerun += k.name == "fused_attention_recompute_cp_out_correction";
  EXPECT_EQ(rerun, 3);
  // Each exchange: K and V blocks of [T = 1024, kv 512] bf16 = 2,097,152 bytes forward, twice backward.
  for (const Comm& comm : s.layer_forward.comms) EXPECT_EQ(comm.bytes, 1024 * 512 * 2 * 2) << comm.name;
  for (const Comm& comm : s.layer_backward.comms) EXPECT_EQ(comm.bytes, 2 * 1024 * 512 * 2 * 2) << comm.name;
}

}  // namespace
}  // namespace itertime::predict::framework
