// Memory model against measurement: every rank trains its stage for two steps under a TensorMemoryProbe
// (exact tensor bytes from LibTorch's allocator reports) and compares what it holds with
// predict::memory_per_gpu for its stage, for every (DP,TP,PP) factorization of the world and fp32, bf16
// and amp-bf16 (and, below, techniques, interleaved and context-parallel layouts). Three kinds of check
// per rank:
//  - The deterministic terms, EXACTLY (no band): each is allocated in a known window of the trainer's
//    life (calibrate/trainer.cpp; expected_windows below), and the live bytes the probe sees at the
//    window's ends equal the sum of the model terms allocated in it: after construction, the weights,
//    the rotary tables, the distributed optimizer's buffers (its padded gradient buffer without buckets)
//    and the buckets' buffer (overlapped reduction at dp*cp > 1: the gradients); the first step adds the
//    gradients (not the buckets' views), AdamW's moments and the plain DP flat buffer; the second step
//    drops the gradients at its start (the probe's low during it) and ends where the first ended. On CPU
//    LibTorch reports the bytes asked for, unrounded, so equality holds to the byte (941 per-rank checks
//    at 1, 2 and 4 ranks on LibTorch 1.13 when written); a dropped or doubled term that is not zero for
//    the layout changes one window's sum and fails. (A CUDA run would see the caching allocator's
//    512-byte rounding: these checks run on CPU only.)
//  - The activations in a band (activation_lower_end, kActivationUpper): the second step's peak above
//    what the first step left, over the larger of the model's activations and AdamW workspace.
//  - The whole peak over both steps in the older band on the total: the model leaves out one operator's
//    transient tensors (gradient chains of the loss and of attention), so the measured peak sits above
//    it, by 1-23% on these shapes when written (tp 4 the most: the transients are not all sharded); with
//    m <= pp - stage the model is an upper bound (gradients are still being allocated while the
//    activations peak), measured 1.3% below it at pp 4 on LibTorch 1.13 and 6-7% below it on 2.6 under
//    autocast (stage 0 of pp 4). The band is [0.95, 1.30] ([0.90, 1.30] where the model is such an upper
//    bound; 0.85 with interleaving, upper_bound_lower_end). It alone does NOT catch a dropped or doubled
//    term (issue 31; measured at 4 ranks on 1.13 with the model patched: the gradients term removed,
//    651 of 736 per-rank checks still pass it and 10 of 25 recipe x precision groups see no failure;
//    doubled, 307 pass, pure bf16 everywhere; the rotary tables or the DP flat buffer removed, or the
//    optimizer state doubled, 736, 736 and 85 pass; the exact checks fail on every rank where the term
//    is not zero: 736, 736, 736, 444 of 444 and 736).
// With LibTorch 2.x the fp16 policies and the sdpa attention kernel are checked too.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/tensor_memory.hpp"
#include "calibrate/trainer.hpp"
#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "predict/memory/memory_model.hpp"
#include "tests/torch/torch_features.hpp"

namespace itertime::calibrate {
namespace {

// Whether the model's peak is an upper bound for `stage` of the layout: with v 1, m <= pp - stage (the
// gradients are still being allocated while the activations peak). With v > 1, m == pp: the warm-up runs
// every forward, and the first backwards (of the last chunk, micro-batches 0..pp-1) free much of the
// activations before the other chunks' first backward allocates their gradients, which the model counts
// at the peak all the same. (With m >= 2*pp every chunk's first backward falls in the steady phase, where
// the in-flight count stays at its peak.)
bool model_is_upper_bound(const ParallelConfig& config, int stage) {
  if (config.vp == 1) return config.num_micro_batches() <= config.pp - stage;
  return config.num_micro_batches() == config.pp;
}

// The band's lower end where the model is an upper bound: 0.90, and 0.85 with v > 1, where the gradients
// counted early can be a whole chunk's (pp 4, v 2, m 4, full recompute, last rank: 0.889 amp-bf16, 0.914
// fp32; chunk 0's gradients, one layer's 0.74 MB, are 6.6% of the model's 11.2 MB there).
double upper_bound_lower_end(const ParallelConfig& config) { return config.vp > 1 ? 0.85 : 0.90; }

// The activation band: the measured activations (see check_layout) over the model's. Measured on LibTorch
// 1.13 when written (941 per-rank checks at 1, 2 and 4 ranks): 0.887-1.474 where the model is exact at the
// peak, 0.799-1.134 where it is an upper bound. Above 1: the transients the model leaves out, the loss
// backward's chain the most (1.11 MB at every precision and tp here, about 4.25 times the [b*s, V] fp32
// logits, so 1.47 over the smallest activations, bf16 at tp 4); below 1: the upper bound, and full
// recompute under autocast (its rerun layer's weight copies, 0.887). Doubling the activation term gives
// at most 1.474 / 2 = 0.74, under either lower end; dropping it divides by the workspace or by zero.
// LibTorch 2.x's autocast holds fewer low-precision copies than the model counts (the total measured
// 0.941 at the last stage of tp 2 pp 2 with full recompute on 2.6, about 0.80 of its activations, not
// measured here): its lower ends are 0.10 lower, which still fails a doubled term (autocast at most 1.32
// on 1.13).
double activation_lower_end(PrecisionName precision, bool upper_bound) {
  const double lower = upper_bound ? 0.75 : 0.85;
  return precision_policy(precision).autocast && has_sdpa() ? lower - 0.10 : lower;
}
constexpr double kActivationUpper = 1.50;

// What a rank's probe saw over its trainer's life: live tensor bytes (exact on CPU: LibTorch's CPU
// allocator reports the bytes asked for, no rounding) at these moments.
struct MeasuredMemory {
  int64_t constructed = 0;        // after the trainer's construction
  int64_t after_first_step = 0;   // after step 0
  int64_t second_step_low = 0;    // lowest during step 1: its start, the gradients dropped
  int64_t second_step_peak = 0;   // highest during step 1
  int64_t after_second_step = 0;  // after step 1
  int64_t peak = 0;               // highest over both steps
};

MeasuredMemory train_two_steps(const TrainerOptions& options, RankCoords& coords) {
  MeasuredMemory m;
  TensorMemoryProbe probe;
  Trainer trainer(options, MPI_COMM_WORLD);
  coords = trainer.coords();
  m.constructed = probe.current_bytes();
  trainer.step(0);
  m.after_first_step = probe.current_bytes();
  const int64_t first_peak = probe.peak_bytes();
  probe.reset_peak();
  probe.reset_low();
  trainer.step(1);
  m.second_step_low = probe.low_bytes();
  m.second_step_peak = probe.peak_bytes();
  m.after_second_step = probe.current_bytes();
  m.peak = std::max(first_peak, m.second_step_peak);
  return m;
}

// The model's deterministic terms, each put in the window of the trainer's life where
// calibrate/trainer.cpp allocates it, so that each window's bytes are an exact sum of model terms.
struct ExpectedWindows {
  int64_t constructed = 0;        // weights, rotary tables, distributed optimizer's buffers, buckets' buffer
  int64_t dropped = 0;            // the gradients a step drops at its start (not the buckets' views)
  int64_t first_step_growth = 0;  // those gradients, AdamW's moments, the plain DP flat buffer
};

ExpectedWindows expected_windows(const predict::MemoryBreakdown& p, const TrainerOptions& options) {
  const TrainingTechniques& t = options.techniques;
  // Overlapped reduction at dp*cp > 1: the gradients are views of the buckets' buffer, made at
  // construction and zeroed, not dropped, at every step (with the distributed optimizer, padded).
  const bool buckets = t.overlap_gradient_reduction && options.config.reduction_ranks() > 1;
  ExpectedWindows e;
  // The distributed optimizer's padded parameters, shard and shard gradient (opg: the parameters are
  // views of the padded buffer, in weights_bytes) are made at construction, and without buckets its
  // padded gradient buffer (dp_flat_buffer_bytes) too.
  e.constructed = p.weights_bytes + p.rotary_tables_bytes + p.distributed_optimizer_bytes +
                  (t.distributed_optimizer && !buckets ? p.dp_flat_buffer_bytes : 0) + (buckets ? p.gradients_bytes : 0);
  e.dropped = buckets ? 0 : p.gradients_bytes;
  // The plain DP flat buffer is made at the first step's all-reduce; AdamW's moments at its first update.
  e.first_step_growth = e.dropped + p.optimizer_bytes + (t.distributed_optimizer ? 0 : p.dp_flat_buffer_bytes);
  return e;
}

// Trains `options` on every rank of the world for two steps under a probe and compares, for each
// rank's stage (pipeline rank), the deterministic terms of the model exactly with the bytes of the
// windows they are allocated in, and the peak with the model's total in the band.
void check_layout(const TrainerOptions& options, const std::string& label, double lower) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  RankCoords coords{};
  const MeasuredMemory measured = train_two_steps(options, coords);
  const predict::MemoryBreakdown predicted = predict::memory_per_gpu(
      options.model, options.config, precision_policy(options.precision), coords.pp_idx, options.attention, options.techniques);
  const ExpectedWindows expected = expected_windows(predicted, options);
  const double ratio = static_cast<double>(measured.peak) / static_cast<double>(predicted.total_bytes);
  const std::string what = options.config.to_string() + " " + to_string(options.precision) + " " + to_string(options.attention) +
                           label + " stage " + std::to_string(coords.pp_idx) + " (rank " + std::to_string(rank) + ")";
  const bool upper_bound = model_is_upper_bound(options.config, coords.pp_idx);
  // The activations measured: the second step's peak above what the first step left (every gradient
  // allocated, as at the model's peak); where the model is an upper bound, above the step's low, against
  // the activations and the gradients (allocated while the activations peak).
  const int64_t measured_activations =
      upper_bound ? measured.second_step_peak - measured.second_step_low : measured.second_step_peak - measured.after_first_step;
  const int64_t model_activations =
      std::max(predicted.activations_bytes, predicted.optimizer_workspace_bytes) + (upper_bound ? expected.dropped : 0);
  const double activation_ratio = static_cast<double>(measured_activations) / static_cast<double>(model_activations);
  const int64_t dropped = measured.after_first_step - measured.second_step_low;
  const int64_t first_step_growth = measured.after_first_step - measured.constructed;
  const double activation_lower = activation_lower_end(options.precision, upper_bound);
  const double total_lower = upper_bound ? std::min(lower, upper_bound_lower_end(options.config)) : lower;
  if (std::getenv("ITERTIME_VERBOSE")) {
    const bool exact = measured.constructed == expected.constructed && dropped == expected.dropped &&
                       first_step_growth == expected.first_step_growth && measured.after_second_step == measured.after_first_step;
    const bool activations_in_band = activation_ratio >= activation_lower && activation_ratio <= kActivationUpper;
    const bool total_in_band = ratio >= total_lower && ratio <= 1.30;
    std::printf("memory verdict %s: terms %s activations %s total %s\n", what.c_str(), exact ? "exact" : "FAIL",
                activations_in_band ? "in-band" : "FAIL", total_in_band ? "in-band" : "FAIL");
    std::printf(
        "memory check %s: measured %lld B, model %lld B (weights %lld grads %lld opt %lld act %lld buffers %lld flat %lld ws "
        "%lld), ratio %.3f\n",
        what.c_str(), static_cast<long long>(measured.peak), static_cast<long long>(predicted.total_bytes),
        static_cast<long long>(predicted.weights_bytes), static_cast<long long>(predicted.gradients_bytes),
        static_cast<long long>(predicted.optimizer_bytes), static_cast<long long>(predicted.activations_bytes),
        static_cast<long long>(predicted.buffers_bytes), static_cast<long long>(predicted.dp_flat_buffer_bytes),
        static_cast<long long>(predicted.optimizer_workspace_bytes), ratio);
    std::printf(
        "memory terms %s: constructed %lld/%lld dropped %lld/%lld growth %lld/%lld kept %lld activations %lld/%lld %s ratio "
        "%.3f\n",
        what.c_str(), static_cast<long long>(measured.constructed), static_cast<long long>(expected.constructed),
        static_cast<long long>(dropped), static_cast<long long>(expected.dropped), static_cast<long long>(first_step_growth),
        static_cast<long long>(expected.first_step_growth),
        static_cast<long long>(measured.after_second_step - measured.after_first_step),
        static_cast<long long>(measured_activations), static_cast<long long>(model_activations),
        upper_bound ? "upper-bound" : "steady", activation_ratio);
  }
  // The deterministic terms, exactly.
  EXPECT_EQ(measured.constructed, expected.constructed) << "[constructed: weights + rotary + optimizer buffers] " << what;
  EXPECT_EQ(dropped, expected.dropped) << "[dropped: gradients] " << what;
  EXPECT_EQ(first_step_growth, expected.first_step_growth) << "[first step: gradients + moments + flat buffer] " << what;
  EXPECT_EQ(measured.after_second_step, measured.after_first_step) << "[kept: a step leaves what the first left] " << what;
  // The activations, in their band.
  EXPECT_GE(activation_ratio, activation_lower) << "[activation band] " << what;
  EXPECT_LE(activation_ratio, kActivationUpper) << "[activation band] " << what;
  // The whole peak, in the band.
  EXPECT_GE(ratio, total_lower) << "[total band] " << what;
  EXPECT_LE(ratio, 1.30) << "[total band] " << what;
}

// Every (dp, tp, pp) factorization of the world: each rank trains its stage for two steps under a probe
// and compares the peak with the model of its stage.
void check_every_factorization(const LlamaSpec& model, PrecisionName precision, AttentionKernel attention,
                               const TrainingTechniques& techniques, const std::string& label, double lower = 0.95) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int tp = 1; tp <= world; ++tp) {
    for (int pp = 1; pp <= world / tp; ++pp) {
      if (world % (tp * pp) != 0) continue;
      const int dp = world / (tp * pp);
      TrainerOptions options;
      options.model = model;
      options.config = ParallelConfig{dp, tp, pp, 2, 8 * dp, 64};
      options.precision = precision;
      options.attention = attention;
      options.techniques = techniques;
      check_layout(options, label, lower);
    }
  }
}

LlamaSpec tiny_model() { return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json"); }

TEST(MemoryCheck, MeasuredPeakMatchesTheMemoryModel) {
  const std::vector<std::pair<PrecisionName, AttentionKernel>> cases = {
      {PrecisionName::kFp32, AttentionKernel::kEager},    {PrecisionName::kBf16, AttentionKernel::kEager},
      {PrecisionName::kAmpBf16, AttentionKernel::kEager}, {PrecisionName::kFp16, AttentionKernel::kEager},
      {PrecisionName::kAmpFp16, AttentionKernel::kEager}, {PrecisionName::kFp32, AttentionKernel::kSdpa},
      {PrecisionName::kBf16, AttentionKernel::kSdpa},     {PrecisionName::kAmpBf16, AttentionKernel::kSdpa}};
  for (const auto& [precision, attention] : cases) {
    if (!lacks_on_cpu(precision, attention).empty()) continue;  // fp16 and sdpa where the LibTorch has them (2.x)
    check_every_factorization(tiny_model(), precision, attention, {}, "");
  }
}

// The same with each technique, and with all of them that go together. Under autocast on LibTorch 2.x
// the measured peak sits up to 6% below the model (0.941-0.943 at the last stage of tp 2 pp 2 with full
// recompute on LibTorch 2.6, where 1.13 measures 1.00-1.07): 2.x's autocast holds fewer low-precision
// copies than the model, written against 1.13, counts. The lower end of the band is 0.90 there.
TEST(MemoryCheck, MeasuredPeakMatchesTheMemoryModelWithTechniques) {
  TrainingTechniques distributed_optimizer, selective, full, overlap, sharded_overlap, sharded_gather, sharded_full, sequence,
      vocabulary, all;
  distributed_optimizer.distributed_optimizer = true;
  selective.recompute = Recompute::kSelective;
  full.recompute = Recompute::kFull;
  overlap.overlap_gradient_reduction = true;
  overlap.gradient_bucket_bytes = 64 << 10;
  sharded_overlap = overlap;
  sharded_overlap.distributed_optimizer = true;
  sharded_gather = sharded_overlap;  // opg: the parameters are views of the padded buffer (held once)
  sharded_gather.overlap_parameter_gather = true;
  sharded_full = full;
  sharded_full.distributed_optimizer = true;
  sequence.sequence_parallel = true;
  vocabulary.vocab_parallel = true;
  all = sharded_full;
  all.sequence_parallel = true;
  all.vocab_parallel = true;
  const std::vector<std::pair<TrainingTechniques, std::string>> techniques = {
      {distributed_optimizer, " distributed-optimizer"},
      {selective, " selective-recompute"},
      {full, " full-recompute"},
      {overlap, " overlapped-reduction"},
      {sharded_overlap, " distributed-optimizer+overlapped-reduction"},
      {sharded_gather, " distributed-optimizer+overlapped-reduction+overlapped-gather"},
      {sharded_full, " distributed-optimizer+full-recompute"},
      {sequence, " sequence-parallel"},
      {vocabulary, " vocab-parallel"},
      {all, " all-four"}};
  const bool torch2 = has_sdpa();
  const double autocast_lower = torch2 ? 0.90 : 0.95;
  for (const auto& [technique, label] : techniques) {
    check_every_factorization(tiny_model(), PrecisionName::kFp32, AttentionKernel::kEager, technique, label);
    check_every_factorization(tiny_model(), PrecisionName::kAmpBf16, AttentionKernel::kEager, technique, label, autocast_lower);
  }
  if (torch2) {
    check_every_factorization(tiny_model(), PrecisionName::kAmpBf16, AttentionKernel::kSdpa, selective, " selective-recompute",
                              0.90);
    check_every_factorization(tiny_model(), PrecisionName::kAmpBf16, AttentionKernel::kSdpa, full, " full-recompute", 0.90);
  }
}

// Interleaved 1F1B (vp 2): pp 2 on the 4-layer model (world 2: dp 1; world 4: dp 2) and pp 4 on an
// 8-layer variant (world 4), each with m = pp (the warm-up runs every forward) and m = 2*pp (ranks reach
// the one-forward-one-backward phase), plain, with the distributed optimizer and with full recompute,
// fp32 and amp-bf16; at dp 2 also with overlapped reduction and with dopt+ovl+opg (buckets, padding and
// shard per chunk), fp32. Same band as above. Measured/model on LibTorch 1.13 when written: m = 2*pp
// 0.993-1.085 (vp 1 on the same pp 2 layout: 1.059-1.079), m = pp 0.889-1.018 (the lowest: full recompute
// on the last rank of pp 4, see upper_bound_lower_end).
TEST(MemoryCheck, InterleavedMeasuredPeakMatchesTheMemoryModel) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 2) GTEST_SKIP() << "interleaving needs a pipeline (2 or 4 ranks)";
  TrainingTechniques distributed_optimizer, full, overlap, sharded_gather;
  distributed_optimizer.distributed_optimizer = true;
  full.recompute = Recompute::kFull;
  overlap.overlap_gradient_reduction = true;  // buckets per chunk (calibrate/gradient_sync.hpp)
  overlap.gradient_bucket_bytes = 64 << 10;
  sharded_gather = overlap;  // each chunk's buckets padded to dp and sharded on their own, opg
  sharded_gather.distributed_optimizer = true;
  sharded_gather.overlap_parameter_gather = true;
  const std::vector<std::pair<TrainingTechniques, std::string>> techniques = {
      {{}, ""},
      {distributed_optimizer, " distributed-optimizer"},
      {full, " full-recompute"},
      {overlap, " overlapped-reduction"},
      {sharded_gather, " distributed-optimizer+overlapped-reduction+overlapped-gather"}};
  const double autocast_lower = has_sdpa() ? 0.90 : 0.95;
  for (const int pp : {2, 4}) {
    if (world % pp != 0) continue;
    const int dp = world / pp;
    for (const int m : {pp, 2 * pp}) {
      for (const auto& [technique, label] : techniques) {
        if (technique.overlap_gradient_reduction && dp == 1) continue;  // the plain layout at dp 1
        for (const PrecisionName precision : {PrecisionName::kFp32, PrecisionName::kAmpBf16}) {
          if (technique.overlap_gradient_reduction && precision != PrecisionName::kFp32) continue;  // CI time
          TrainerOptions options;
          options.model = tiny_model();
          options.model.num_layers = 2 * pp;  // one layer per virtual stage
          options.config = ParallelConfig{dp, 1, pp, 2, 2 * m * dp, 64};
          options.config.vp = 2;
          options.precision = precision;
          options.attention = AttentionKernel::kEager;
          options.techniques = technique;
          check_layout(options, label, precision == PrecisionName::kAmpBf16 ? autocast_lower : 0.95);
        }
      }
    }
  }
}

// Context parallelism (cp 2): cp 2 alone at 2 ranks; cp 2 x dp 2 and cp 2 x pp 2 at 4 ranks; plain, with
// the distributed optimizer (its shard over dp*cp ranks), with full recompute and with the distributed
// optimizer and overlapped reduction (buckets padded to dp*cp), also with opg, fp32 and amp-bf16, in
// the band above (each CP rank holds seq/cp = 32 of the 64 tokens, its keys and values all 64); and
// cp 2 x tp 2 with sequence parallelism and the vocabulary-parallel head. Measured/model on LibTorch 1.13
// when written: cp 2 and cp 2 x dp 2 1.022-1.033 (full recompute 0.997-1.007), cp 2 x pp 2 1.028-1.046
// (full recompute amp-bf16 last stage 0.994), cp 2 x tp 2 1.031-1.032. The cp 1 layouts of the same
// shapes measure 1.045-1.079; at dp 1 pp 1 the measured excess over the model is, at cp 2, half the
// cp 1 one plus 32 KB (the all-gather's [cp, b, kv, s/cp, hd] fp32 buffer, a transient). Modelling the
// activations at the full sequence gives 0.89 at cp 2 fp32, and the shard over dp only 0.88 at dp 2 x
// cp 2 with the distributed optimizer: both fail the band.
TEST(MemoryCheck, ContextParallelMeasuredPeakMatchesTheMemoryModel) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 2) GTEST_SKIP() << "context parallelism needs 2 or 4 ranks";
  TrainingTechniques distributed_optimizer, full, sharded_overlap;
  distributed_optimizer.distributed_optimizer = true;
  full.recompute = Recompute::kFull;
  sharded_overlap.distributed_optimizer = true;  // buckets padded to multiples of dp*cp
  sharded_overlap.overlap_gradient_reduction = true;
  sharded_overlap.gradient_bucket_bytes = 64 << 10;
  TrainingTechniques sharded_gather = sharded_overlap;  // opg over dp*cp
  sharded_gather.overlap_parameter_gather = true;
  const std::vector<std::pair<TrainingTechniques, std::string>> techniques = {
      {{}, ""},
      {distributed_optimizer, " distributed-optimizer"},
      {full, " full-recompute"},
      {sharded_overlap, " distributed-optimizer+overlapped-reduction"},
      {sharded_gather, " distributed-optimizer+overlapped-reduction+overlapped-gather"}};
  const double autocast_lower = has_sdpa() ? 0.90 : 0.95;
  TrainingTechniques sequence_vocabulary;  // tp 2: the residual stream at seq/(cp*tp), the head's V/tp rows
  sequence_vocabulary.sequence_parallel = true;
  sequence_vocabulary.vocab_parallel = true;
  struct Layout {
    int dp, tp, pp;
    std::vector<std::pair<TrainingTechniques, std::string>> techniques;
  };
  std::vector<Layout> layouts;  // cp 2
  if (world == 2) layouts = {{1, 1, 1, techniques}};
  if (world == 4)
    layouts = {{2, 1, 1, techniques}, {1, 1, 2, techniques}, {1, 2, 1, {{sequence_vocabulary, " sequence+vocab-parallel"}}}};
  // Both attention kernels where the LibTorch has sdpa (2.x: its fused kernel keeps a log-sum-exp and the
  // explicit [s/cp, s] mask instead of the scores; issue 31), eager only on 1.13. Measured/model with sdpa
  // on LibTorch 2.6 (Debian 13, 2026-12-03, ITERTIME_VERBOSE=1): cp 2 0.993-1.014, cp 2 x pp 2
  // 0.987-1.029, every deterministic term exact.
  std::vector<AttentionKernel> kernels = {AttentionKernel::kEager};
  if (has_sdpa()) kernels.push_back(AttentionKernel::kSdpa);
  for (const Layout& layout : layouts) {
    for (const auto& [technique, label] : layout.techniques) {
      for (const PrecisionName precision : {PrecisionName::kFp32, PrecisionName::kAmpBf16}) {
        for (const AttentionKernel attention : kernels) {
          TrainerOptions options;
          options.model = tiny_model();
          options.config = ParallelConfig{layout.dp, layout.tp, layout.pp, 2, 8 * layout.dp, 64};
          options.config.cp = 2;
          options.precision = precision;
          options.attention = attention;
          options.techniques = technique;
          check_layout(options, label, precision == PrecisionName::kAmpBf16 ? autocast_lower : 0.95);
        }
      }
    }
  }
}

// The allocator's own totals ride along with each report: on CPU the running total of what LibTorch
// handed out (at least the two live tensors at the peak), and nothing reserved (no cache).
TEST(TensorMemoryProbeTotals, CpuAllocatorReportsItsTotalAndReservesNothing) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  TensorMemoryProbe probe;
  {
    const torch::Tensor a = torch::empty({kMiB}, torch::kUInt8);
    const torch::Tensor b = torch::empty({4 * kMiB}, torch::kUInt8);
    EXPECT_GE(probe.current_bytes(), 5 * kMiB);
  }
  EXPECT_GE(probe.peak_bytes(), 5 * kMiB);
  EXPECT_LT(probe.current_bytes(), kMiB);
  EXPECT_GE(probe.allocator_peak_allocated_bytes(), 5 * kMiB);
  EXPECT_EQ(probe.allocator_peak_reserved_bytes(), 0);
}

// The low brackets what was freed between two moments (the checks above read the dropped gradients
// from it): the smallest current_bytes() since reset_low(), exact on CPU.
TEST(TensorMemoryProbeTotals, LowIsTheSmallestCurrentSinceItsReset) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  TensorMemoryProbe probe;
  torch::Tensor a = torch::empty({4 * kMiB}, torch::kUInt8);
  EXPECT_EQ(probe.current_bytes(), 4 * kMiB);
  probe.reset_low();
  EXPECT_EQ(probe.low_bytes(), 4 * kMiB);
  a = torch::Tensor();
  const torch::Tensor b = torch::empty({kMiB}, torch::kUInt8);
  EXPECT_EQ(probe.low_bytes(), 0);
  EXPECT_EQ(probe.current_bytes(), kMiB);
}

}  // namespace
}  // namespace itertime::calibrate
