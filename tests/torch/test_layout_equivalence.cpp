// Layout equivalence: with a fixed seed and the same global batch, every (DP,TP,PP) factorization of the
// MPI world trains to the same loss trajectory as single-rank training, within a tolerance per precision;
// with the distributed optimizer (ZeRO-1), sequence parallelism and both together too, against the same
// plain single-rank reference; with the interleaved schedule (virtual pipeline stages) too; with context
// parallelism (cp 2 and 4, alone and with DP, TP, PP, the interleaved schedule and the techniques) too.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "calibrate/llama_model.hpp"
#include "calibrate/tensor_memory.hpp"
#include "calibrate/tp_comm.hpp"
#include "calibrate/trainer.hpp"
#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/pipeline_order.hpp"
#include "tests/torch/torch_features.hpp"

namespace itertime::calibrate {
namespace {

constexpr int kSteps = 3;

LlamaSpec test_model() { return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json"); }

// Megatron-LM's techniques the trainer can turn on (common/training_techniques.hpp); overlapped
// reduction in 64 KiB buckets (about 14 for tiny-llama-gqa's 3.5 MB of gradients).
using Techniques = TrainingTechniques;
constexpr int64_t kTestBucketBytes = 64 << 10;
constexpr Techniques kDistributedOptimizer{false, false, true};
constexpr Techniques kSequenceParallel{true, false, false};
constexpr Techniques kVocabParallel{false, true, false};
constexpr Techniques kSelectiveRecompute{false, false, false, Recompute::kSelective};
constexpr Techniques kFullRecompute{false, false, false, Recompute::kFull};
constexpr Techniques kOverlappedReduction{false, false, false, Recompute::kNone, true, kTestBucketBytes};
constexpr Techniques kAllTechniques{true, true, true, Recompute::kFull};
// Everything with overlapped reduction but the distributed optimizer; the distributed optimizer with
// overlapped reduction (per-bucket reduce-scatters), alone and with everything (sp+vp+dopt+rc-full+ovl-64K).
constexpr Techniques kAllWithOverlap{true, true, false, Recompute::kFull, true, kTestBucketBytes};
constexpr Techniques kDistributedOverlap{false, false, true, Recompute::kNone, true, kTestBucketBytes};
constexpr Techniques kEverything{true, true, true, Recompute::kFull, true, kTestBucketBytes};
// The same two with the overlapped parameter gather (dopt+ovl-64K+opg, sp+vp+dopt+rc-full+ovl-64K+opg):
// the parameters are views of the padded buffer, the all-gathers started after AdamW and waited for in
// the next forward.
constexpr Techniques kOverlappedGather{false, false, true, Recompute::kNone, true, kTestBucketBytes, true};
constexpr Techniques kEverythingWithGather{true, true, true, Recompute::kFull, true, kTestBucketBytes, true};

std::string name_of(const Techniques& t) {
  return std::string(t.distributed_optimizer ? "_distributed_optimizer" : "") +
         (t.sequence_parallel ? "_sequence_parallel" : "") + (t.vocab_parallel ? "_vocab_parallel" : "") +
         (t.recompute == Recompute::kSelective ? "_selective_recompute"
          : t.recompute == Recompute::kFull    ? "_full_recompute"
                                               : "") +
         (t.overlap_gradient_reduction ? "_overlapped_reduction" : "") + (t.overlap_parameter_gather ? "_overlapped_gather" : "");
}

TrainerOptions options_for(PrecisionName precision, int dp, int tp, int pp, AttentionKernel attention = AttentionKernel::kEager,
                           Techniques techniques = {}) {
  TrainerOptions options;
  options.techniques = techniques;
  options.attention = attention;
  // fp16: a loss scale at which no layout's backward overflows, so that every layout takes the same
  // steps. At 65536 the DP layouts (fewer micro-batches per rank, so a larger scale per micro-batch)
  // overflow and skip step 1 where single-rank training does not (Trainer.Fp16LossScalingSkipsOverflow).
  options.initial_loss_scale = 1024.0;
  options.model = test_model();
  options.config.dp = dp;
  options.config.tp = tp;
  options.config.pp = pp;
  options.config.micro_batch = 1;
  options.config.global_batch = 4;
  options.config.seq_len = 32;
  options.precision = precision;
  options.seed = 42;
  options.learning_rate = 3e-3;
  return options;
}

std::vector<double> train(const TrainerOptions& options, MPI_Comm comm) {
  Trainer trainer(options, comm);
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) losses.push_back(trainer.step(step).loss);
  return losses;
}

// Single-rank reference, computed on world rank 0 and shared with every rank.
std::vector<double> reference(PrecisionName precision, AttentionKernel attention) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<double> losses(kSteps, 0.0);
  if (rank == 0) losses = train(options_for(precision, 1, 1, 1, attention), MPI_COMM_SELF);
  MPI_Bcast(losses.data(), kSteps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return losses;
}

struct Case {
  PrecisionName precision;
  double tolerance;  // absolute, on a loss of about ln(512) = 6.24
  AttentionKernel attention = AttentionKernel::kEager;
  Techniques techniques = {};
};

class LayoutEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(LayoutEquivalence, EveryFactorizationMatchesSingleRank) {
  const Case c = GetParam();
  const std::string lacking = lacks_on_cpu(c.precision, c.attention);
  if (!lacking.empty()) GTEST_SKIP() << lacking;
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::vector<double> expected = reference(c.precision, c.attention);
  // The model trains: the loss starts near ln(vocab) and falls.
  EXPECT_NEAR(expected[0], std::log(512.0), 0.1);
  EXPECT_LT(expected[kSteps - 1], expected[0] - 0.01);

  for (int tp = 1; tp <= world; ++tp) {
    for (int pp = 1; pp <= world / tp; ++pp) {
      if (world % (tp * pp) != 0) continue;
      const int dp = world / (tp * pp);
      const std::vector<double> losses = train(options_for(c.precision, dp, tp, pp, c.attention, c.techniques), MPI_COMM_WORLD);
      for (int step = 0; step < kSteps; ++step) {
        EXPECT_NEAR(losses[step], expected[step], c.tolerance)
            << "precision " << to_string(c.precision) << " attention " << to_string(c.attention) << " techniques"
            << name_of(c.techniques) << " layout (dp,tp,pp)=(" << dp << "," << tp << "," << pp << ") step " << step;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, LayoutEquivalence,
                         ::testing::Values(Case{PrecisionName::kFp32, 1e-4}, Case{PrecisionName::kBf16, 5e-2},
                                           Case{PrecisionName::kAmpBf16, 2e-2},
                                           // LibTorch 2.x: fp16 on cpu (loss scaling included) and sdpa
                                           Case{PrecisionName::kFp16, 5e-2}, Case{PrecisionName::kAmpFp16, 2e-2},
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kSdpa},
                                           Case{PrecisionName::kBf16, 5e-2, AttentionKernel::kSdpa},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kSdpa},
                                           Case{PrecisionName::kAmpFp16, 2e-2, AttentionKernel::kSdpa},
                                           // the distributed optimizer: the same losses as replicated AdamW
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kDistributedOptimizer},
                                           Case{PrecisionName::kBf16, 5e-2, AttentionKernel::kEager, kDistributedOptimizer},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kDistributedOptimizer},
                                           Case{PrecisionName::kFp16, 5e-2, AttentionKernel::kEager, kDistributedOptimizer},
                                           // sequence parallelism
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kSequenceParallel},
                                           Case{PrecisionName::kBf16, 5e-2, AttentionKernel::kEager, kSequenceParallel},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kSequenceParallel},
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kSdpa, kSequenceParallel},
                                           // the vocabulary-parallel embedding, head and cross-entropy
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kVocabParallel},
                                           Case{PrecisionName::kBf16, 5e-2, AttentionKernel::kEager, kVocabParallel},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kVocabParallel},
                                           // activation recompute
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kSelectiveRecompute},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kSelectiveRecompute},
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kFullRecompute},
                                           Case{PrecisionName::kBf16, 5e-2, AttentionKernel::kEager, kFullRecompute},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kFullRecompute},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kSdpa, kFullRecompute},
                                           // overlapped gradient reduction
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kOverlappedReduction},
                                           Case{PrecisionName::kBf16, 5e-2, AttentionKernel::kEager, kOverlappedReduction},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kOverlappedReduction},
                                           Case{PrecisionName::kFp16, 5e-2, AttentionKernel::kEager, kOverlappedReduction},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kAllWithOverlap},
                                           // the distributed optimizer with overlapped reduction
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kDistributedOverlap},
                                           Case{PrecisionName::kBf16, 5e-2, AttentionKernel::kEager, kDistributedOverlap},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kDistributedOverlap},
                                           Case{PrecisionName::kFp16, 5e-2, AttentionKernel::kEager, kDistributedOverlap},
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kEverything},
                                           Case{PrecisionName::kBf16, 5e-2, AttentionKernel::kEager, kEverything},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kEverything},
                                           // ...and with the overlapped parameter gather
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kOverlappedGather},
                                           Case{PrecisionName::kBf16, 5e-2, AttentionKernel::kEager, kOverlappedGather},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kOverlappedGather},
                                           Case{PrecisionName::kFp16, 5e-2, AttentionKernel::kEager, kOverlappedGather},
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kEverythingWithGather},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kEverythingWithGather},
                                           // all of them together
                                           Case{PrecisionName::kFp32, 1e-4, AttentionKernel::kEager, kAllTechniques},
                                           Case{PrecisionName::kAmpBf16, 2e-2, AttentionKernel::kEager, kAllTechniques},
                                           Case{PrecisionName::kAmpFp16, 2e-2, AttentionKernel::kEager, kAllTechniques}),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           std::string name = to_string(param_info.param.precision) + "_" +
                                              to_string(param_info.param.attention) + name_of(param_info.param.techniques);
                           for (char& ch : name) ch = (ch == '-') ? '_' : ch;
                           return name;
                         });

// The distributed optimizer keeps AdamW's state for a 1/dp shard of the local parameters only.
TEST(Trainer, DistributedOptimizerShardsTheOptimizerState) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const Trainer replicated(options_for(PrecisionName::kFp32, world, 1, 1), MPI_COMM_WORLD);
  const Trainer sharded(options_for(PrecisionName::kFp32, world, 1, 1, AttentionKernel::kEager, kDistributedOptimizer),
                        MPI_COMM_WORLD);
  EXPECT_EQ(replicated.optimizer_parameter_count(), replicated.local_parameter_count());
  EXPECT_EQ(sharded.local_parameter_count(), replicated.local_parameter_count());
  EXPECT_EQ(sharded.optimizer_parameter_count(), (replicated.local_parameter_count() + world - 1) / world);
}

// Every rank's parameters after three steps: with each technique, and with all of them, as in the same
// layout without any. Sequence parallelism needs the norms' weight gradients, computed on sequence
// shards, summed over TP: without that sum the losses of three steps still agree within 1e-4, but the
// parameters do not.
double trained_sum_of_squares(const TrainerOptions& options) {
  Trainer trainer(options, MPI_COMM_WORLD);
  for (int step = 0; step < kSteps; ++step) trainer.step(step);
  return trainer.parameter_sum_of_squares();
}

TEST(Trainer, TechniquesTrainTheSameParameters) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int tp = 1; tp <= world; tp *= 2) {
    const int dp = world / tp;
    const double expected = trained_sum_of_squares(options_for(PrecisionName::kFp32, dp, tp, 1));
    for (const Techniques techniques :
         {kDistributedOptimizer, kSequenceParallel, kVocabParallel, kSelectiveRecompute, kFullRecompute, kOverlappedReduction,
          kAllTechniques, kAllWithOverlap, kDistributedOverlap, kEverything, kOverlappedGather, kEverythingWithGather}) {
      // fp32 summation order: 3e-9 relative at tp 4; without the TP sum of the norms' gradients: 1e-4
      EXPECT_NEAR(trained_sum_of_squares(options_for(PrecisionName::kFp32, dp, tp, 1, AttentionKernel::kEager, techniques)),
                  expected, 1e-6 * expected)
          << "techniques" << name_of(techniques) << ", dp " << dp << " tp " << tp;
    }
  }
}

// The reduced gradients of the first step, whole model, on every rank: each stage's sum of squares (the
// same on its dp*cp*tp ranks) summed over the world.
double first_step_gradient_sum_of_squares(const TrainerOptions& options) {
  Trainer trainer(options, MPI_COMM_WORLD);
  trainer.step(0);
  double sum = trainer.gradient_sum_of_squares();
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum / (options.config.dp * options.config.cp * options.config.tp);
}

// Single-rank training's gradients of the first step (fp32), computed on world rank 0, on every rank.
double single_rank_gradient_sum_of_squares(Techniques techniques) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double expected = 0.0;
  if (rank == 0) {
    Trainer single(options_for(PrecisionName::kFp32, 1, 1, 1, AttentionKernel::kEager, techniques), MPI_COMM_SELF);
    single.step(0);
    expected = single.gradient_sum_of_squares();
  }
  MPI_Bcast(&expected, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return expected;
}

// Every plain (dp, tp, pp) factorization of the world reduces the gradients of the global batch: their
// sum of squares after the first step is single-rank training's. AdamW is scale-invariant and nothing
// clips, so summing instead of averaging over DP passes every loss comparison above; this sees the
// factor dp^2 (4 at dp 2). Both all-reduce strategies (one buffer, overlapped buckets) get the check; the
// distributed optimizer's gradients are shards, which gradient_sum_of_squares does not sum.
TEST(Trainer, EveryLayoutReducesTheGradientsOfTheGlobalBatch) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (const Techniques techniques : {Techniques{}, kOverlappedReduction}) {
    const double expected = single_rank_gradient_sum_of_squares(techniques);
    ASSERT_GT(expected, 0.0);
    for (int tp = 1; tp <= world; ++tp) {
      for (int pp = 1; pp <= world / tp; ++pp) {
        if (world % (tp * pp) != 0) continue;
        const int dp = world / (tp * pp);
        // fp32 summation order: about 1e-7 relative; a DP sum instead of a mean: a factor dp^2.
        EXPECT_NEAR(first_step_gradient_sum_of_squares(
                        options_for(PrecisionName::kFp32, dp, tp, pp, AttentionKernel::kEager, techniques)),
                    expected, 1e-5 * expected)
            << "techniques" << name_of(techniques) << " layout (dp,tp,pp)=(" << dp << "," << tp << "," << pp << ")";
      }
    }
  }
}

// Overlapped reduction really starts during the backward: every bucket of the last step was started
// before the backward returned (its all-reduce, or with the distributed optimizer its reduce-scatter),
// and there are several.
TEST(Trainer, OverlappedReductionStartsEveryBucketDuringTheBackward) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (const Techniques techniques : {kOverlappedReduction, kDistributedOverlap, kOverlappedGather}) {
    for (int pp = 1; pp <= std::min(world / 2, 2); ++pp) {
      Trainer trainer(options_for(PrecisionName::kFp32, world / pp, 1, pp, AttentionKernel::kEager, techniques), MPI_COMM_WORLD);
      for (int step = 0; step < 2; ++step) {
        trainer.step(step);
        EXPECT_GT(trainer.gradient_bucket_count(), 2) << "techniques" << name_of(techniques) << " pp " << pp;
        EXPECT_EQ(trainer.overlapped_buckets_started(), trainer.gradient_bucket_count())
            << "techniques" << name_of(techniques) << " pp " << pp << " step " << step;
      }
    }
  }
  TrainerOptions accepted = options_for(PrecisionName::kFp32, world, 1, 1, AttentionKernel::kEager, kDistributedOverlap);
  EXPECT_NO_THROW(check_trainable(accepted, world));
}

// The overlapped parameter gather really leaves the all-gathers in flight after a step (every bucket's,
// waited for in the next forward), and only with opg at dp > 1; the parameters a step leaves are the
// same as dopt+ovl's once they are finished (parameter_sum_of_squares finishes them). Two steps in a
// row also check that the next forward waited for every one (the trainer checks it after the schedule).
TEST(Trainer, OverlappedGatherLeavesTheAllGathersInFlightForTheNextForward) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int pp = 1; pp <= std::min(world / 2, 2); ++pp) {
    for (const Techniques techniques : {kDistributedOverlap, kOverlappedGather}) {
      Trainer trainer(options_for(PrecisionName::kFp32, world / pp, 1, pp, AttentionKernel::kEager, techniques), MPI_COMM_WORLD);
      EXPECT_EQ(trainer.parameter_gathers_in_flight(), 0);
      for (int step = 0; step < 2; ++step) {
        trainer.step(step);
        const int expected = techniques.overlap_parameter_gather ? trainer.gradient_bucket_count() : 0;
        EXPECT_GT(trainer.gradient_bucket_count(), 2);
        EXPECT_EQ(trainer.parameter_gathers_in_flight(), expected) << "techniques" << name_of(techniques) << " pp " << pp;
      }
      trainer.parameter_sum_of_squares();
      EXPECT_EQ(trainer.parameter_gathers_in_flight(), 0) << "techniques" << name_of(techniques) << " pp " << pp;
    }
  }
  // At dp 1 opg is dropped with ovl: nothing is in flight (one rank, its own layout).
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    Trainer single(options_for(PrecisionName::kFp32, 1, 1, 1, AttentionKernel::kEager, kOverlappedGather), MPI_COMM_SELF);
    single.step(0);
    EXPECT_EQ(single.parameter_gathers_in_flight(), 0);
  }
}

// LlamaStage's before-parameters hook (where opg's forward waits for its buckets) runs before each part
// first uses its parameters: with every parameter NaN until the hook puts back its part's range, the
// stage's output is the one with the parameters in place, and the ranges cover parameters() in order.
// (The trainer's own tests cannot see a late wait: on CPU ranks the all-gathers usually complete inside
// the host all-reduces that end the step.) Stages with the embedding, without, and with the head; with
// full recompute too (the layer's body runs after the hook).
TEST(LlamaStageHook, RunsBeforeEachPartUsesItsParameters) {
  const LlamaSpec model = test_model();
  const int64_t seq = 32;
  const auto halves = stage_layers(static_cast<int>(model.num_layers), 2);
  const StageLayers whole{0, static_cast<int>(model.num_layers), true, true};
  for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
    for (const StageLayers& layers : {whole, halves[0], halves[1]}) {
      LlamaStage stage(model, layers, 42, nullptr, seq, AttentionKernel::kEager, recompute);
      torch::manual_seed(7);
      const torch::Tensor tokens = torch::randint(model.vocab_size, {1, seq + 1}, torch::kInt64);
      const torch::Tensor input = layers.has_embedding ? tokens.narrow(1, 0, seq) : torch::randn({1, seq, model.hidden_size});
      const torch::Tensor targets = layers.has_head ? tokens.narrow(1, 1, seq) : torch::Tensor();
      const torch::Tensor expected = stage->forward(input, targets).detach();
      std::vector<torch::Tensor> parameters = stage->parameters(), saved;
      {
        torch::NoGradGuard no_grad;
        for (auto& p : parameters) {
          saved.push_back(p.detach().clone());
          p.fill_(std::numeric_limits<float>::quiet_NaN());
        }
      }
      std::size_t covered = 0;
      stage->set_before_parameters([&](std::size_t first, std::size_t end) {
        EXPECT_EQ(first, covered);
        EXPECT_GT(end, first);
        torch::NoGradGuard no_grad;
        for (std::size_t i = first; i < end; ++i) parameters[i].copy_(saved[i]);
        covered = end;
      });
      const torch::Tensor output = stage->forward(input, targets).detach();
      const std::string what = std::string(layers.has_embedding ? "embedding " : "") + std::to_string(layers.num_layers) +
                               " layers" + (layers.has_head ? " head" : "") + " recompute " + to_string(recompute);
      EXPECT_EQ(covered, parameters.size()) << what;
      EXPECT_FALSE(torch::isnan(output).any().item<bool>()) << what;
      EXPECT_TRUE(torch::equal(output, expected)) << what;
    }
  }
}

// opg needs what it overlaps: the distributed optimizer's buckets (dopt and ovl).
TEST(Trainer, RefusesOverlappedGatherWithoutTheDistributedOptimizersBuckets) {
  TrainerOptions options = options_for(PrecisionName::kFp32, 2, 1, 1, AttentionKernel::kEager, kOverlappedGather);
  EXPECT_NO_THROW(check_trainable(options, 2));
  options.techniques.distributed_optimizer = false;
  EXPECT_THROW(check_trainable(options, 2), UserError);
  options.techniques = kOverlappedGather;
  options.techniques.overlap_gradient_reduction = false;
  EXPECT_THROW(check_trainable(options, 2), UserError);
}

// The distributed optimizer with overlapped reduction shards AdamW's state too: each bucket is padded to
// a multiple of dp and a rank keeps one 1/dp slice of each, so its shard is at least ceil(P / dp) and
// exceeds it by less than one element per bucket.
TEST(Trainer, DistributedOptimizerWithOverlapShardsEveryBucket) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 2) GTEST_SKIP() << "overlapped reduction needs dp > 1";
  const Trainer trainer(options_for(PrecisionName::kFp32, world, 1, 1, AttentionKernel::kEager, kDistributedOverlap),
                        MPI_COMM_WORLD);
  const int64_t local = trainer.local_parameter_count();
  EXPECT_GE(trainer.optimizer_parameter_count(), (local + world - 1) / world);
  EXPECT_LE(trainer.optimizer_parameter_count(), local / world + trainer.gradient_bucket_count());
}

// Recompute really drops activations: the peak of tensor bytes during a step (after the first, which
// makes AdamW's state) falls from none to selective (no [batch, heads, seq, seq] scores kept) to full
// (only each layer's input kept), on one rank.
int64_t peak_step_bytes(TrainerOptions options) {
  options.config.micro_batch = 4;
  options.config.global_batch = 4;
  options.config.seq_len = 64;
  Trainer trainer(options, MPI_COMM_SELF);
  trainer.step(0);
  TensorMemoryProbe probe;
  trainer.step(1);
  return probe.peak_bytes();
}

TEST(Trainer, RecomputeKeepsFewerActivations) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  const int64_t none = peak_step_bytes(options_for(PrecisionName::kFp32, 1, 1, 1));
  const int64_t selective =
      peak_step_bytes(options_for(PrecisionName::kFp32, 1, 1, 1, AttentionKernel::kEager, kSelectiveRecompute));
  const int64_t full = peak_step_bytes(options_for(PrecisionName::kFp32, 1, 1, 1, AttentionKernel::kEager, kFullRecompute));
  EXPECT_LT(selective, none);
  EXPECT_LT(full, selective);
  std::printf("peak tensor bytes of a step: none %lld, selective %lld, full %lld\n", static_cast<long long>(none),
              static_cast<long long>(selective), static_cast<long long>(full));
}

TEST(Trainer, RefusesPoliciesTheBackendCannotRun) {
  TrainerOptions options = options_for(PrecisionName::kTf32, 1, 1, 1);
  EXPECT_THROW(check_trainable(options, 1), UserError);
  options.precision = PrecisionName::kBf16;
  EXPECT_NO_THROW(check_trainable(options, 1));
  // fp16 on cpu: refused by LibTorch 1.x (no fp16 matrix product), accepted by 2.x.
  for (PrecisionName fp16 : {PrecisionName::kFp16, PrecisionName::kAmpFp16}) {
    options.precision = fp16;
    if (!has_cpu_fp16_matmul()) {
      EXPECT_THROW(check_trainable(options, 1), UserError) << to_string(fp16);
    } else {
      EXPECT_NO_THROW(check_trainable(options, 1)) << to_string(fp16);
    }
  }
}

TEST(Trainer, AttentionKernelFollowsTheLibTorch) {
  TrainerOptions options = options_for(PrecisionName::kFp32, 1, 1, 1, AttentionKernel::kSdpa);
  if (!has_sdpa()) {
    EXPECT_THROW(check_trainable(options, 1), UserError);  // no scaled_dot_product_attention before 2.0
  } else {
    EXPECT_NO_THROW(check_trainable(options, 1));
  }
  options.attention = AttentionKernel::kEager;
  EXPECT_NO_THROW(check_trainable(options, 1));
}

// The fused kernel computes the same function as the eager form: same model, same data, same losses.
TEST(Trainer, SdpaTrainsLikeEager) {
  const std::string lacking = lacks_on_cpu(PrecisionName::kFp32, AttentionKernel::kSdpa);
  if (!lacking.empty()) GTEST_SKIP() << lacking;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  const std::vector<double> eager = train(options_for(PrecisionName::kFp32, 1, 1, 1, AttentionKernel::kEager), MPI_COMM_SELF);
  const std::vector<double> sdpa = train(options_for(PrecisionName::kFp32, 1, 1, 1, AttentionKernel::kSdpa), MPI_COMM_SELF);
  for (int step = 0; step < kSteps; ++step) EXPECT_NEAR(sdpa[step], eager[step], 1e-4) << "step " << step;
}

// Dynamic loss scaling at work: at a scale of 2^20 this model's fp16 backward overflows (it already does
// at 2^16 on some batches), so step 0 is skipped and the scale halved until it fits (measured: 2^20 to
// 2^18 skip, then 2^17 fits on most batches); training then goes on and never produces NaN.
TEST(Trainer, Fp16LossScalingSkipsOverflow) {
  const std::string lacking = lacks_on_cpu(PrecisionName::kFp16, AttentionKernel::kEager);
  if (!lacking.empty()) GTEST_SKIP() << lacking;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  TrainerOptions options = options_for(PrecisionName::kFp16, 1, 1, 1);
  options.config.global_batch = 2;  // m = 2
  options.initial_loss_scale = 1048576.0;
  Trainer trainer(options, MPI_COMM_SELF);
  std::vector<bool> skipped;
  for (int step = 0; step < 16; ++step) {
    const StepResult result = trainer.step(step);
    EXPECT_TRUE(std::isfinite(result.loss)) << "step " << step;
    skipped.push_back(result.skipped);
  }
  EXPECT_TRUE(skipped.front());
  EXPECT_NE(std::find(skipped.begin(), skipped.end(), false), skipped.end()) << "the scale never came down to one that fits";
}

TEST(Trainer, RefusesIllegalLayouts) {
  TrainerOptions options = options_for(PrecisionName::kFp32, 1, 3, 1);  // 3 does not divide 8 heads
  EXPECT_THROW(check_trainable(options, 3), UserError);
  options = options_for(PrecisionName::kFp32, 1, 2, 1, AttentionKernel::kEager, kAllTechniques);
  EXPECT_NO_THROW(check_trainable(options, 2));
  options.config.seq_len = 33;  // sequence parallelism needs seq_len % tp == 0
  EXPECT_THROW(check_trainable(options, 2), UserError);
  options.config.seq_len = 32;
  options.model.vocab_size = 511;  // a vocabulary-parallel head needs vocab_size % tp == 0
  EXPECT_THROW(check_trainable(options, 2), UserError);
  options = options_for(PrecisionName::kFp32, 2, 1, 1);
  EXPECT_THROW(check_trainable(options, 4), UserError);  // world mismatch
}

// ---- interleaved 1F1B (virtual pipeline stages) ----

// Replays every rank's interleaved order under the trainer's dependencies (forward (vs, i) after forward
// (vs-1, i); backward (vs, i) after forward (vs, i) and backward (vs+1, i); virtual stage c*pp + r on
// rank r) with sends that never block: every pass runs, so the trainer's blocking receives cannot wait on
// each other in a cycle. Each rank also runs every chunk's forwards, and its backwards, in increasing
// micro-batch order, which the trainer's per-(direction, chunk) tags rely on.
TEST(InterleavedOrder, RunsToTheEndWithNonBlockingSends) {
  for (int pp = 2; pp <= 5; ++pp) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = pp; m <= 4 * pp; m += (v > 1 ? pp : 1)) {
        const int stages = pp * v;
        std::vector<std::vector<PipelinePass>> orders;
        for (int r = 0; r < pp; ++r) orders.push_back(interleaved_passes(pp, r, m, v));
        // done[kind][vs][i]
        std::vector<std::vector<std::vector<bool>>> done(2, std::vector<std::vector<bool>>(stages, std::vector<bool>(m, false)));
        std::vector<std::size_t> next(pp, 0);
        std::size_t remaining = 0;
        for (int r = 0; r < pp; ++r) {
          ASSERT_EQ(orders[r].size(), static_cast<std::size_t>(2 * m * v));
          remaining += orders[r].size();
          std::vector<std::vector<int>> last(2, std::vector<int>(v, -1));
          for (const PipelinePass& pass : orders[r]) {
            int& previous = last[pass.kind == PipelinePassKind::kForward ? 0 : 1][pass.chunk];
            EXPECT_GT(pass.micro_batch, previous) << "pp " << pp << " v " << v << " m " << m << " rank " << r;
            previous = pass.micro_batch;
          }
        }
        bool progress = true;
        while (remaining > 0 && progress) {
          progress = false;
          for (int r = 0; r < pp; ++r) {
            while (next[r] < orders[r].size()) {
              const PipelinePass& pass = orders[r][next[r]];
              const int vs = pass.chunk * pp + r;
              const int i = pass.micro_batch;
              const bool ready = pass.kind == PipelinePassKind::kForward
                                     ? (vs == 0 || done[0][vs - 1][i])
                                     : (done[0][vs][i] && (vs == stages - 1 || done[1][vs + 1][i]));
              if (!ready) break;
              done[pass.kind == PipelinePassKind::kForward ? 0 : 1][vs][i] = true;
              ++next[r];
              --remaining;
              progress = true;
            }
          }
        }
        EXPECT_EQ(remaining, 0u) << "deadlock at pp " << pp << " v " << v << " m " << m;
      }
    }
  }
}

// tiny-llama-gqa with `layers` decoder layers (4 in data/models; 8 gives pp 4 two one-layer chunks per rank).
TrainerOptions interleaved_options(PrecisionName precision, int dp, int tp, int pp, int virtual_stages, int layers,
                                   int64_t global_batch, Techniques techniques = {}) {
  TrainerOptions options = options_for(precision, dp, tp, pp, AttentionKernel::kEager, techniques);
  options.model.num_layers = layers;
  options.config.global_batch = global_batch;
  options.config.vp = virtual_stages;
  return options;
}

struct InterleavedCase {
  PrecisionName precision;
  double tolerance;
  Techniques techniques = {};
};

class InterleavedLayoutEquivalence : public ::testing::TestWithParam<InterleavedCase> {};

// v = 2 at pp 2 (world 2: dp1 pp2; world 4: dp2 pp2 and tp2 pp2) and at pp 4 (world 4, 8 layers), with
// 4 and 8 samples per step (m a multiple of pp; with 8, ranks reach the steady one-forward-one-backward
// phase): the losses of single-rank training. Overlapped reduction (and opg) only where it is on, dp 2.
TEST_P(InterleavedLayoutEquivalence, MatchesSingleRank) {
  const InterleavedCase c = GetParam();
  const std::string lacking = lacks_on_cpu(c.precision, AttentionKernel::kEager);
  if (!lacking.empty()) GTEST_SKIP() << lacking;
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (world < 2) GTEST_SKIP() << "interleaving needs pp > 1";
  if (c.techniques.overlap_gradient_reduction && world < 4) GTEST_SKIP() << "overlapped reduction with interleaving: dp 2 x pp 2";
  const bool sp = c.techniques.sequence_parallel || c.techniques.vocab_parallel;
  for (const int layers : {4, 8}) {
    if (layers == 8 && world % 4 != 0) continue;  // pp 4 only
    for (const int64_t global_batch : {4, 8}) {
      std::vector<double> expected(kSteps, 0.0);
      if (rank == 0) expected = train(interleaved_options(c.precision, 1, 1, 1, 1, layers, global_batch), MPI_COMM_SELF);
      MPI_Bcast(expected.data(), kSteps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      for (int tp = 1; tp <= 2; ++tp) {
        for (int pp = 2; pp <= 4; pp *= 2) {
          if (world % (tp * pp) != 0 || layers < 2 * pp || (layers == 8) != (pp == 4)) continue;
          if (sp && tp == 1) continue;  // SP and VP change nothing at tp 1
          const int dp = world / (tp * pp);
          if (c.techniques.overlap_gradient_reduction && dp == 1) continue;  // ovl (and opg) change nothing at dp 1
          const std::vector<double> losses =
              train(interleaved_options(c.precision, dp, tp, pp, 2, layers, global_batch, c.techniques), MPI_COMM_WORLD);
          for (int step = 0; step < kSteps; ++step) {
            EXPECT_NEAR(losses[step], expected[step], c.tolerance)
                << "precision " << to_string(c.precision) << " techniques" << name_of(c.techniques) << " layout (dp,tp,pp)=("
                << dp << "," << tp << "," << pp << ") v 2, " << layers << " layers, global batch " << global_batch << ", step "
                << step;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, InterleavedLayoutEquivalence,
                         ::testing::Values(InterleavedCase{PrecisionName::kFp32, 1e-4},
                                           InterleavedCase{PrecisionName::kBf16, 5e-2},
                                           InterleavedCase{PrecisionName::kAmpBf16, 2e-2},
                                           // several chunks' parameters in one DP buffer / one shard
                                           InterleavedCase{PrecisionName::kFp32, 1e-4, kDistributedOptimizer},
                                           InterleavedCase{PrecisionName::kAmpBf16, 2e-2, kDistributedOptimizer},
                                           InterleavedCase{PrecisionName::kFp32, 1e-4, kSequenceParallel},
                                           InterleavedCase{PrecisionName::kFp32, 1e-4, kAllTechniques},
                                           // each chunk's own buckets, reduced from its last backward (dp 2 only)
                                           InterleavedCase{PrecisionName::kFp32, 1e-4, kOverlappedReduction},
                                           InterleavedCase{PrecisionName::kAmpBf16, 2e-2, kOverlappedReduction},
                                           InterleavedCase{PrecisionName::kFp32, 1e-4, kDistributedOverlap},
                                           InterleavedCase{PrecisionName::kFp32, 1e-4, kOverlappedGather}),
                         [](const ::testing::TestParamInfo<InterleavedCase>& param_info) {
                           std::string name = to_string(param_info.param.precision) + name_of(param_info.param.techniques);
                           for (char& ch : name) ch = (ch == '-') ? '_' : ch;
                           return name;
                         });

// The same parameters as the non-interleaved pipeline of the same layout after three steps (SP at tp 2:
// the norms' gradients of every chunk summed over TP). The ranks hold other layers with v 2 (rank 0 layers
// 0 and 2 instead of 0 and 1), so the whole model's sum is compared: each stage's (the same on its TP
// ranks) summed over the world, divided by tp (dp is 1).
double whole_model_sum_of_squares(const TrainerOptions& options) {
  double sum = trained_sum_of_squares(options);
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum / options.config.tp;
}

TEST(InterleavedTrainer, TrainsTheSameParametersAsOneChunkPerRank) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 2) GTEST_SKIP() << "interleaving needs pp > 1";
  const int tp = world / 2;
  for (const Techniques techniques : {Techniques{}, kAllTechniques}) {
    if (tp == 1 && techniques.sequence_parallel) continue;
    const double expected = whole_model_sum_of_squares(interleaved_options(PrecisionName::kFp32, 1, tp, 2, 1, 4, 8, techniques));
    EXPECT_NEAR(whole_model_sum_of_squares(interleaved_options(PrecisionName::kFp32, 1, tp, 2, 2, 4, 8, techniques)), expected,
                1e-6 * expected)
        << "techniques" << name_of(techniques) << " tp " << tp;
  }
}

// Overlapped reduction with the interleaved schedule: each chunk its own buckets (Megatron-Core's DDP per
// model chunk), armed for that chunk's last backward (its micro-batch m-1), at dp 2 pp 2 v 2 (world 4),
// with m = pp (every forward in the warm-up) and m = 2*pp. The first step's reduced gradients are
// single-rank training's: a bucket started before its chunk's gradients are final (armed at another of its
// backwards) reduces a partial sum, and one never armed fails the trainer's check that every bucket
// completed. Every bucket of both chunks is started during the backward (the distributed optimizer's
// reduce-scatters too), and with opg every chunk's all-gathers are left in flight for the next forward.
TEST(InterleavedTrainer, OverlapsEachChunksBucketsWithItsLastBackward) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (world != 4) GTEST_SKIP() << "dp 2 x pp 2 (4 ranks)";
  for (const int64_t global_batch : {4, 8}) {
    double expected = 0.0;
    if (rank == 0) {
      Trainer single(interleaved_options(PrecisionName::kFp32, 1, 1, 1, 1, 4, global_batch), MPI_COMM_SELF);
      single.step(0);
      expected = single.gradient_sum_of_squares();
    }
    MPI_Bcast(&expected, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    ASSERT_GT(expected, 0.0);
    // fp32 summation order: about 1e-7 relative; a partial bucket: a large fraction of it.
    EXPECT_NEAR(first_step_gradient_sum_of_squares(
                    interleaved_options(PrecisionName::kFp32, 2, 1, 2, 2, 4, global_batch, kOverlappedReduction)),
                expected, 1e-5 * expected)
        << "global batch " << global_batch;
    for (const Techniques techniques : {kOverlappedReduction, kDistributedOverlap, kOverlappedGather}) {
      Trainer trainer(interleaved_options(PrecisionName::kFp32, 2, 1, 2, 2, 4, global_batch, techniques), MPI_COMM_WORLD);
      for (int step = 0; step < 2; ++step) {
        trainer.step(step);
        EXPECT_GT(trainer.gradient_bucket_count(), 4) << "techniques" << name_of(techniques);  // two chunks, several each
        EXPECT_EQ(trainer.overlapped_buckets_started(), trainer.gradient_bucket_count())
            << "techniques" << name_of(techniques) << " global batch " << global_batch << " step " << step;
        EXPECT_EQ(trainer.parameter_gathers_in_flight(),
                  techniques.overlap_parameter_gather ? trainer.gradient_bucket_count() : 0)
            << "techniques" << name_of(techniques) << " global batch " << global_batch << " step " << step;
      }
      trainer.parameter_sum_of_squares();
      EXPECT_EQ(trainer.parameter_gathers_in_flight(), 0) << "techniques" << name_of(techniques);
    }
  }
}

TEST(InterleavedTrainer, RefusesWhatItCannotRun) {
  TrainerOptions accepted = interleaved_options(PrecisionName::kFp32, 1, 1, 2, 2, 4, 4);
  EXPECT_NO_THROW(check_trainable(accepted, 2));
  TrainerOptions options = accepted;
  options.config.vp = 0;
  EXPECT_THROW(check_trainable(options, 2), UserError);
  options = interleaved_options(PrecisionName::kFp32, 2, 1, 1, 2, 4, 4);  // pp 1
  EXPECT_THROW(check_trainable(options, 2), UserError);
  options = interleaved_options(PrecisionName::kFp32, 1, 1, 4, 2, 4, 4);  // 8 chunks of 4 layers
  EXPECT_THROW(check_trainable(options, 4), UserError);
  options = interleaved_options(PrecisionName::kFp32, 1, 1, 2, 3, 4, 4);  // 6 chunks of 4 layers
  EXPECT_THROW(check_trainable(options, 2), UserError);
  options = interleaved_options(PrecisionName::kFp32, 1, 1, 2, 2, 4, 6);  // m = 6 is fine at pp 2...
  EXPECT_NO_THROW(check_trainable(options, 2));
  options = interleaved_options(PrecisionName::kFp32, 1, 1, 2, 2, 4, 3);  // ...m = 3 is not
  EXPECT_THROW(check_trainable(options, 2), UserError);
  options = interleaved_options(PrecisionName::kFp32, 2, 1, 2, 2, 4, 4, kOverlappedReduction);  // ovl at dp 2: per chunk
  EXPECT_NO_THROW(check_trainable(options, 4));
  options = interleaved_options(PrecisionName::kFp32, 1, 1, 2, 2, 4, 4, kOverlappedReduction);  // ovl is off at dp 1
  EXPECT_NO_THROW(check_trainable(options, 2));
  options = interleaved_options(PrecisionName::kFp32, 2, 1, 2, 2, 4, 4, kOverlappedGather);  // opg (with ovl) at dp 2
  EXPECT_NO_THROW(check_trainable(options, 4));
  options = interleaved_options(PrecisionName::kFp32, 1, 1, 2, 2, 4, 4, kOverlappedGather);  // dropped at dp 1
  EXPECT_NO_THROW(check_trainable(options, 2));
  options = accepted;
  options.backend = Backend::kCuda;  // the interleaved P2P is MPI's (or no CUDA here at all)
  EXPECT_THROW(check_trainable(options, 2), UserError);
  // the non-interleaved schedule keeps its own rules: m need not be a multiple of pp
  options = interleaved_options(PrecisionName::kFp32, 1, 1, 2, 1, 4, 3);
  EXPECT_NO_THROW(check_trainable(options, 2));
}

// ---- context parallelism ----

// Megatron's load balancing: CP rank i holds chunks i and 2cp-1-i of 2cp, in that order.
TEST(ContextParallel, EachRankHoldsTwoMirroredChunks) {
  const auto positions = [](int64_t seq, int cp, int rank) {
    const torch::Tensor p = context_parallel_positions(seq, cp, rank);
    return std::vector<int64_t>(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
  };
  EXPECT_EQ(positions(8, 2, 0), (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(positions(8, 2, 1), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(positions(16, 4, 3), (std::vector<int64_t>{6, 7, 8, 9}));
  EXPECT_EQ(positions(16, 4, 0), (std::vector<int64_t>{0, 1, 14, 15}));
  EXPECT_EQ(positions(6, 1, 0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  const torch::Tensor keys = context_parallel_key_positions(8, 2);
  EXPECT_EQ(std::vector<int64_t>(keys.data_ptr<int64_t>(), keys.data_ptr<int64_t>() + keys.numel()),
            (std::vector<int64_t>{0, 1, 6, 7, 2, 3, 4, 5}));
  // Every position once over the CP ranks, and as many causal (query, key) pairs on each rank.
  for (const int cp : {2, 4}) {
    const int64_t seq = 32;
    std::vector<int> seen(seq, 0);
    std::vector<int64_t> pairs;
    for (int rank = 0; rank < cp; ++rank) {
      int64_t visible = 0;
      for (int64_t p : positions(seq, cp, rank)) {
        ++seen[static_cast<std::size_t>(p)];
        visible += p + 1;
      }
      pairs.push_back(visible);
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), seq) << "cp " << cp;
    EXPECT_EQ(std::count(pairs.begin(), pairs.end(), pairs.front()), cp) << "cp " << cp << ": unbalanced causal work";
  }
}

// cp ranks of a (dp, tp, pp, cp, vp) layout (tiny-llama-gqa, 4 layers, 4 samples of 32 tokens: cp 4 holds
// 8 tokens per rank, two chunks of 4).
// The techniques run on the layouts marked `techniques` only (CI runs these on 2 cores): dp 2 (the
// reduction and shard over dp*cp = 4, overlapped reduction at dp 2), tp 2 (SP, the vocabulary-parallel
// head) and pp 2 vp 2 (the interleaved schedule).
struct CpLayout {
  int dp, tp, pp, cp, vp;
  bool techniques;
};

std::vector<CpLayout> cp_layouts(int world) {
  if (world == 2) return {{1, 1, 1, 2, 1, true}};
  if (world == 4) {
    return {{2, 1, 1, 2, 1, true}, {1, 2, 1, 2, 1, true}, {1, 1, 2, 2, 1, false}, {1, 1, 2, 2, 2, true}, {1, 1, 1, 4, 1, false}};
  }
  return {};
}

struct CpCase {
  PrecisionName precision;
  double tolerance;  // today's per precision (LayoutEquivalence)
  Techniques techniques = {};
  AttentionKernel attention = AttentionKernel::kEager;
};

class ContextParallelLayoutEquivalence : public ::testing::TestWithParam<CpCase> {};

// cp 2 at 2 ranks; at 4 ranks cp 2 with dp 2, tp 2, pp 2 and pp 2 vp 2, and cp 4: the losses of
// single-rank training. With techniques, the layouts marked for them, less those where a technique
// changes nothing (SP and the vocabulary-parallel head at tp 1); overlapped reduction with vp 2 at
// dp*cp 2 included (each chunk's buckets over the dp*cp ranks).
TEST_P(ContextParallelLayoutEquivalence, MatchesSingleRank) {
  const CpCase c = GetParam();
  const std::string lacking = lacks_on_cpu(c.precision, c.attention);
  if (!lacking.empty()) GTEST_SKIP() << lacking;
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (cp_layouts(world).empty()) GTEST_SKIP() << "context-parallel layouts at 2 and 4 ranks";
  const std::vector<double> expected = reference(c.precision, c.attention);
  const bool needs_tp = (c.techniques.sequence_parallel || c.techniques.vocab_parallel) && !c.techniques.distributed_optimizer;
  int layouts_run = 0;
  const bool any_technique = needs_tp || c.techniques.distributed_optimizer || c.techniques.recompute != Recompute::kNone ||
                             c.techniques.overlap_gradient_reduction;
  for (const CpLayout& l : cp_layouts(world)) {
    if (any_technique && !l.techniques) continue;
    if (needs_tp && l.tp == 1) continue;
    TrainerOptions options = options_for(c.precision, l.dp, l.tp, l.pp, c.attention, c.techniques);
    options.config.cp = l.cp;
    options.config.vp = l.vp;
    const std::vector<double> losses = train(options, MPI_COMM_WORLD);
    ++layouts_run;
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(losses[step], expected[step], c.tolerance)
          << "precision " << to_string(c.precision) << " attention " << to_string(c.attention) << " techniques"
          << name_of(c.techniques) << " layout (dp,tp,pp,cp,vp)=(" << l.dp << "," << l.tp << "," << l.pp << "," << l.cp << ","
          << l.vp << ") step " << step;
    }
  }
  if (layouts_run == 0) GTEST_SKIP() << "no layout of " << world << " ranks with tp > 1";
}

constexpr Techniques kSequenceAndVocabParallel{true, true, false};

INSTANTIATE_TEST_SUITE_P(
    Precisions, ContextParallelLayoutEquivalence,
    ::testing::Values(
        CpCase{PrecisionName::kFp32, 1e-4}, CpCase{PrecisionName::kBf16, 5e-2}, CpCase{PrecisionName::kAmpBf16, 2e-2},
        CpCase{PrecisionName::kFp32, 1e-4, {}, AttentionKernel::kSdpa},  // LibTorch 2.x
        CpCase{PrecisionName::kFp32, 1e-4, kSequenceAndVocabParallel}, CpCase{PrecisionName::kFp32, 1e-4, kDistributedOptimizer},
        CpCase{PrecisionName::kFp32, 1e-4, kSelectiveRecompute}, CpCase{PrecisionName::kFp32, 1e-4, kFullRecompute},
        CpCase{PrecisionName::kFp32, 1e-4, kOverlappedReduction}, CpCase{PrecisionName::kFp32, 1e-4, kDistributedOverlap},
        CpCase{PrecisionName::kFp32, 1e-4, kEverything}, CpCase{PrecisionName::kFp32, 1e-4, kOverlappedGather},
        CpCase{PrecisionName::kAmpBf16, 2e-2, kEverything}, CpCase{PrecisionName::kFp32, 1e-4, kAllTechniques}),
    [](const ::testing::TestParamInfo<CpCase>& param_info) {
      std::string name = to_string(param_info.param.precision) + "_" + to_string(param_info.param.attention) +
                         name_of(param_info.param.techniques);
      for (char& ch : name) ch = (ch == '-') ? '_' : ch;
      return name;
    });

// The reduced gradients of the first step are single-rank training's, whole model: each stage's sum of
// squares (the same on its dp*cp*tp ranks) summed over the world. AdamW hardly sees a gradient off by a
// constant factor (dividing by dp instead of dp*cp passes every loss above); this sees a factor 4.
TEST(ContextParallelTrainer, ReducesTheGradientsOfTheGlobalBatch) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (cp_layouts(world).empty()) GTEST_SKIP() << "context-parallel layouts at 2 and 4 ranks";
  for (const Techniques techniques : {Techniques{}, kOverlappedReduction, kFullRecompute}) {
    const double expected = single_rank_gradient_sum_of_squares(techniques);
    for (const CpLayout& l : cp_layouts(world)) {
      TrainerOptions options = options_for(PrecisionName::kFp32, l.dp, l.tp, l.pp, AttentionKernel::kEager, techniques);
      options.config.cp = l.cp;
      options.config.vp = l.vp;
      EXPECT_NEAR(first_step_gradient_sum_of_squares(options), expected, 1e-5 * expected)
          << "techniques" << name_of(techniques) << " layout (dp,tp,pp,cp,vp)=(" << l.dp << "," << l.tp << "," << l.pp << ","
          << l.cp << "," << l.vp << ")";
    }
  }
}

// The gradients are reduced, and the distributed optimizer's state sharded, over dp*cp ranks.
TEST(ContextParallelTrainer, ShardsTheOptimizerStateOverDpTimesCp) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 2 || world % 2 != 0) GTEST_SKIP() << "cp 2 needs an even world";
  TrainerOptions options = options_for(PrecisionName::kFp32, world / 2, 1, 1, AttentionKernel::kEager, kDistributedOptimizer);
  options.config.cp = 2;
  const Trainer trainer(options, MPI_COMM_WORLD);
  EXPECT_EQ(trainer.coords().cp_idx, [] {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank % 2;
  }());
  EXPECT_EQ(trainer.optimizer_parameter_count(), (trainer.local_parameter_count() + world - 1) / world);
}

TEST(ContextParallelTrainer, RefusesWhatItCannotRun) {
  TrainerOptions accepted = options_for(PrecisionName::kFp32, 1, 1, 1);
  accepted.config.cp = 2;
  EXPECT_NO_THROW(check_trainable(accepted, 2));
  TrainerOptions options = accepted;
  options.backend = Backend::kCuda;  // the CP all-gather is MPI's (or no CUDA here at all)
  EXPECT_THROW(check_trainable(options, 2), UserError);
  options = accepted;
  options.config.seq_len = 30;  // not a multiple of 2*cp = 4
  EXPECT_THROW(check_trainable(options, 2), UserError);
  // SP shards each CP rank's seq/cp tokens over TP: seq 36 at cp 2 is 18 tokens, not a multiple of tp 4...
  options = options_for(PrecisionName::kFp32, 1, 4, 1, AttentionKernel::kEager, kSequenceParallel);
  options.config.seq_len = 36;
  options.config.cp = 2;
  EXPECT_THROW(check_trainable(options, 8), UserError);
  options.config.cp = 1;  // ...while 36 is
  EXPECT_NO_THROW(check_trainable(options, 4));
  options.config.seq_len = 48;  // 24 tokens per CP rank: fine
  options.config.cp = 2;
  EXPECT_NO_THROW(check_trainable(options, 8));
  // The interleaved schedule with overlapped reduction at dp*cp > 1, as at dp > 1: trained (buckets per chunk).
  options = interleaved_options(PrecisionName::kFp32, 1, 1, 2, 2, 4, 4, kOverlappedReduction);
  options.config.cp = 2;
  EXPECT_NO_THROW(check_trainable(options, 4));
  options.techniques = {};
  EXPECT_NO_THROW(check_trainable(options, 4));
}

}  // namespace
}  // namespace itertime::calibrate
