// test_memory_model.cpp: the memory model against hand-computed figures for LLaMA 3.1-8B, and for
// interleaved 1F1B (vp 2) on the tiny model.
// Invariants: the models are read from data/models/llama3.1-8b.json and tiny-llama-gqa.json; parameter,
// weight, gradient and optimizer figures are exact integers computed by hand in the comments; activation
// figures restate the formula of predict/memory/memory_model.cpp numerically and check its proportionality; the
// interleaved in-flight counts are derived by hand from common/pipeline_order.hpp's order.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/pipeline_order.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "predict/memory/memory_model.hpp"

namespace itertime::predict {
namespace {

LlamaSpec llama8b() { return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/llama3.1-8b.json"); }

// cp and vp 1 (ParallelConfig's fields in order).
ParallelConfig config(int dp, int tp, int pp, int mbs, int gbs, int seq) {
  return ParallelConfig{dp, tp, pp, mbs, gbs, seq, 1, 1};
}

const PrecisionPolicy& fp32() { return precision_policy(PrecisionName::kFp32); }
const PrecisionPolicy& amp_bf16() { return precision_policy(PrecisionName::kAmpBf16); }

TEST(MemoryModel, Llama8bSingleGpuFp32Persistent) {
  // 8,030,261,248 parameters (embedding + 32 layers + final norm + LM head), all on one GPU.
  const LlamaSpec model = llama8b();
  const MemoryBreakdown m = memory_per_gpu(model, config(1, 1, 1, 1, 1, 128), fp32(), 0);
  EXPECT_EQ(m.local_params, 8'030'261'248);
  EXPECT_EQ(m.local_params, model.total_params());
  EXPECT_EQ(m.weights_bytes, 8'030'261'248LL * 4);  // 32,121,044,992
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
  EXPECT_EQ(m.total_bytes,
            m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.rotary_tables_bytes + m.optimizer_workspace_bytes);
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
  EXPECT_EQ(2 * (stage_local_params(model, tp2, 0) - embedding - norms), stage_local_params(model, tp1, 0) - embedding - norms);
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

// ---- interleaved 1F1B (vp 2) on the tiny model ----
// tiny-llama-gqa: h 128, FFN 352, 4 layers, 8 heads of 16 (4 KV heads), V 512, untied.
LlamaSpec tiny() { return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json"); }

// tp and cp 1.
ParallelConfig interleaved(int dp, int pp, int vp, int mbs, int gbs, int seq) {
  return ParallelConfig{dp, 1, pp, mbs, gbs, seq, 1, vp};
}

// Both ranks of the tiny model at pp 2, vp 2 (one layer a chunk), dp 1, mbs 2, seq 64, fp32, global batch
// `gbs` (m = gbs / 2): the model, the layout and each rank's activations.
struct Pp2V2 {
  LlamaSpec model;
  ParallelConfig config;
  ActivationBreakdown rank0, rank1;
};
Pp2V2 pp2_v2(int gbs) {
  const LlamaSpec model = tiny();
  const ParallelConfig c = interleaved(1, 2, 2, 2, gbs, 64);
  return {model, c, activation_memory(model, c, fp32(), 0), activation_memory(model, c, fp32(), 1)};
}

TEST(MemoryModelInterleaved, ParametersAreTheSumOfTheChunks) {
  // One layer: q 128*128 = 16,384; k+v 2*128*64 = 16,384; o 16,384; gate+up+down 3*128*352 = 135,168;
  // norms 256 => 184,576. Embedding 512*128 = 65,536; final norm + LM head 128 + 65,536 = 65,664.
  // pp 2, v 2: 4 virtual stages of one layer; rank 0 holds virtual stages 0 (layer 0 + embedding,
  // 250,112) and 2 (layer 2, 184,576) => 434,688; rank 1 holds 1 (layer 1, 184,576) and 3 (layer 3 +
  // head, 250,240) => 434,816.
  const LlamaSpec model = tiny();
  const ParallelConfig c = interleaved(1, 2, 2, 2, 8, 64);
  EXPECT_EQ(stage_local_params(model, c, 0), 434'688);
  EXPECT_EQ(stage_local_params(model, c, 1), 434'816);
  // Each chunk is the stage of pp*v = 4 with its virtual-stage index.
  const ParallelConfig pp4 = config(1, 1, 4, 2, 8, 64);
  EXPECT_EQ(stage_local_params(model, pp4, 0), 250'112);
  EXPECT_EQ(stage_local_params(model, pp4, 1), 184'576);
  EXPECT_EQ(stage_local_params(model, pp4, 3), 250'240);
  EXPECT_EQ(stage_local_params(model, c, 0), stage_local_params(model, pp4, 0) + stage_local_params(model, pp4, 2));
  EXPECT_EQ(stage_local_params(model, c, 1), stage_local_params(model, pp4, 1) + stage_local_params(model, pp4, 3));

  // fp32: weights, gradients at 4 B, two moments at 4 B; rotary tables of 2 layers, 2*[64, 16] fp32 each
  // = 16,384; both ranks hold a vocabulary matrix, so AdamW's workspace is 2*65,536*4 = 524,288.
  const MemoryBreakdown r0 = memory_per_gpu(model, c, fp32(), 0);
  const MemoryBreakdown r1 = memory_per_gpu(model, c, fp32(), 1);
  EXPECT_EQ(r0.local_params, 434'688);
  EXPECT_EQ(r0.weights_bytes, 1'738'752);
  EXPECT_EQ(r0.gradients_bytes, 1'738'752);
  EXPECT_EQ(r0.optimizer_bytes, 3'477'504);
  EXPECT_EQ(r1.weights_bytes, 1'739'264);
  EXPECT_EQ(r0.rotary_tables_bytes, 16'384);
  EXPECT_EQ(r1.rotary_tables_bytes, 16'384);
  EXPECT_EQ(r0.optimizer_workspace_bytes, 524'288);
  EXPECT_EQ(r1.optimizer_workspace_bytes, 524'288);
  EXPECT_EQ(r0.dp_flat_buffer_bytes, 0);
  EXPECT_EQ(r0.total_bytes, 1'738'752 * 2 + 3'477'504 + 16'384 + r0.activations_bytes);
  EXPECT_EQ(r0.stage, 0);
  EXPECT_NE(r0.to_string().find("over 2 model chunks"), std::string::npos) << r0.to_string();
}

TEST(MemoryModelInterleaved, OneFlatBufferAndOneShardOverAllChunks) {
  // dp 3 (m = 12 / (3*1) = 4, a multiple of pp 2), the distributed optimizer: one shard of the rank's
  // 434,688 parameters, 434,688 / 3 = 144,896 (no padding); per-chunk shards would be ceil(250,112/3) +
  // ceil(184,576/3) = 83,371 + 61,526 = 144,897. Rank 1: 434,816 pads to 434,817, shard 144,939.
  TrainingTechniques dopt;
  dopt.distributed_optimizer = true;
  const LlamaSpec model = tiny();
  const ParallelConfig c = interleaved(3, 2, 2, 1, 12, 64);
  const MemoryBreakdown r0 = memory_per_gpu(model, c, fp32(), 0, AttentionKernel::kEager, dopt);
  const MemoryBreakdown r1 = memory_per_gpu(model, c, fp32(), 1, AttentionKernel::kEager, dopt);
  EXPECT_EQ(r0.optimizer_bytes, 2 * 144'896 * 4);
  EXPECT_EQ(r0.dp_flat_buffer_bytes, 434'688 * 4);
  EXPECT_EQ(r0.distributed_optimizer_bytes, (434'688 + 2 * 144'896) * 4);
  EXPECT_EQ(r0.optimizer_workspace_bytes, 2 * 144'896 * 4);
  EXPECT_EQ(r1.optimizer_bytes, 2 * 144'939 * 4);
  EXPECT_EQ(r1.dp_flat_buffer_bytes, 434'817 * 4);
  EXPECT_EQ(r1.distributed_optimizer_bytes, (434'817 + 2 * 144'939) * 4);
  // Plain dp 3: one flat DP buffer of every local gradient.
  const MemoryBreakdown plain = memory_per_gpu(model, c, fp32(), 0);
  EXPECT_EQ(plain.dp_flat_buffer_bytes, 434'688 * 4);
}

TEST(MemoryModelInterleaved, OverlappedBucketsAreCutPaddedAndShardedPerChunk) {
  // dp 3, dopt+ovl-64K (16,384 fp32 elements a bucket), rank 0: chunk 0 is virtual stage 0 (embedding +
  // layer 0), chunk 1 virtual stage 2 (layer 2), each with its own buckets (calibrate/gradient_sync.hpp),
  // filled last parameter first and padded to multiples of 3:
  //   chunk 0: down 45,056 -> 45,057; up, gate the same; post-attention norm + o 16,512; v + k 16,384 ->
  //            16,386; q 16,386; input norm + embedding 65,664: 250,119, shard 83,373;
  //   chunk 1: the same layer buckets (184,455), then the input norm alone, 128 -> 129: 184,584, shard 61,528.
  // Padded 434,703, shard 144,901 (here the same as one list's); AdamW's largest tensor is chunk 0's
  // shard (83,373), not the rank's (144,901): workspace 2 * 83,373 * 4.
  const LlamaSpec model = tiny();
  const ParallelConfig c = interleaved(3, 2, 2, 1, 12, 64);
  const MemoryBreakdown r0 = memory_per_gpu(model, c, fp32(), 0, AttentionKernel::kEager, parse_recipe_text("dopt+ovl-64K"));
  EXPECT_EQ(r0.local_params, 434'688);
  EXPECT_EQ(r0.gradients_bytes, 434'703 * 4);
  EXPECT_EQ(r0.optimizer_bytes, 2 * 144'901 * 4);
  EXPECT_EQ(r0.distributed_optimizer_bytes, (434'703 + 2 * 144'901) * 4);
  EXPECT_EQ(r0.dp_flat_buffer_bytes, 0);
  EXPECT_EQ(r0.optimizer_workspace_bytes, 2 * 83'373 * 4);
  // ovl alone: the gradients are views of the chunks' buffers (unpadded), no flat buffer beside them.
  const MemoryBreakdown ovl = memory_per_gpu(model, c, fp32(), 0, AttentionKernel::kEager, parse_recipe_text("ovl-64K"));
  EXPECT_EQ(ovl.gradients_bytes, 434'688 * 4);
  EXPECT_EQ(ovl.dp_flat_buffer_bytes, 0);
}

// fp32, b 2, s 64 (A = C = P = 4, no autocast), per chunk of one layer:
//   bsh = 2*64*128 = 16,384; norm = 8*bsh + 4*b*s = 131,584
//   layer: hidden 2*131,584 + 2*4*bsh = 394,240; sharded 4*4*128*128 + 4*2*8*64*64 + 4*4*128*352
//          = 262,144 + 262,144 + 720,896 = 1,245,184; fixed (mask) 64*64 = 4,096 => 1,643,520
//   tokens 8*b*(s+1) = 1,040; output boundary A*bsh = 65,536 (the received input is the first norm's
//   saved tensor at A = 4: nothing more); head norm + A*bsh + 4*b*s*V = 131,584 + 65,536 + 262,144 = 459,264
//   virtual stage 0 (rank 0 chunk 0): layer + tokens + output = 1,710,096
//   virtual stage 1 (rank 1 chunk 0): layer + output           = 1,709,056
//   virtual stage 2 (rank 0 chunk 1): layer + output           = 1,709,056
//   virtual stage 3 (rank 1 chunk 1): layer + tokens + head    = 2,103,824
constexpr int64_t kVs0 = 1'710'096, kVs1 = 1'709'056, kVs2 = 1'709'056, kVs3 = 2'103'824;

TEST(MemoryModelInterleaved, ChunkBytesFollowTheVirtualStages) {
  const auto [model, c, r0, r1] = pp2_v2(8);
  EXPECT_EQ(r0.chunks, 2);
  EXPECT_EQ(r0.layer_hidden_bytes, 394'240);
  EXPECT_EQ(r0.layer_sharded_bytes, 1'245'184);
  EXPECT_EQ(r0.layer_fixed_bytes, 4'096);
  EXPECT_EQ(r0.chunk_per_micro_batch_bytes, (std::vector<int64_t>{kVs0, kVs2}));
  EXPECT_EQ(r1.chunk_per_micro_batch_bytes, (std::vector<int64_t>{kVs1, kVs3}));
  // The sums over the chunks: 2 layers; rank 0 the tokens once and two outputs; rank 1 the tokens and
  // the head once, one output.
  EXPECT_EQ(r0.num_layers, 2);
  EXPECT_EQ(r0.tokens_bytes, 1'040);
  EXPECT_EQ(r0.head_bytes, 0);
  EXPECT_EQ(r0.boundary_bytes, 2 * 65'536);
  EXPECT_EQ(r1.tokens_bytes, 1'040);
  EXPECT_EQ(r1.head_bytes, 459'264);
  EXPECT_EQ(r1.boundary_bytes, 65'536);
  EXPECT_EQ(r0.per_micro_batch_bytes, kVs0 + kVs2);
  EXPECT_EQ(r1.per_micro_batch_bytes, kVs1 + kVs3);
  // bf16 (A = 2): a chunk that is not virtual stage 0 also holds its received input: rank 0's chunk 1
  // (virtual stage 2) holds input and output, 2*2*bsh, chunk 0 its output only, 2*bsh.
  const ActivationBreakdown bf = activation_memory(model, c, precision_policy(PrecisionName::kBf16), 0);
  EXPECT_EQ(bf.boundary_bytes, 3 * 2 * 16'384);
}

TEST(MemoryModelInterleaved, InFlightPeakWalksTheOrderPp2V2M2) {
  // m = 2 = pp: warm-up is every forward (m*v = 4), so both ranks run F(c0,0) F(c0,1) F(c1,0) F(c1,1)
  // before any backward: 2 micro-batches of each chunk in flight.
  //   rank 0: 2*1,710,096 + 2*1,709,056 = 6,838,304; rank 1: 2*1,709,056 + 2*2,103,824 = 7,625,760.
  const auto [model, c, r0, r1] = pp2_v2(4);
  EXPECT_EQ(r0.chunk_micro_batches_in_flight, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r1.chunk_micro_batches_in_flight, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r0.micro_batches_in_flight, 4);
  EXPECT_EQ(r0.total_bytes, 6'838'304);
  EXPECT_EQ(r1.total_bytes, 7'625'760);
  EXPECT_EQ(memory_per_gpu(model, c, fp32(), 1).activations_bytes, 7'625'760);
}

TEST(MemoryModelInterleaved, InFlightPeakWalksTheOrderPp2V2M4) {
  // m = 4, m*v = 8 passes of each kind; the k-th forward runs chunk (k mod 4)/2 on micro-batch
  // (k/4)*2 + k mod 2, the k-th backward chunk 1 - (k mod 4)/2 on the same micro-batch.
  // Rank 0: warm-up min((2-0-1)*2 + (2-1)*2, 8) = 4:
  //   F(c0,0) F(c0,1) F(c1,0) F(c1,1)          in flight {c0: 2, c1: 2}
  //   F(c0,2) -> {3,2}  B(c1,0) -> {3,1}  F(c0,3) -> {4,1}  B(c1,1) -> {4,0}
  //   F(c1,2) -> {4,1}  B(c0,0) -> {3,1}  F(c1,3) -> {3,2}  B(c0,1) -> {2,2}, then 4 backwards.
  //   {3,2} = 3*1,710,096 + 2*1,709,056 = 8,548,400; {4,1} = 4*1,710,096 + 1,709,056 = 8,549,440:
  //   the peak is {4,1} (chunk 0, with the token ids, is the heavier), 5 pairs.
  // Rank 1: warm-up min(0*2 + 2, 8) = 2:
  //   F(c0,0) F(c0,1) -> {2,0}  F(c1,0) -> {2,1}  B(c1,0)  F(c1,1) -> {2,1}  B(c1,1)  F(c0,2) -> {3,0}
  //   B(c0,0)  F(c0,3) -> {3,0}  B(c0,1)  F(c1,2) -> {2,1}  B(c1,2)  F(c1,3) -> {2,1}, then 3 backwards.
  //   {2,1} = 2*1,709,056 + 2,103,824 = 5,521,936 beats {3,0} = 5,127,168 (chunk 1 holds the head's
  //   log-probabilities): 3 pairs, but not 3 of chunk 0.
  const auto [model, c, r0, r1] = pp2_v2(8);
  EXPECT_EQ(r0.chunk_micro_batches_in_flight, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(r0.micro_batches_in_flight, 5);
  EXPECT_EQ(r0.total_bytes, 8'549'440);
  EXPECT_EQ(r1.chunk_micro_batches_in_flight, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(r1.micro_batches_in_flight, 3);
  EXPECT_EQ(r1.total_bytes, 5'521'936);
  // Non-interleaved pp 2 on the same 4 layers holds min(2 - s, 4) micro-batches of 2 layers:
  //   stage 0: 2 * (2*1,643,520 + 1,040 + 65,536) = 2 * 3,353,616 = 6,707,232; interleaving holds more.
  const ActivationBreakdown flat0 = activation_memory(model, config(1, 1, 2, 2, 8, 64), fp32(), 0);
  EXPECT_EQ(flat0.total_bytes, 6'707'232);
  EXPECT_GT(r0.total_bytes, flat0.total_bytes);
  // Full recompute: each layer keeps its input (A*bsh = 65,536) only; the transient (one layer's
  // 1,643,520) is counted once, not per chunk. Rank 0: chunk 0 = 65,536 + 1,040 + 65,536 = 132,112,
  // chunk 1 = 131,072; still {4,1}: 4*132,112 + 131,072 + 1,643,520 = 2,303,040.
  TrainingTechniques full;
  full.recompute = Recompute::kFull;
  const ActivationBreakdown rc = activation_memory(model, c, fp32(), 0, AttentionKernel::kEager, full);
  EXPECT_EQ(rc.chunk_per_micro_batch_bytes, (std::vector<int64_t>{132'112, 131'072}));
  EXPECT_EQ(rc.recompute_transient_bytes, 1'643'520);
  EXPECT_EQ(rc.chunk_micro_batches_in_flight, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(rc.total_bytes, 2'303'040);
}

TEST(MemoryModelInterleaved, EqualChunksPeakAtWarmUpPlusOne) {
  // With every chunk alike, the peak count is Megatron's warm-up + 1, (pp-r-1)*2 + (v-1)*pp + 1, at most
  // m*v (all of them when m == pp, where the warm-up is every forward).
  for (int pp : {2, 3, 4}) {
    for (int v : {2, 3}) {
      for (int m : {pp, 2 * pp, 3 * pp}) {
        ParallelConfig c = interleaved(1, pp, v, 1, m, 64);
        for (int r = 0; r < pp; ++r) {
          const std::vector<int64_t> count = chunk_micro_batches_in_flight_at_peak(c, r, std::vector<int64_t>(v, 1));
          int64_t sum = 0;
          for (int64_t n : count) sum += n;
          const int64_t expected = m == pp ? m * v : std::min<int64_t>((pp - r - 1) * 2 + (v - 1) * pp + 1, m * v);
          EXPECT_EQ(sum, expected) << "pp " << pp << " v " << v << " m " << m << " rank " << r;
        }
      }
    }
  }
}

TEST(MemoryModelInterleaved, TheFirstSteadyPeriodHoldsTheWholeOrdersPeak) {
  // The memory walk stops after the warm-up and pp*v steady pairs (interleaved_passes_to_first_period);
  // the peak and the per-chunk counts at it must be those of the whole order, for unequal chunks too.
  uint64_t state = 12345;
  const auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((state >> 33) % 1000) + 1;
  };
  int compared = 0;
  for (int pp : {1, 2, 3, 4, 8}) {
    for (int v : {1, 2, 3, 4}) {
      for (int m : {pp, 2 * pp, 3 * pp, 7 * pp, 16 * pp}) {
        if (v > 1 && pp == 1) continue;
        for (int r = 0; r < pp; ++r) {
          for (int trial = 0; trial < 3; ++trial) {
            std::vector<int64_t> bytes(static_cast<std::size_t>(v));
            for (auto& b : bytes) b = next();
            const auto peak_of = [&](const std::vector<PipelinePass>& order) {
              std::vector<int64_t> live(bytes.size(), 0), at_peak = live;
              int64_t total = 0, peak = -1;
              for (const PipelinePass& pass : order) {
                const auto c = static_cast<std::size_t>(pass.chunk);
                const int64_t sign = pass.kind == PipelinePassKind::kForward ? 1 : -1;
                live[c] += sign;
                total += sign * bytes[c];
                if (total > peak) peak = total, at_peak = live;
              }
              return std::make_pair(peak, at_peak);
            };
            const auto whole = interleaved_passes(pp, r, m, v);
            const auto prefix = interleaved_passes_to_first_period(pp, r, m, v);
            ASSERT_LE(prefix.size(), whole.size());
            for (std::size_t i = 0; i < prefix.size(); ++i) {
              ASSERT_EQ(prefix[i].kind, whole[i].kind);
              ASSERT_EQ(prefix[i].chunk, whole[i].chunk);
              ASSERT_EQ(prefix[i].micro_batch, whole[i].micro_batch);
            }
            EXPECT_EQ(peak_of(prefix), peak_of(whole)) << "pp " << pp << " v " << v << " m " << m << " rank " << r;
            ParallelConfig c = interleaved(1, pp, v, 1, m, 64);
            c.vp = v;
            EXPECT_EQ(chunk_micro_batches_in_flight_at_peak(c, r, bytes), peak_of(whole).second);
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 500);
  // Its length does not grow with m: warm-up + pp*v pairs at most.
  EXPECT_EQ(interleaved_passes_to_first_period(4, 0, 4096, 2).size(), static_cast<std::size_t>(10 + 2 * 8));
  EXPECT_EQ(interleaved_passes_to_first_period(4, 1, 4096, 1).size(), static_cast<std::size_t>(2 + 2));
}

TEST(MemoryModel, PeakMemoryIsTheLargestStageOfMemoryAllStages) {
  // plan's filter evaluates stages 0, 1 and pp-1 only (without interleaving): it must equal the largest
  // stage of the full list for every layout, recipe, precision and micro-batch count, including layer
  // counts that pp does not divide (32 layers over 3, 5, 6, 7 stages) and m below pp.
  const LlamaSpec model = llama8b();
  int compared = 0;
  for (int pp : {1, 2, 3, 4, 5, 6, 7, 8}) {
    for (int tp : {1, 2}) {
      for (int cp : {1, 2}) {
        for (int m : {1, 2, 5, 16}) {
          for (int vp : {1, 2}) {
            if (vp > 1 && (pp == 1 || m % pp != 0 || 32 % (pp * vp) != 0)) continue;
            ParallelConfig c = config(2, tp, pp, 1, 2 * m, 1024);
            c.cp = cp;
            c.vp = vp;
            if (!c.violations(model, c.world_size()).empty()) continue;
            for (PrecisionName precision : {PrecisionName::kFp32, PrecisionName::kAmpBf16}) {
              for (const TrainingTechniques& t :
                   {TrainingTechniques{}, parse_recipe_text("sp+vp+dopt+rc-full"), parse_recipe_text("rc-sel"),
                    parse_recipe_text("dopt+ovl"), parse_recipe_text("dopt+ovl+opg")}) {
                if (tp == 1 && (t.sequence_parallel || t.vocab_parallel)) continue;
                int64_t largest = 0;
                for (const MemoryBreakdown& stage :
                     memory_all_stages(model, c, precision_policy(precision), AttentionKernel::kEager, t)) {
                  largest = std::max(largest, stage.total_bytes);
                }
                EXPECT_EQ(peak_memory_bytes(model, c, precision_policy(precision), AttentionKernel::kEager, t), largest)
                    << c.layout_text() << " m " << m << " " << to_string(precision) << " " << recipe_text(t);
                ++compared;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 400);
}

TEST(MemoryModelInterleaved, VirtualStagesOneIsTheOldPath) {
  // The walk of the order with v 1 gives min(pp - s, m), the closed form vp 1 keeps; and vp 1 set
  // explicitly changes no figure.
  for (int pp : {1, 2, 4, 8}) {
    for (int m : {1, 2, 3, 4, 8, 16}) {
      ParallelConfig c = config(1, 1, pp, 1, m, 64);
      for (int s = 0; s < pp; ++s) {
        const std::vector<int64_t> walk = chunk_micro_batches_in_flight_at_peak(c, s, {7});
        EXPECT_EQ(walk, (std::vector<int64_t>{std::min(pp - s, m)})) << "pp " << pp << " m " << m << " stage " << s;
      }
    }
  }
  const LlamaSpec model = llama8b();
  for (int stage = 0; stage < 4; ++stage) {
    ParallelConfig c = config(2, 2, 4, 1, 16, 512);
    const MemoryBreakdown before = memory_per_gpu(model, c, amp_bf16(), stage);
    c.vp = 1;
    const MemoryBreakdown after = memory_per_gpu(model, c, amp_bf16(), stage);
    EXPECT_EQ(after.total_bytes, before.total_bytes);
    EXPECT_EQ(after.activations.total_bytes,
              after.activations.per_micro_batch_bytes * std::min(4 - stage, 8) + after.activations.recompute_transient_bytes);
    EXPECT_EQ(after.activations.chunks, 1);
    EXPECT_EQ(after.activations.chunk_micro_batches_in_flight, (std::vector<int64_t>{std::min(4 - stage, 8)}));
    EXPECT_EQ(after.to_string().find("chunks"), std::string::npos);
  }
}

TEST(MemoryModelInterleaved, IllegalInterleavingIsAUserError) {
  const LlamaSpec model = tiny();
  EXPECT_THROW(memory_per_gpu(model, interleaved(1, 1, 2, 2, 8, 64), fp32(), 0), UserError);  // vp needs pp > 1
  EXPECT_THROW(memory_per_gpu(model, interleaved(1, 2, 4, 2, 8, 64), fp32(), 0), UserError);  // 8 chunks, 4 layers
  EXPECT_THROW(memory_per_gpu(model, interleaved(1, 2, 2, 2, 6, 64), fp32(), 0), UserError);  // m 3, pp 2
  EXPECT_THROW(memory_per_gpu(model, interleaved(1, 2, 2, 2, 8, 64), fp32(), 2), UserError);  // rank 2 of pp 2
}

// ---- Context parallelism (cp > 1) ----------------------------------------------------------------
// The tiny model (h 128, 8 heads of 16, 4 KV heads, FFN 352, V 512, 4 layers), b 2, s 64: each CP rank
// holds sq = s/cp tokens; its keys and values (gathered, repeated for GQA) all s.

// tp and vp 1.
ParallelConfig context_parallel(int dp, int pp, int cp, int mbs, int gbs, int seq) {
  return ParallelConfig{dp, 1, pp, mbs, gbs, seq, cp, 1};
}

TEST(MemoryModelContextParallel, Fp32ActivationsPerMicroBatchCp2) {
  // cp 2, sq 32, fp32 (A = C = P = 4): bsh = b*sq*h = 2*32*128 = 8,192; bs = b*sq = 64.
  //   norm    = (4+4)*8,192 + 4*64                                  = 65,792
  //   hidden  = 2*norm + 2*A*bsh = 131,584 + 65,536                 = 197,120
  //   sharded = q + context 2*C*bs*hl = 2*4*64*128                  = 65,536
  //           + k + v (all 64 keys) 2*C*b*s*hl = 2*4*2*64*128       = 131,072
  //           + scores fp32 [b, 8, sq, s] 4*2*8*32*64               = 131,072
  //           + MLP 4*C*bs*fl = 4*4*64*352                          = 360,448  => 688,128
  //   fixed   = mask [sq, s] bool 32*64 + rotary (fresh index_select tables, q and k, cos and sin)
  //             4*sq*hd*C = 4*32*16*4 = 2,048 + 8,192                          = 10,240
  //   tokens  = input ids and targets, two [b, sq] int64 gathers = 2*8*64      = 1,024
  //   head    = norm + A*bsh + 4*bs*V = 65,792 + 32,768 + 131,072              = 229,632
  //   per micro-batch = 4*(197,120 + 688,128 + 10,240) + 1,024 + 229,632      = 3,812,608
  const LlamaSpec model = tiny();
  const ActivationBreakdown a = activation_memory(model, context_parallel(1, 1, 2, 2, 8, 64), fp32(), 0);
  EXPECT_EQ(a.layer_hidden_bytes, 197'120);
  EXPECT_EQ(a.layer_scores_bytes, 131'072);
  EXPECT_EQ(a.layer_sharded_bytes, 688'128);
  EXPECT_EQ(a.layer_fixed_bytes, 10'240);
  EXPECT_EQ(a.tokens_bytes, 1'024);
  EXPECT_EQ(a.head_bytes, 229'632);
  EXPECT_EQ(a.boundary_bytes, 0);
  EXPECT_EQ(a.per_micro_batch_bytes, 3'812'608);
  EXPECT_EQ(a.micro_batches_in_flight, 1);
  EXPECT_EQ(a.total_bytes, 3'812'608);
  // cp 1 on the same shapes (one layer 394,240 + 1,245,184 + 4,096 = 1,643,520; tokens 8*2*65 = 1,040;
  // head 131,584 + 65,536 + 262,144 = 459,264): 4*1,643,520 + 1,040 + 459,264 = 7,034,384, unchanged.
  const ActivationBreakdown whole = activation_memory(model, config(1, 1, 1, 2, 8, 64), fp32(), 0);
  EXPECT_EQ(whole.per_micro_batch_bytes, 7'034'384);
  ParallelConfig explicit_cp1 = config(1, 1, 1, 2, 8, 64);
  explicit_cp1.cp = 1;
  EXPECT_EQ(activation_memory(model, explicit_cp1, fp32(), 0).per_micro_batch_bytes, 7'034'384);
}

TEST(MemoryModelContextParallel, ScoresAreLocalQueriesAgainstEveryKey) {
  // Eager scores [b, 8, sq, s]: amp-bf16 keeps the fp32 softmax and its bf16 copy, (4 + 2)*b*8*sq*64.
  //   cp 2 (sq 32): 6*2*8*32*64 = 196,608; cp 4 (sq 16): 98,304; cp 1: 6*2*8*64*64 = 393,216.
  // amp-bf16 fixed at cp 2: mask 32*64 = 2,048 + rotary 4*32*16*2 = 4,096 => 6,144.
  // sdpa at cp 2 (fused, with the explicit mask): log-sum-exp 4*b*8*sq = 2,048 as its "scores", and the
  //   mask cast to bf16, 2*32*64 = 4,096, + rotary 4,096 => fixed 8,192.
  const LlamaSpec model = tiny();
  EXPECT_EQ(activation_memory(model, context_parallel(1, 1, 2, 2, 8, 64), amp_bf16(), 0).layer_scores_bytes, 196'608);
  EXPECT_EQ(activation_memory(model, context_parallel(1, 1, 4, 2, 8, 64), amp_bf16(), 0).layer_scores_bytes, 98'304);
  EXPECT_EQ(activation_memory(model, config(1, 1, 1, 2, 8, 64), amp_bf16(), 0).layer_scores_bytes, 393'216);
  EXPECT_EQ(activation_memory(model, context_parallel(1, 1, 2, 2, 8, 64), amp_bf16(), 0).layer_fixed_bytes, 6'144);
  const ActivationBreakdown sdpa =
      activation_memory(model, context_parallel(1, 1, 2, 2, 8, 64), amp_bf16(), 0, AttentionKernel::kSdpa);
  EXPECT_EQ(sdpa.layer_scores_bytes, 2'048);
  EXPECT_EQ(sdpa.layer_fixed_bytes, 8'192);
  // Selective recompute (fp32, cp 2) drops the scores and the mask: sharded 688,128 - 131,072 = 557,056,
  // fixed 8,192 (rotary), transient 131,072 + 2,048 = 133,120. Full recompute keeps A*bsh = 32,768 per
  // layer, and reruns one layer: 197,120 + 688,128 + 10,240 = 895,488.
  TrainingTechniques selective, full;
  selective.recompute = Recompute::kSelective;
  full.recompute = Recompute::kFull;
  const ActivationBreakdown sel =
      activation_memory(model, context_parallel(1, 1, 2, 2, 8, 64), fp32(), 0, AttentionKernel::kEager, selective);
  EXPECT_EQ(sel.layer_sharded_bytes, 557'056);
  EXPECT_EQ(sel.layer_fixed_bytes, 8'192);
  EXPECT_EQ(sel.recompute_transient_bytes, 133'120);
  const ActivationBreakdown rc =
      activation_memory(model, context_parallel(1, 1, 2, 2, 8, 64), fp32(), 0, AttentionKernel::kEager, full);
  EXPECT_EQ(rc.layer_hidden_bytes, 32'768);
  EXPECT_EQ(rc.recompute_transient_bytes, 895'488);
}

TEST(MemoryModelContextParallel, PipelineBoundaryAtLocalTokens) {
  // cp 2, pp 2, fp32, m = 8/2 = 4: stage 0 holds 2 layers, the input ids (8*64 = 512) and its output
  // [b, sq, h] (4*8,192 = 32,768): 2*895,488 + 512 + 32,768 = 1,824,256, for min(2, 4) = 2 micro-batches.
  // Stage 1: 2 layers, the targets (512), the head (229,632) and, A == 4, no received-input term:
  // 1,790,976 + 512 + 229,632 = 2,021,120, for 1 micro-batch.
  const LlamaSpec model = tiny();
  const ParallelConfig c = context_parallel(1, 2, 2, 2, 8, 64);
  const ActivationBreakdown s0 = activation_memory(model, c, fp32(), 0);
  const ActivationBreakdown s1 = activation_memory(model, c, fp32(), 1);
  EXPECT_EQ(s0.per_micro_batch_bytes, 1'824'256);
  EXPECT_EQ(s0.boundary_bytes, 32'768);
  EXPECT_EQ(s0.total_bytes, 2 * 1'824'256);
  EXPECT_EQ(s1.per_micro_batch_bytes, 2'021'120);
  EXPECT_EQ(s1.total_bytes, 2'021'120);
}

TEST(MemoryModelContextParallel, DistributedOptimizerShardsOverDpTimesCp) {
  // P = 4 layers * 184,576 + embedding 65,536 + final norm 128 + LM head 65,536 = 869,504 (pp 1).
  // dp 2 cp 2: the shard is ceil(869,504 / 4) = 217,376: moments 2*217,376*4 = 1,739,008; padded flat
  //   parameters 869,504*4 = 3,478,016 + shard and its gradient 2*217,376*4 => 5,217,024; the padded
  //   flat gradient buffer 3,478,016. dp 4 cp 1 shards the same; dp 2 cp 1 in halves (434,752).
  const LlamaSpec model = tiny();
  TrainingTechniques sharded;
  sharded.distributed_optimizer = true;
  const MemoryBreakdown m =
      memory_per_gpu(model, context_parallel(2, 1, 2, 2, 16, 64), fp32(), 0, AttentionKernel::kEager, sharded);
  EXPECT_EQ(m.local_params, 869'504);
  EXPECT_EQ(m.optimizer_bytes, 1'739'008);
  EXPECT_EQ(m.distributed_optimizer_bytes, 5'217'024);
  EXPECT_EQ(m.dp_flat_buffer_bytes, 3'478'016);
  EXPECT_EQ(m.optimizer_workspace_bytes, 2 * 217'376 * 4);
  const MemoryBreakdown dp4 = memory_per_gpu(model, config(4, 1, 1, 2, 32, 64), fp32(), 0, AttentionKernel::kEager, sharded);
  EXPECT_EQ(dp4.optimizer_bytes, m.optimizer_bytes);
  EXPECT_EQ(dp4.distributed_optimizer_bytes, m.distributed_optimizer_bytes);
  const MemoryBreakdown dp2 = memory_per_gpu(model, config(2, 1, 1, 2, 16, 64), fp32(), 0, AttentionKernel::kEager, sharded);
  EXPECT_EQ(dp2.optimizer_bytes, 2 * 434'752 * 4);
  // Without the distributed optimizer, dp 1 cp 2 reduces gradients over 2 ranks: the flat buffer
  // 869,504*4 = 3,478,016 exists (dp 1 cp 1 has none).
  const MemoryBreakdown plain = memory_per_gpu(model, context_parallel(1, 1, 2, 2, 8, 64), fp32(), 0);
  EXPECT_EQ(plain.dp_flat_buffer_bytes, 3'478'016);
  EXPECT_EQ(memory_per_gpu(model, config(1, 1, 1, 2, 8, 64), fp32(), 0).dp_flat_buffer_bytes, 0);
}

TEST(MemoryModel, OverlappedParameterGatherCountsTheParametersOnceInTheirPaddedBuffer) {
  // tiny, pp 1, fp32, dp 3, buckets of 64 KiB (16,384 fp32 elements), filled last parameter first and
  // closed once they hold at least that: the LM head (65,536); per layer (final or next input norm 128 +
  // down 45,056 = 45,184), up 45,056, gate 45,056, (post-attention norm 128 + o 16,384 = 16,512),
  // (v + k = 16,384), q 16,384; then (layer 0's input norm 128 + embedding 65,536 = 65,664): 869,504.
  // Padded to multiples of 3: 65,538; per layer 45,186 + 45,057 + 45,057 + 16,512 + 16,386 + 16,386 =
  // 184,584 (x4 = 738,336); 65,664: 869,538 elements, shard 289,846.
  // dopt+ovl: weights 869,504*4 = 3,478,016; gradients (views of the padded buffer) 869,538*4 =
  // 3,478,152; moments 2*289,846*4 = 2,318,768; the padded parameter buffer 3,478,152 + shard and its
  // gradient 2,318,768 = 5,796,920.
  // dopt+ovl+opg: the parameters are the padded buffer: weights 3,478,152, distributed optimizer 2,318,768;
  // the peak 3,478,016 lower. At dp 1 opg (dropped with ovl) changes nothing.
  const LlamaSpec model = tiny();
  const ParallelConfig dp3 = config(3, 1, 1, 1, 6, 64);
  const MemoryBreakdown ovl = memory_per_gpu(model, dp3, fp32(), 0, AttentionKernel::kEager, parse_recipe_text("dopt+ovl-64K"));
  const MemoryBreakdown opg =
      memory_per_gpu(model, dp3, fp32(), 0, AttentionKernel::kEager, parse_recipe_text("dopt+ovl-64K+opg"));
  EXPECT_EQ(ovl.local_params, 869'504);
  EXPECT_EQ(ovl.weights_bytes, 3'478'016);
  EXPECT_EQ(ovl.gradients_bytes, 3'478'152);
  EXPECT_EQ(ovl.optimizer_bytes, 2'318'768);
  EXPECT_EQ(ovl.distributed_optimizer_bytes, 5'796'920);
  EXPECT_EQ(opg.local_params, 869'504);
  EXPECT_EQ(opg.weights_bytes, 3'478'152);
  EXPECT_EQ(opg.gradients_bytes, 3'478'152);
  EXPECT_EQ(opg.optimizer_bytes, 2'318'768);
  EXPECT_EQ(opg.distributed_optimizer_bytes, 2'318'768);
  EXPECT_EQ(opg.buffers_bytes, opg.rotary_tables_bytes + 2'318'768);
  EXPECT_EQ(opg.total_bytes, ovl.total_bytes - 3'478'016);
  const ParallelConfig dp1 = config(1, 1, 1, 1, 2, 64);
  EXPECT_EQ(memory_per_gpu(model, dp1, fp32(), 0, AttentionKernel::kEager, parse_recipe_text("dopt+ovl-64K+opg")).total_bytes,
            memory_per_gpu(model, dp1, fp32(), 0, AttentionKernel::kEager, parse_recipe_text("dopt+ovl-64K")).total_bytes);
}

}  // namespace
}  // namespace itertime::predict
