// test_megatron_memory.cpp: the Megatron-Core + TE memory model (predict/framework/megatron_memory.hpp)
// against figures derived by hand for a toy model, every term on its own (each EXPECT_EQ fails if that term
// were dropped or doubled); the interleaved in-flight counts and bytes against walks of
// common/pipeline_order.hpp's order;
// and the comparison with Megatron-LM's theoretical formula (megatron_formula.hpp) for LLaMA 3.1 8B, 70B and
// 405B with NeMo's recipe layouts.
// Invariants: models from data/models/; the NeMo layouts are the defaults of nemo/collections/llm/recipes/
// llama3_8b.py, llama3_70b.py, llama31_405b.py trainer() (NeMo commit 8cfedd72, read for issue 32): no
// published step time or performance table was read. Every hand figure has its arithmetic beside it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/pipeline_order.hpp"
#include "predict/framework/framework_types.hpp"
#include "predict/framework/megatron_formula.hpp"
#include "predict/framework/megatron_layout_rules.hpp"
#include "predict/framework/megatron_memory.hpp"

namespace itertime::predict::framework {
namespace {

// h 64, SwiGLU ffn 96, 4 layers, 4 heads of 16 (q 64), 2 KV heads (kv 32), vocabulary 1000 (padded to a
// multiple of 128 * tp), untied, RMSNorm.
// TransformerShape's leading fields in order: name, hidden, ffn, layers, heads, kv_heads, head_dim, vocab.
TransformerShape toy() { return TransformerShape{"toy", 64, 96, 4, 4, 2, 16, 1000}; }

// ParallelConfig's fields in order: dp, tp, pp, micro_batch, global_batch, seq_len, cp, vp.
ParallelConfig layout(int dp, int tp, int pp, int cp, int vp, int mbs, int gbs, int seq) {
  return ParallelConfig{dp, tp, pp, mbs, gbs, seq, cp, vp};
}

FrameworkRecipe recipe(PrecisionName precision, bool sp, bool dopt, Recompute recompute) {
  FrameworkRecipe r;
  r.precision = precision;
  r.techniques.sequence_parallel = sp;
  r.techniques.distributed_optimizer = dopt;
  r.techniques.recompute = recompute;
  return r;
}

// The toy's base case: dp2 tp2 pp2, m = 8 / (2 * 1) = 4, seq 32, bf16, SP, distributed optimizer, selective.
ParallelConfig base_layout() { return layout(2, 2, 2, 1, 1, 1, 8, 32); }
FrameworkRecipe base_recipe() { return recipe(PrecisionName::kAmpBf16, true, true, Recompute::kSelective); }

// Parameters on one GPU at tp 2 (the vocabulary padded to 1024):
//   layer GEMMs: qkv (64 + 2*32) * 64 = 8192, proj 64 * 64 = 4096, fc1 (2*96) * 64 = 12288, fc2 64 * 96 = 6144:
//                30720 / tp 2 = 15360; + two RMSNorm weights 2 * 64 = 15488 per layer
//   embedding 1024 * 64 / 2 = 32768; head: output layer 32768 + final norm 64 = 32832
//   rank 0: 2 layers + embedding = 30976 + 32768 = 63744; rank 1: 30976 + 32832 = 63808
constexpr int64_t kRank0Params = 63744;
constexpr int64_t kRank1Params = 63808;
// Activations per micro-batch, T = 1 * 32 tokens, SP shards the residual stream over d = 2:
//   attention: norm input 2*32*64/2 = 2048, rsigma 4*32/2 = 64, qkv GEMM input 2048; the checkpoint's
//              rotary q and k and the value view, which keeps the whole fused QKV output:
//              2*32*(2*64 + 3*32)/2 = 7168; projection input 2*32*64/2 = 2048; = 13376
//   MLP: 2048 + 64 + 2048 + fc1 output 2*32*192/2 = 6144 + fc2 input 2*32*96/2 = 3072 = 13376
constexpr int64_t kLayerSelective = 26752;
constexpr int64_t kEmbedding = 8 * 32 + 32;                                 // int64 ids + the tp > 1 mask = 288
constexpr int64_t kHead = 2048 + 64 + 2048 + 4 * 32 * 1024 / 2 + 32 + 256;  // norm, output input, fp32 CE, mask, targets = 69984

TEST(MegatronMemory, PaddedVocabularyFollowsMegatron) {
  EXPECT_EQ(megatron_padded_vocab(1000, 2), 1024);
  EXPECT_EQ(megatron_padded_vocab(128256, 1), 128256);  // 1002 * 128
  EXPECT_EQ(megatron_padded_vocab(128256, 4), 128512);  // 251 * 512
  EXPECT_EQ(megatron_padded_vocab(128256, 8), 129024);  // 126 * 1024
}

TEST(MegatronMemory, ToyFirstRankEveryTerm) {
  const FrameworkMemory m = megatron_te_memory(toy(), base_layout(), base_recipe(), 0);
  EXPECT_EQ(m.pipeline_rank, 0);
  EXPECT_EQ(m.weights_bytes, 2 * kRank0Params);           // 127488
  EXPECT_EQ(m.main_grad_bytes, 4 * kRank0Params);         // 254976
  EXPECT_EQ(m.optimizer_bytes, 12 * (kRank0Params / 2));  // 12 x 31872, over dp*cp = 2
  EXPECT_EQ(m.fp8_bytes, 0);
  EXPECT_EQ(m.activations_bytes, 2 * (2 * kLayerSelective + kEmbedding));  // min(pp - 0, m) = 2 in flight: 107584
  EXPECT_EQ(m.other_bytes, 2 * 32 * 64 / 2 + 4 * 32 * 2);                  // recomputed attention output + lse = 2304
  EXPECT_EQ(m.total_bytes, 127488 + 254976 + 382464 + 107584 + 2304);
}

TEST(MegatronMemory, ToyLastRankHoldsTheHeadAndOneMicroBatch) {
  const FrameworkMemory m = megatron_te_memory(toy(), base_layout(), base_recipe(), 1);
  EXPECT_EQ(m.weights_bytes, 2 * kRank1Params);
  EXPECT_EQ(m.main_grad_bytes, 4 * kRank1Params);
  EXPECT_EQ(m.optimizer_bytes, 12 * (kRank1Params / 2));
  EXPECT_EQ(m.activations_bytes, 1 * (2 * kLayerSelective + kHead));  // min(pp - 1, m) = 1: 123488
  EXPECT_EQ(m.other_bytes, 2 * 32 * 1024 / 2);                        // bf16 logits beside the fp32 ones
  EXPECT_EQ(m.total_bytes, 2 * kRank1Params + 4 * kRank1Params + 12 * (kRank1Params / 2) + 123488 + 32768);
  EXPECT_EQ(megatron_te_peak_memory_bytes(toy(), base_layout(), base_recipe()),
            std::max(m.total_bytes, megatron_te_memory(toy(), base_layout(), base_recipe(), 0).total_bytes));
}

TEST(MegatronMemory, OptimizerWholeWithoutDistributedOptimizerShardedOverDpTimesCp) {
  FrameworkRecipe r = base_recipe();
  r.techniques.distributed_optimizer = false;
  EXPECT_EQ(megatron_te_memory(toy(), base_layout(), r, 0).optimizer_bytes, 12 * kRank0Params);
  // dp 2 x cp 2: 63744 / 4 = 15936 per rank; the sequence 32 / cp 2 = 16 tokens.
  const ParallelConfig cp2 = layout(2, 2, 2, 2, 1, 1, 8, 32);
  const FrameworkMemory m = megatron_te_memory(toy(), cp2, base_recipe(), 0);
  EXPECT_EQ(m.optimizer_bytes, 12 * 15936);
  EXPECT_EQ(m.weights_bytes, 2 * kRank0Params);  // parameters are not split by cp
  // Every activation is per token but the embedding's: half the tokens, half the bytes.
  EXPECT_EQ(m.activations_bytes, 2 * (2 * kLayerSelective / 2 + kEmbedding / 2));
}

TEST(MegatronMemory, Fp8CachesWeightsAndTransposesAndSavesFp8GemmInputs) {
  const FrameworkRecipe r = recipe(PrecisionName::kFp8, true, true, Recompute::kSelective);
  const FrameworkMemory m = megatron_te_memory(toy(), base_layout(), r, 0);
  // 2 layers x 15360 GEMM weights x (fp8 + transpose); scaling: 4 modules x 5 tensors x 4 B x (1024 + 2) per layer.
  EXPECT_EQ(m.fp8_bytes, 2 * 2 * 15360 + 2 * 4 * 5 * 4 * 1026);
  EXPECT_EQ(m.weights_bytes, 2 * kRank0Params);  // the bf16 parameters stay
  // GEMM inputs saved in fp8: attention 2048 + 64 + 1024 + 7168 + 1024 = 11328, MLP 2048 + 64 + 1024 + 6144 + 1536 = 10816.
  EXPECT_EQ(m.activations_bytes, 2 * (2 * (11328 + 10816) + kEmbedding));
  FrameworkRecipe current = r;
  current.fp8_recipe = Fp8Recipe::kCurrent;
  EXPECT_EQ(megatron_te_memory(toy(), base_layout(), current, 0).fp8_bytes, 2 * 2 * 15360 + 2 * 4 * 5 * 4 * 3);
  // --fp8-param-gather: the 30720 GEMM weights are fp8 parameters (1 B), the other 33024 stay bf16; only
  // the transposes are cached.
  FrameworkRecipe gather = r;
  gather.fp8_param_gather = true;
  const FrameworkMemory g = megatron_te_memory(toy(), base_layout(), gather, 0);
  EXPECT_EQ(g.weights_bytes, 2 * (kRank0Params - 2 * 15360) + 2 * 15360);
  EXPECT_EQ(g.fp8_bytes, 2 * 15360 + 2 * 4 * 5 * 4 * 1026);
  EXPECT_EQ(g.main_grad_bytes, m.main_grad_bytes);
  EXPECT_EQ(g.optimizer_bytes, m.optimizer_bytes);
  EXPECT_EQ(g.activations_bytes, m.activations_bytes);
  // Without fp8 the option changes nothing.
  FrameworkRecipe bf16_gather = base_recipe();
  bf16_gather.fp8_param_gather = true;
  EXPECT_EQ(megatron_te_memory(toy(), base_layout(), bf16_gather, 0).total_bytes,
            megatron_te_memory(toy(), base_layout(), base_recipe(), 0).total_bytes);
}

TEST(MegatronMemory, RecomputeAndSequenceParallelism) {
  // No recompute: TE saves contiguous q, k, v, 2*32*(64 + 2*32)/2 = 4096 (the QKV output is freed), the
  // attention's output (2048, also the projection's input) and its fp32 lse 4 * 32 * 2 heads = 256:
  // attention 4160 + 4096 + 2048 + 256 = 10560, MLP 13376.
  const FrameworkMemory none =
      megatron_te_memory(toy(), base_layout(), recipe(PrecisionName::kAmpBf16, true, true, Recompute::kNone), 0);
  EXPECT_EQ(none.activations_bytes, 2 * (2 * (10560 + 13376) + kEmbedding));
  EXPECT_EQ(none.other_bytes, 0);
  // Full: only each layer's input 2 * 32 * 64 / 2 = 2048; the backward rebuilds one layer, 23936.
  const FrameworkMemory full =
      megatron_te_memory(toy(), base_layout(), recipe(PrecisionName::kAmpBf16, true, true, Recompute::kFull), 0);
  EXPECT_EQ(full.activations_bytes, 2 * (2 * 2048 + kEmbedding));
  EXPECT_EQ(full.other_bytes, 10560 + 13376);
  // Without SP the residual stream is whole on every TP rank: attention 4096 + 128 + 4096 + 7168 + 2048 =
  // 17536, MLP 4096 + 128 + 4096 + 6144 + 3072 = 17536.
  const FrameworkMemory no_sp =
      megatron_te_memory(toy(), base_layout(), recipe(PrecisionName::kAmpBf16, false, true, Recompute::kSelective), 0);
  EXPECT_EQ(no_sp.activations_bytes, 2 * (2 * (17536 + 17536) + kEmbedding));
}

TEST(MegatronMemory, InterleavedCountsFromMegatronsWarmUp) {
  // vp 2 over pp 2: one layer per virtual stage; m = 4. Rank 0: warm-up (2-0-1)*2 + (2-1)*2 = 4, 5 forwards
  // before the first backward, chunks 0,0,1,1,0: 3 of chunk 0, 2 of chunk 1. Rank 1: warm-up 2, chunks 0,0,1.
  const ParallelConfig c = layout(2, 2, 2, 1, 2, 1, 8, 32);
  int64_t counts[2];
  megatron_chunk_micro_batches_in_flight(c, 0, counts);
  EXPECT_EQ(counts[0], 3);
  EXPECT_EQ(counts[1], 2);
  megatron_chunk_micro_batches_in_flight(c, 1, counts);
  EXPECT_EQ(counts[0], 2);
  EXPECT_EQ(counts[1], 1);
  // Rank 0 holds virtual stages 0 (embedding) and 2; rank 1 stages 1 and 3 (head). The bytes follow the
  // order: rank 0 forwards chunks 0,0,1,1 (warm-up), then forward 4 (chunk 0: 3 + 2 in flight), backward 0
  // (chunk 1), forward 5 (chunk 0): 4 of chunk 0 (with the embedding) and 1 of chunk 1, 288 B more.
  const FrameworkMemory m0 = megatron_te_memory(toy(), c, base_recipe(), 0);
  EXPECT_EQ(m0.activations_bytes, 4 * (kLayerSelective + kEmbedding) + 1 * kLayerSelective);
  EXPECT_EQ(m0.weights_bytes, 2 * kRank0Params);  // the same layers and embedding as without interleaving
  // Rank 1: warm-up chunks 0,0, then forward 2 (chunk 1, the head) before backward 0 frees it; the head's
  // chunk never has two micro-batches in flight.
  const FrameworkMemory m1 = megatron_te_memory(toy(), c, base_recipe(), 1);
  EXPECT_EQ(m1.activations_bytes, 2 * kLayerSelective + 1 * (kLayerSelective + kHead));
}

TEST(MegatronMemory, InFlightCountsAreThePeakOfThePipelineOrder) {
  for (int pp : {2, 3, 4, 8}) {
    for (int vp : {1, 2, 3, 5}) {
      for (int mult : {1, 2, 3}) {
        const int m = pp * mult;
        const ParallelConfig c = layout(1, 1, pp, 1, vp, 1, m, 64);
        for (int rank = 0; rank < pp; ++rank) {
          int64_t counts[8];
          megatron_chunk_micro_batches_in_flight(c, rank, counts);
          std::vector<int64_t> live(static_cast<std::size_t>(vp), 0), at_peak = live;
          int64_t now = 0, peak = 0;
          for (const PipelinePass& pass : interleaved_passes(pp, rank, m, vp)) {
            const auto chunk = static_cast<std::size_t>(pass.chunk);
            if (pass.kind == PipelinePassKind::kForward) {
              ++live[chunk];
              if (++now > peak) {
                peak = now;
                at_peak = live;
              }
            } else {
              --live[chunk];
              --now;
            }
          }
          for (int chunk = 0; chunk < vp; ++chunk) {
            EXPECT_EQ(counts[chunk], at_peak[static_cast<std::size_t>(chunk)])
                << "pp " << pp << " vp " << vp << " m " << m << " rank " << rank << " chunk " << chunk;
          }
        }
      }
    }
  }
}

// The activations with vp > 1 against a walk of the whole interleaved order (common/pipeline_order.hpp)
// weighting each pass by its virtual stage's bytes: even splits, the account_for split, uneven ones.
TEST(MegatronMemory, InterleavedActivationsAreTheWalkedPeak) {
  for (int pp : {2, 3, 4}) {
    for (int vp : {2, 3}) {
      for (int64_t layers : {int64_t{pp} * vp, int64_t{pp} * vp * 2 - 2, int64_t{pp} * vp * 2 - 1, int64_t{pp} * vp + 1}) {
        for (int mult : {1, 2}) {
          TransformerShape shape = toy();
          shape.layers = layers;
          const int m = pp * mult;
          const ParallelConfig c = layout(2, 2, pp, 1, vp, 1, 2 * m, 32);
          if (!layout_violations(shape, c).empty()) {  // a split Megatron-LM refuses (megatron_layout_rules.hpp)
            EXPECT_THROW(megatron_te_memory(shape, c, base_recipe(), 0), UserError) << "layers " << layers;
            continue;
          }
          const std::vector<VirtualStageLayers> stages = megatron_virtual_stage_layers(layers, pp, vp);
          for (int rank = 0; rank < pp; ++rank) {
            int64_t now = 0, peak = 0;
            for (const PipelinePass& pass : interleaved_passes(pp, rank, m, vp)) {
              const VirtualStageLayers& v = stages[static_cast<std::size_t>(pass.chunk * pp + rank)];
              const int64_t bytes =
                  v.num_layers * kLayerSelective + (v.has_embedding ? kEmbedding : 0) + (v.has_head ? kHead : 0);
              now += pass.kind == PipelinePassKind::kForward ? bytes : -bytes;
              peak = std::max(peak, now);
            }
            EXPECT_EQ(megatron_te_memory(shape, c, base_recipe(), rank).activations_bytes, peak)
                << "pp " << pp << " vp " << vp << " layers " << layers << " m " << m << " rank " << rank;
          }
        }
      }
    }
  }
}

// The same walk with Megatron's uneven first / last ranks (--decoder-first/last-pipeline-num-layers 2 of 8
// layers over pp 3 vp 2: chunks of 1, 2 and 1 layers), where the chunks differ in bytes.
TEST(MegatronMemory, InterleavedActivationsWithFirstAndLastRankLayers) {
  TransformerShape shape = toy();
  shape.layers = 8;
  FrameworkRecipe r = base_recipe();
  r.pipeline_split.given = true;
  r.pipeline_split.first_stage_layers = 2;
  r.pipeline_split.last_stage_layers = 2;
  for (int m : {3, 6}) {
    const ParallelConfig c = layout(2, 2, 3, 1, 2, 1, 2 * m, 32);
    const std::vector<VirtualStageLayers> stages = megatron_virtual_stage_layers(8, 3, 2, r.pipeline_split);
    ASSERT_EQ(stages[0].num_layers, 1);
    ASSERT_EQ(stages[1].num_layers, 2);
    ASSERT_EQ(stages[2].num_layers, 1);
    for (int rank = 0; rank < 3; ++rank) {
      int64_t now = 0, peak = 0;
      for (const PipelinePass& pass : interleaved_passes(3, rank, m, 2)) {
        const VirtualStageLayers& v = stages[static_cast<std::size_t>(pass.chunk * 3 + rank)];
        const int64_t bytes = v.num_layers * kLayerSelective + (v.has_embedding ? kEmbedding : 0) + (v.has_head ? kHead : 0);
        now += pass.kind == PipelinePassKind::kForward ? bytes : -bytes;
        peak = std::max(peak, now);
      }
      EXPECT_EQ(megatron_te_memory(shape, c, r, rank).activations_bytes, peak) << "m " << m << " rank " << rank;
    }
  }
}

TEST(MegatronMemory, VirtualStageLayers) {
  // Even; Megatron's account_for_embedding/loss split (NeMo 405B: 126 + 2 = 128 over 16); else refused.
  auto v = megatron_virtual_stage_layers(126, 8, 2);
  ASSERT_EQ(v.size(), 16u);
  EXPECT_EQ(v[0].num_layers, 7);
  EXPECT_EQ(v[1].num_layers, 8);
  EXPECT_EQ(v[15].num_layers, 7);
  EXPECT_TRUE(v[0].has_embedding);
  EXPECT_TRUE(v[15].has_head);
  v = megatron_virtual_stage_layers(80, 4, 5);
  for (const auto& s : v) EXPECT_EQ(s.num_layers, 4);
  // 7 layers over pp 2: neither 7 nor 9 splits; Megatron-LM refuses it, so does the split (issue 44).
  EXPECT_THROW(megatron_virtual_stage_layers(7, 2, 1), UserError);
}

TEST(MegatronMemory, RefusesWhatMegatronRefuses) {
  EXPECT_THROW(megatron_te_memory(toy(), base_layout(), recipe(PrecisionName::kFp32, true, true, Recompute::kNone), 0),
               UserError);
  EXPECT_THROW(megatron_te_memory(toy(), base_layout(), base_recipe(), 2), UserError);
  EXPECT_THROW(megatron_te_memory(toy(), layout(1, 8, 1, 1, 1, 1, 8, 32), base_recipe(), 0), UserError);  // 4 heads over tp 8
  EXPECT_THROW(megatron_te_memory(toy(), layout(1, 1, 2, 1, 2, 1, 3, 32), base_recipe(), 0),
               UserError);  // m 3 not a multiple of pp
  EXPECT_THROW(megatron_te_memory(toy(), layout(1, 1, 4, 1, 2, 1, 8, 32), base_recipe(), 0), UserError);  // 4 layers, 8 stages
}

// --- The formula, by hand on the toy (theoretical_memory_usage.py): parameters of the most loaded shard
// = ((qkv+proj 2*64*64*(1 + 2/4) = 12288, + MLP 2*64*96*1.5 = 18432) * 4 layers / pp 2 + embedding 1024*64)
// / tp 2 + (norms 2*64 * 4 + final 64) / 2 = (61440 + 65536) / 2 + 288 = 63776; bytes 6 + 12 / dp 2 = 12.
// Activations (SP branch): 32 * 64 * (18 + 4 * 96/64) = 49152 per layer, * 4 layers = 196608, + 8*32*2 =
// 512, + 32*64*2 = 4096 = 201216, * min(1, 4 / 2) = 201216, / tp 2 = 100608.
TEST(MegatronFormula, ToyByHand) {
  const MegatronFormulaMemory f = megatron_formula_memory(toy(), base_layout(), base_recipe());
  EXPECT_TRUE(f.sequence_parallel_branch);
  EXPECT_DOUBLE_EQ(f.parameters_on_most_loaded_shard, 63776.0);
  EXPECT_DOUBLE_EQ(f.weight_and_optimizer_bytes, 63776.0 * 12.0);
  EXPECT_DOUBLE_EQ(f.activation_bytes, 100608.0);
  EXPECT_DOUBLE_EQ(f.total_bytes, 63776.0 * 12.0 + 100608.0);
  // Without SP (or recompute): 32*64*(10 + 24/2) = 45056 per layer, *4 + 512 + 4096 = 184832, * 1.05.
  const MegatronFormulaMemory g =
      megatron_formula_memory(toy(), base_layout(), recipe(PrecisionName::kAmpBf16, false, true, Recompute::kSelective));
  EXPECT_FALSE(g.sequence_parallel_branch);
  EXPECT_DOUBLE_EQ(g.activation_bytes, 184832.0 * 1.05);
  // Interleaving vp 2: penalty 1 + (2-1)/(2*2) = 1.25 on the SP branch, no m/pp discount.
  const MegatronFormulaMemory i = megatron_formula_memory(toy(), layout(2, 2, 2, 1, 2, 1, 8, 32), base_recipe());
  EXPECT_DOUBLE_EQ(i.activation_bytes, 201216.0 * 1.25 / 2.0);
  // cp: the literal formula ignores it; the cp-aware reading halves the sequence and shards over dp*cp = 4.
  const ParallelConfig cp2 = layout(2, 2, 2, 2, 1, 1, 8, 32);
  EXPECT_DOUBLE_EQ(megatron_formula_memory(toy(), cp2, base_recipe()).total_bytes, f.total_bytes);
  const MegatronFormulaMemory a = megatron_formula_memory(toy(), cp2, base_recipe(), FormulaReading::kContextParallelAware);
  EXPECT_DOUBLE_EQ(a.weight_and_optimizer_bytes, 63776.0 * 9.0);
  EXPECT_DOUBLE_EQ(a.activation_bytes, (16 * 64 * (18 + 6) * 4 + 8 * 16 * 2 + 16 * 64 * 2) / 2.0);
}

// --- LLaMA 3.1 with NeMo's layouts (trainer() defaults of the recipes; seq 8192, mbs 1, gbs 512, distributed
// optimizer from distributed_fused_adam_with_cosine_annealing):
//   8B   llama3_8b.py    tp1 pp1 cp2 vp1, 1 node x 8 GPUs  -> dp 4 (SP off: tp 1)
//   70B  llama3_70b.py   tp4 pp4 cp2 vp5, 4 nodes          -> dp 1, SP
//   405B llama31_405b.py tp8 pp8 cp4 vp2, 64 nodes         -> dp 2, SP, account_for_embedding/loss split
// Compared within the formula's assumptions (bf16, SP where tp > 1, selective recompute, distributed
// optimizer) with the context-parallel-aware reading: the formula has no cp (literally it counts the whole
// 8192-token sequence on each rank and shards the optimizer over dp only, the "literal" column, 37-141% above
// ours; that is the formula's blind spot, not a difference of model). The same layouts at cp 1 (cp folded
// into dp) compare with the formula itself. Every difference found, and why (totals within +-6%):
//  - Model state (weights, fp32 gradients, optimizer): equal to the byte where the busiest rank is the
//    first (8B, 70B): same parameter counts, 2 + 4 + 12 / (dp * cp) B each. 405B: our busiest rank is a
//    middle one (16 layers, no embedding: 44.53 GiB); the formula's most loaded shard is the first stage
//    with 126 / 8 = 15.75 layers + the embedding (45.68 GiB): -2.5%. NeMo's account_for_embedding/loss
//    split puts 7 + 8 layers on the first rank, which the formula does not know.
//  - Activations per layer and token (bytes x tp): the formula's Table 2 has 18 h + 4 ffn (GPT attention,
//    a 2-GEMM MLP with dropout masks). TE's LLaMA layer: norm input + rsigma + normalized input twice (4 h),
//    rotary q and k beside the whole fused QKV output the value is a view of (2 (2 q + 3 kv)), the
//    projection's input (2 q), SwiGLU's fc1 output 4 ffn and fc2's input 2 ffn, no dropout masks:
//    8B 149,512 B (formula SP branch 131,072: +14.1%), 70B 292,872 (262,144: +11.7%), 405B 555,016
//    (507,904: +9.3%). The 8B layout (tp 1, where Megatron turns SP off) takes the formula's
//    without-SP branch, 34 h x 1.05 = 146,227 B: +2.2%.
//  - Micro-batches in flight: the same as the formula's interleaving penalty for an even split (70B: 23
//    chunk-micro-batches of 4 layers = 92 = 80 x 1.15). 405B: with the account_for split the busiest rank
//    holds 13 micro-batches of an 8-layer chunk and 8 of another, 168 layer-micro-batches, against
//    126 x 1.4375 = 181.1: -7%, which with +9.3% per layer leaves its activations +1%.
//  - Head (8B, pp 1 only): we keep the fused cross-entropy's fp32 exp-logits (4 B per logit, 1.96 GiB)
//    and count the bf16 logits' transient (0.98 GiB, other_bytes); the formula's without-SP branch counts
//    2 B per logit (1.06 GiB with its 1.05): +1.9 GiB, most of 8B's +3.1%.
struct LlamaRow {
  const char* file;
  ParallelConfig layout;
};

std::vector<LlamaRow> nemo_rows() {
  return {{"llama3.1-8b.json", layout(4, 1, 1, 2, 1, 1, 512, 8192)},
          {"llama3.1-70b.json", layout(1, 4, 4, 2, 5, 1, 512, 8192)},
          {"llama3.1-405b.json", layout(2, 8, 8, 4, 2, 1, 512, 8192)}};
}

TransformerShape llama(const char* file) {
  return shape_of(load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/" + file));
}

double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

// Our busiest rank: its total, and its model state (weights, gradients, optimizer, fp8) beside its activations
// (activations + other), to set against the formula's two parts.
FrameworkMemory busiest_rank(const TransformerShape& shape, const ParallelConfig& c, const FrameworkRecipe& r) {
  FrameworkMemory best;
  for (int rank = 0; rank < c.pp; ++rank) {
    const FrameworkMemory m = megatron_te_memory(shape, c, r, rank);
    if (m.total_bytes >= best.total_bytes) best = m;
  }
  return best;
}

void compare_row(const TransformerShape& shape, const ParallelConfig& c, const FrameworkRecipe& r, FormulaReading reading,
                 bool print_literal) {
  const FrameworkMemory ours = busiest_rank(shape, c, r);
  EXPECT_EQ(ours.total_bytes, megatron_te_peak_memory_bytes(shape, c, r));
  const MegatronFormulaMemory f = megatron_formula_memory(shape, c, r, reading);
  const double total = static_cast<double>(ours.total_bytes);
  const double state = static_cast<double>(ours.weights_bytes + ours.main_grad_bytes + ours.optimizer_bytes + ours.fp8_bytes);
  const double diff = (total - f.total_bytes) / f.total_bytes;
  std::printf("%-13s %-22s %4d %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f | %+6.1f%%", shape.name.c_str(), c.layout_text().c_str(),
              ours.pipeline_rank, gib(total), gib(state), gib(total - state), gib(f.total_bytes),
              gib(f.weight_and_optimizer_bytes), gib(f.activation_bytes), 100.0 * diff);
  if (print_literal) std::printf("   %8.2f", gib(megatron_formula_memory(shape, c, r).total_bytes));
  std::printf("\n");
  EXPECT_LT(std::abs(diff), 0.10) << shape.name << " " << c.to_string();
}

TEST(MegatronFormula, LlamaWithNemoLayoutsWithinTenPercent) {
  const FrameworkRecipe r = base_recipe();  // bf16, SP, distributed optimizer, selective recompute
  std::printf("%-13s %-22s %4s %8s %8s %8s | %8s %8s %8s | %7s   %8s\n", "model", "layout", "rank", "ours", "state", "acts",
              "formula", "w+opt", "acts", "diff", "literal");
  for (const LlamaRow& row : nemo_rows()) {
    const TransformerShape shape = llama(row.file);
    compare_row(shape, row.layout, r, FormulaReading::kContextParallelAware, true);
    // The same layouts at cp 1 (cp folded into dp), where both readings are the formula itself.
    ParallelConfig no_cp = row.layout;
    no_cp.dp *= no_cp.cp;
    no_cp.cp = 1;
    EXPECT_DOUBLE_EQ(megatron_formula_memory(shape, no_cp, r).total_bytes,
                     megatron_formula_memory(shape, no_cp, r, FormulaReading::kContextParallelAware).total_bytes);
    compare_row(shape, no_cp, r, FormulaReading::kLiteral, false);
  }
}

// NeMo's recipes as they run (8B: no SP at tp 1 and no recompute; 70B, 405B: SP, no recompute), bf16 and
// fp8 (TE delayed scaling) with bf16 parameters (Megatron's default) and with fp8 parameters
// (--fp8-param-gather, which NeMo's bf16_with_fp8_mixed sets), against an 80 GB H100's 81,559 MiB.
TEST(MegatronMemory, LlamaNemoLayoutsPeakPerGpu) {
  constexpr double kH100Bytes = 81559.0 * 1024 * 1024;
  std::printf("%-13s %-22s %8s %5s %8s %5s %12s %5s   busiest rank (bf16)\n", "model", "layout", "bf16 GiB", "fits", "fp8 GiB",
              "fits", "fp8+pg GiB", "fits");
  for (const LlamaRow& row : nemo_rows()) {
    const TransformerShape shape = llama(row.file);
    const FrameworkRecipe bf16 = recipe(PrecisionName::kAmpBf16, row.layout.tp > 1, true, Recompute::kNone);
    FrameworkRecipe fp8 = bf16;
    fp8.precision = PrecisionName::kFp8;
    const int64_t peak_bf16 = megatron_te_peak_memory_bytes(shape, row.layout, bf16);
    const int64_t peak_fp8 = megatron_te_peak_memory_bytes(shape, row.layout, fp8);
    FrameworkRecipe gather = fp8;
    gather.fp8_param_gather = true;
    const int64_t peak_fp8_gather = megatron_te_peak_memory_bytes(shape, row.layout, gather);
    FrameworkMemory busiest;
    for (int r = 0; r < row.layout.pp; ++r) {
      const FrameworkMemory m = megatron_te_memory(shape, row.layout, bf16, r);
      if (m.total_bytes >= busiest.total_bytes) busiest = m;
    }
    EXPECT_EQ(busiest.total_bytes, peak_bf16);
    EXPECT_GT(peak_fp8, peak_bf16);         // the fp8 weight caches outweigh the fp8 GEMM inputs saved
    EXPECT_LT(peak_fp8_gather, peak_bf16);  // fp8 parameters: 2 B per GEMM weight instead of 2 + 2
    auto fits = [&](int64_t bytes) { return static_cast<double>(bytes) <= kH100Bytes ? "yes" : "no"; };
    std::printf("%-13s %-22s %8.2f %5s %8.2f %5s %12.2f %5s   %s\n", shape.name.c_str(), row.layout.layout_text().c_str(),
                gib(static_cast<double>(peak_bf16)), fits(peak_bf16), gib(static_cast<double>(peak_fp8)), fits(peak_fp8),
                gib(static_cast<double>(peak_fp8_gather)), fits(peak_fp8_gather), busiest.to_string().c_str());
  }
}

}  // namespace
}  // namespace itertime::predict::framework
