// test_memory_model.cpp: the memory model against hand-computed figures for LLaMA 3.1-8B.
// Invariants: the model is read from data/models/llama3.1-8b.json; parameter, weight, gradient and
// optimizer figures are exact integers computed by hand in the comments; activation figures restate
// the formula of predict/memory_model.cpp numerically and check its proportionality.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "predict/memory_model.hpp"

namespace itertime::predict {
namespace {

LlamaSpec llama8b() { return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/llama3.1-8b.json"); }

ParallelConfig config(int dp, int tp, int pp, int mbs, int gbs, int seq) {
  ParallelConfig c;
  c.dp = dp;
  c.tp = tp;
  c.pp = pp;
  c.micro_batch = mbs;
  c.global_batch = gbs;
  c.seq_len = seq;
  return c;
}

const PrecisionPolicy& fp32() { return precision_policy(PrecisionName::kFp32); }
const PrecisionPolicy& amp_bf16() { return precision_policy(PrecisionName::kAmpBf16); }

TEST(MemoryModel, Llama8bSingleGpuFp32Persistent) {
  // 8,030,261,248 parameters (embedding + 32 layers + final norm + LM head), all on one GPU.
  const LlamaSpec model = llama8b();
  const MemoryBreakdown m = memory_per_gpu(model, config(1, 1, 1, 1, 1, 128), fp32(), 0);
  EXPECT_EQ(m.local_params, 8'030'261'248);
  EXPECT_EQ(m.local_params, model.total_params());
  EXPECT_EQ(m.weights_bytes, 8'030'261'248LL * 4);    // 32,121,044,992
  EXPECT_EQ(m.gradients_bytes, 8'030'261'248LL * 4);
  EXPECT_EQ(m.optimizer_bytes, 8'030'261'248LL * 8);  // 64,242,089,984
  EXPECT_EQ(m.dp_flat_buffer_bytes, 0);
  // Rotary tables: 32 layers * 2 * [128, 128] fp32 = 4,194,304.
  EXPECT_EQ(m.rotary_tables_bytes, 32 * 2 * 128 * 128 * 4);
  EXPECT_EQ(m.buffers_bytes, m.rotary_tables_bytes);
  // AdamW workspace: two temporaries of the embedding (128256 * 4096 fp32).
  EXPECT_EQ(m.optimizer_workspace_bytes, 2LL * 128256 * 4096 * 4);
  EXPECT_TRUE(m.exceeds(80e9));
  EXPECT_FALSE(m.exceeds(1e12));
}

TEST(MemoryModel, Llama8bSingleGpuFp32Activations) {
  // b=1, s=128, h=4096, 32 heads of 128, FFN 14336, V=128256, A=C=P=4, no autocast.
  //   norm    = (4+4)*b*s*h + 4*b*s                  = 8*524,288 + 512         = 4,194,816
  //   hidden  = 2*norm + 2*A*b*s*h                    = 8,389,632 + 4,194,304   = 12,583,936
  //   sharded = 4*C*b*s*4096 + 4*b*32*s*s + 4*C*b*s*14336
  //           = 8,388,608 + 2,097,152 + 29,360,128                            = 39,845,888
  //   fixed   = s*s (mask)                                                     = 16,384
  //   tokens  = 8*b*(s+1)                                                      = 1,032
  //   head    = norm + A*b*s*h + 4*b*s*V = 4,194,816 + 2,097,152 + 65,667,072 = 71,959,040
  //   per micro-batch = 32 * 52,446,208 + 1,032 + 71,959,040                  = 1,750,238,728
  const ActivationBreakdown a = activation_memory(llama8b(), config(1, 1, 1, 1, 1, 128), fp32(), 0);
  EXPECT_EQ(a.num_layers, 32);
  EXPECT_EQ(a.layer_hidden_bytes, 12'583'936);
  EXPECT_EQ(a.layer_sharded_bytes, 39'845'888);
  EXPECT_EQ(a.layer_fixed_bytes, 16'384);
  EXPECT_EQ(a.tokens_bytes, 1'032);
  EXPECT_EQ(a.head_bytes, 71'959'040);
  EXPECT_EQ(a.boundary_bytes, 0);
  EXPECT_EQ(a.autocast_weight_bytes, 0);
  EXPECT_EQ(a.per_micro_batch_bytes, 1'750'238'728);
  EXPECT_EQ(a.micro_batches_in_flight, 1);
  EXPECT_EQ(a.total_bytes, 1'750'238'728);
  const MemoryBreakdown m = memory_per_gpu(llama8b(), config(1, 1, 1, 1, 1, 128), fp32(), 0);
  EXPECT_EQ(m.activations_bytes, a.total_bytes);
  // Peak: persistent + rotary + flat buffer (0 at dp 1) + max(activations, AdamW workspace (4.2 GB)).
  EXPECT_EQ(m.total_bytes, m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.rotary_tables_bytes +
                               m.optimizer_workspace_bytes);
}

TEST(MemoryModel, Llama8bAmpBf16Activations) {
  // amp-bf16, b=1, s=128: A=4, C=2, P=4, autocast.
  //   hidden  = 2*norm + 5*C*b*s*h = 8,389,632 + 5,242,880                           = 13,632,512
  //   sharded = 4*2*b*s*4096 + 4*b*32*s*s + 2*b*32*s*s + 4*2*b*s*14336
  //           = 4,194,304 + 2,097,152 + 1,048,576 + 14,680,064                     = 22,020,096
  //   fixed   = s*s + 4*s*128*2 (rotary casts)                                      = 147,456
  //   autocast weights = 2 * (32 * 218,103,808 + 525,336,576)                       = 15,009,316,864
  const ActivationBreakdown a = activation_memory(llama8b(), config(1, 1, 1, 1, 1, 128), amp_bf16(), 0);
  EXPECT_EQ(a.layer_hidden_bytes, 13'632'512);
  EXPECT_EQ(a.layer_sharded_bytes, 22'020'096);
  EXPECT_EQ(a.layer_fixed_bytes, 147'456);
  EXPECT_EQ(a.autocast_weight_bytes, 15'009'316'864);
  EXPECT_EQ(a.per_micro_batch_bytes, 16'225'830'408);
}

TEST(MemoryModel, Llama8bAmpBf16SdpaKeepsNoScores) {
  // amp-bf16, b=1, s=4096 (where the scores dominate), 32 heads: sdpa keeps q, k, v, its output and an
  // fp32 log-sum-exp instead of the fp32 softmax output, its bf16 copy and the causal mask.
  //   eager sharded = 4*2*s*4096 + 4*32*s*s + 2*32*s*s + 4*2*s*14336
  //                 = 134,217,728 + 2,147,483,648 + 1,073,741,824 + 469,762,048 = 3,825,205,248
  //   sdpa sharded  = 4*2*s*4096 + 4*32*s + 4*2*s*14336
  //                 = 134,217,728 + 524,288 + 469,762,048                       = 604,504,064
  //   eager fixed   = s*s + 4*s*128*2 = 16,777,216 + 4,194,304 = 20,971,520; sdpa fixed = 4,194,304
  const ParallelConfig c = config(1, 1, 1, 1, 1, 4096);
  const ActivationBreakdown eager = activation_memory(llama8b(), c, amp_bf16(), 0, AttentionKernel::kEager);
  const ActivationBreakdown sdpa = activation_memory(llama8b(), c, amp_bf16(), 0, AttentionKernel::kSdpa);
  EXPECT_EQ(eager.layer_sharded_bytes, 3'825'205'248);
  EXPECT_EQ(eager.layer_scores_bytes, 3'221'225'472);
  EXPECT_EQ(sdpa.layer_sharded_bytes, 604'504'064);
  EXPECT_EQ(sdpa.layer_scores_bytes, 524'288);
  EXPECT_EQ(eager.layer_fixed_bytes, 20'971'520);
  EXPECT_EQ(sdpa.layer_fixed_bytes, 4'194'304);
  EXPECT_EQ(sdpa.layer_hidden_bytes, eager.layer_hidden_bytes);
  EXPECT_EQ(sdpa.head_bytes, eager.head_bytes);
  // Nothing else changes: the difference is exactly the per-layer scores and mask.
  EXPECT_EQ(eager.per_micro_batch_bytes - sdpa.per_micro_batch_bytes,
            32 * (3'825'205'248 - 604'504'064 + 20'971'520 - 4'194'304));
  EXPECT_THROW(activation_memory(llama8b(), c, amp_bf16(), 0, AttentionKernel::kAuto), UserError);
}

TEST(MemoryModel, Llama8bTp2Pp2AmpBf16Persistent) {
  // One layer on one TP rank of 2: q 4096*2048 = 8,388,608; k+v 2*4096*512 = 4,194,304;
  // o 8,388,608; gate+up+down 3*4096*7168 = 88,080,384; norms 8,192 => 109,060,096.
  // 16 layers per stage = 1,744,961,536. Embedding (replicated) 128256*4096 = 525,336,576.
  // Stage 0: 1,744,961,536 + 525,336,576 = 2,270,298,112 parameters.
  // Stage 1: 1,744,961,536 + 4,096 (final norm) + 525,336,576 (LM head) = 2,270,302,208.
  // amp-bf16 keeps fp32 master weights, fp32 gradients and fp32 moments.
  const LlamaSpec model = llama8b();
  const ParallelConfig c = config(1, 2, 2, 1, 8, 1024);
  const MemoryBreakdown s0 = memory_per_gpu(model, c, amp_bf16(), 0);
  const MemoryBreakdown s1 = memory_per_gpu(model, c, amp_bf16(), 1);
  EXPECT_EQ(s0.local_params, 2'270'298'112);
  EXPECT_EQ(s1.local_params, 2'270'302'208);
  EXPECT_EQ(s0.weights_bytes, 9'081'192'448);
  EXPECT_EQ(s0.gradients_bytes, 9'081'192'448);
  EXPECT_EQ(s0.optimizer_bytes, 18'162'384'896);
  EXPECT_EQ(s1.weights_bytes, 9'081'208'832);
  EXPECT_EQ(s1.gradients_bytes, 9'081'208'832);
  EXPECT_EQ(s1.optimizer_bytes, 18'162'417'664);
  // Summed over stages and TP ranks: every parameter once, plus the replicated embedding, LM head and
  // norms once more (tp=2): 8,030,261,248 + 2*525,336,576 + 4,096 + 32*8,192 = 9,081,200,640.
  EXPECT_EQ(2 * (s0.local_params + s1.local_params), 9'081'200'640);
  // dp=1: no flat buffer. dp=2: one copy of the gradients.
  EXPECT_EQ(s0.dp_flat_buffer_bytes, 0);
  const MemoryBreakdown dp2 = memory_per_gpu(model, config(2, 2, 2, 1, 8, 1024), amp_bf16(), 0);
  EXPECT_EQ(dp2.dp_flat_buffer_bytes, 9'081'192'448);
  EXPECT_EQ(dp2.buffers_bytes, dp2.dp_flat_buffer_bytes + dp2.rotary_tables_bytes);
}

TEST(MemoryModel, BfloatPolicyHalvesEveryPersistentPart) {
  const LlamaSpec model = llama8b();
  const ParallelConfig c = config(1, 1, 1, 1, 1, 128);
  const MemoryBreakdown full = memory_per_gpu(model, c, fp32(), 0);
  const MemoryBreakdown half = memory_per_gpu(model, c, precision_policy(PrecisionName::kBf16), 0);
  EXPECT_EQ(2 * half.weights_bytes, full.weights_bytes);
  EXPECT_EQ(2 * half.gradients_bytes, full.gradients_bytes);
  EXPECT_EQ(2 * half.optimizer_bytes, full.optimizer_bytes);
}

TEST(MemoryModel, DoublingMicroBatchDoublesActivations) {
  const LlamaSpec model = llama8b();
  for (const PrecisionPolicy* policy : {&fp32(), &amp_bf16(), &precision_policy(PrecisionName::kBf16)}) {
    for (int stage : {0, 1, 3}) {
      const ActivationBreakdown one = activation_memory(model, config(1, 2, 4, 1, 8, 512), *policy, stage);
      const ActivationBreakdown two = activation_memory(model, config(1, 2, 4, 2, 16, 512), *policy, stage);
      EXPECT_EQ(two.batch_scaled_bytes, 2 * one.batch_scaled_bytes) << to_string(policy->name) << stage;
      EXPECT_EQ(two.fixed_bytes, one.fixed_bytes);
      EXPECT_EQ(two.micro_batches_in_flight, one.micro_batches_in_flight);
      EXPECT_EQ(two.total_bytes, 2 * one.total_bytes - one.fixed_bytes * one.micro_batches_in_flight);
      if (!policy->autocast) {
        // Without autocast's weight copies the fixed part is the causal mask only (s*s bytes per
        // layer): the total doubles within 1%.
        EXPECT_NEAR(static_cast<double>(two.total_bytes), 2.0 * static_cast<double>(one.total_bytes),
                    1e-2 * static_cast<double>(two.total_bytes));
      }
    }
  }
}

TEST(MemoryModel, Tp2HalvesTheShardedParts) {
  const LlamaSpec model = llama8b();
  for (const PrecisionPolicy* policy : {&fp32(), &amp_bf16()}) {
    const ActivationBreakdown tp1 = activation_memory(model, config(1, 1, 2, 1, 4, 1024), *policy, 0);
    const ActivationBreakdown tp2 = activation_memory(model, config(1, 2, 2, 1, 4, 1024), *policy, 0);
    EXPECT_EQ(2 * tp2.layer_sharded_bytes, tp1.layer_sharded_bytes) << to_string(policy->name);
    EXPECT_EQ(tp2.layer_hidden_bytes, tp1.layer_hidden_bytes);
    EXPECT_EQ(tp2.layer_fixed_bytes, tp1.layer_fixed_bytes);
    EXPECT_EQ(tp2.boundary_bytes, tp1.boundary_bytes);
  }
  // Parameters: the layers halve, the embedding stays whole.
  const ParallelConfig tp1 = config(1, 1, 2, 1, 4, 1024);
  const ParallelConfig tp2 = config(1, 2, 2, 1, 4, 1024);
  const int64_t embedding = 128256LL * 4096;
  const int64_t norms = 16LL * 2 * 4096;
  EXPECT_EQ(2 * (stage_local_params(model, tp2, 0) - embedding - norms),
            stage_local_params(model, tp1, 0) - embedding - norms);
}

TEST(MemoryModel, MicroBatchesInFlightFollow1F1B) {
  const LlamaSpec model = llama8b();
  // pp=4, m=8: stage s holds min(4 - s, 8) micro-batches.
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(activation_memory(model, config(1, 1, 4, 1, 8, 256), fp32(), stage).micro_batches_in_flight, 4 - stage);
  }
  // m=2 < pp: stage 0 holds only 2.
  EXPECT_EQ(activation_memory(model, config(1, 1, 4, 1, 2, 256), fp32(), 0).micro_batches_in_flight, 2);
  EXPECT_EQ(activation_memory(model, config(1, 1, 4, 1, 2, 256), fp32(), 3).micro_batches_in_flight, 1);
  const ActivationBreakdown a = activation_memory(model, config(1, 1, 4, 1, 8, 256), fp32(), 1);
  EXPECT_EQ(a.total_bytes, 3 * a.per_micro_batch_bytes);
}

TEST(MemoryModel, StageBoundariesAndHeadTerms) {
  const LlamaSpec model = llama8b();
  const int64_t bsh = 1LL * 256 * 4096;
  // fp32 (A = 4): middle stages hold their output only (the input is the first norm's saved tensor).
  EXPECT_EQ(activation_memory(model, config(1, 1, 4, 1, 8, 256), fp32(), 1).boundary_bytes, 4 * bsh);
  EXPECT_EQ(activation_memory(model, config(1, 1, 4, 1, 8, 256), fp32(), 3).boundary_bytes, 0);
  // bf16 (A = 2): a middle stage also holds the received input.
  const PrecisionPolicy& bf16 = precision_policy(PrecisionName::kBf16);
  EXPECT_EQ(activation_memory(model, config(1, 1, 4, 1, 8, 256), bf16, 1).boundary_bytes, 2 * 2 * bsh);
  EXPECT_EQ(activation_memory(model, config(1, 1, 4, 1, 8, 256), bf16, 3).boundary_bytes, 2 * bsh);
  // Only the last stage carries the head (fp32 log-probabilities 4*b*s*V dominate it).
  EXPECT_EQ(activation_memory(model, config(1, 1, 4, 1, 8, 256), fp32(), 0).head_bytes, 0);
  EXPECT_GT(activation_memory(model, config(1, 1, 4, 1, 8, 256), fp32(), 3).head_bytes, 4LL * 256 * 128256);
  // Middle stages keep no token ids.
  EXPECT_EQ(activation_memory(model, config(1, 1, 4, 1, 8, 256), fp32(), 1).tokens_bytes, 0);
}

TEST(MemoryModel, FlatBufferIsKeptBesideTheActivations) {
  // dp=2: the trainer's flat gradient buffer (one gradient copy) is made at the first step and kept, so
  // from the second step on it is resident beside the activations (or the AdamW workspace).
  const MemoryBreakdown m = memory_per_gpu(llama8b(), config(2, 1, 1, 1, 2, 16), fp32(), 0);
  EXPECT_EQ(m.dp_flat_buffer_bytes, m.gradients_bytes);
  EXPECT_EQ(m.total_bytes, m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.rotary_tables_bytes +
                               m.dp_flat_buffer_bytes + std::max(m.activations_bytes, m.optimizer_workspace_bytes));
  const MemoryBreakdown dp1 = memory_per_gpu(llama8b(), config(1, 1, 1, 1, 2, 16), fp32(), 0);
  EXPECT_EQ(m.total_bytes - dp1.total_bytes, m.dp_flat_buffer_bytes) << "dp only adds the buffer here (same shapes)";
  EXPECT_FALSE(m.to_string().empty());
  EXPECT_EQ(memory_all_stages(llama8b(), config(1, 1, 4, 1, 8, 256), fp32()).size(), 4u);
}

TEST(MemoryModel, UserMistakesAreUserErrors) {
  LlamaSpec model = llama8b();
  EXPECT_THROW(memory_per_gpu(model, config(1, 1, 2, 1, 2, 128), fp32(), 2), UserError);
  EXPECT_THROW(memory_per_gpu(model, config(1, 1, 2, 1, 2, 128), fp32(), -1), UserError);
  EXPECT_THROW(memory_per_gpu(model, config(1, 3, 1, 1, 1, 128), fp32(), 0), UserError);  // 3 does not divide 32 heads
  model.tie_word_embeddings = true;
  EXPECT_THROW(memory_per_gpu(model, config(1, 1, 1, 1, 1, 128), fp32(), 0), UserError);
}

}  // namespace
}  // namespace itertime::predict
