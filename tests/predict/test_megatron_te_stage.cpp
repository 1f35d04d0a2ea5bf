// test_megatron_te_stage.cpp: the Megatron-Core + TE stage records (predict/framework/megatron_te_stage.hpp)
// against hand-derived counts: GEMM FLOPs per layer, the backward's GEMMs, recompute, FP8's GEMMs and
// casts, SP / TP / CP collectives and their overlap, the refused recipes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/errors.hpp"
#include "predict/framework/megatron_te_stage.hpp"

namespace itertime::predict::framework {
namespace {

// LLaMA-shaped, small: h 1024, 16 heads of 64, 4 KV heads, ffn 2816, vocab 32000.
TransformerShape small_llama() {
  TransformerShape s;
  s.name = "small";
  s.hidden = 1024, s.ffn = 2816, s.layers = 8, s.heads = 16, s.kv_heads = 4, s.head_dim = 64, s.vocab = 32000;
  return s;
}

ParallelConfig layout(int tp, int cp, int mbs = 2, int seq = 2048) {
  ParallelConfig c{1, tp, 1, mbs, mbs, seq};
  c.cp = cp;
  return c;
}

double gemm_flops(const PassWork& pass) {
  double total = 0;
  for (const Kernel& k : pass.kernels) total += k.kind == KernelKind::kGemm ? k.gemm.flops() : 0.0;
  return total;
}

int count_kind(const PassWork& pass, KernelKind kind) {
  return static_cast<int>(
      std::count_if(pass.kernels.begin(), pass.kernels.end(), [&](const Kernel& k) { return k.kind == kind; }));
}

int count_comm(const PassWork& pass, Collective collective, CommGroup group) {
  return static_cast<int>(std::count_if(pass.comms.begin(), pass.comms.end(),
                                        [&](const Comm& c) { return c.collective == collective && c.group == group; }));
}

FrameworkRecipe recipe(PrecisionName precision = PrecisionName::kAmpBf16, bool sp = true, Recompute rc = Recompute::kNone) {
  FrameworkRecipe r;
  r.precision = precision;
  r.techniques.sequence_parallel = sp;
  r.techniques.recompute = rc;
  return r;
}

TEST(MegatronTeStage, ForwardGemmFlopsAreTwiceTokensTimesTheLayersGemmWeightsPerGpu) {
  const TransformerShape s = small_llama();
  for (int tp : {1, 2, 4}) {
    const MegatronTeStage stage = build_megatron_te_stage(s, layout(tp, 1), recipe());
    const double tokens = 2 * 2048;
    // qkv (1024 + 2*256) x 1024, proj 1024 x 1024, fc1 2*2816 x 1024, fc2 1024 x 2816, over tp.
    const double weights = (1536.0 * 1024 + 1024.0 * 1024 + 5632.0 * 1024 + 1024.0 * 2816) / tp;
    EXPECT_DOUBLE_EQ(gemm_flops(stage.layer_forward), 2 * tokens * weights) << "tp " << tp;
    EXPECT_DOUBLE_EQ(gemm_flops(stage.layer_backward), 2 * gemm_flops(stage.layer_forward)) << "dgrad + wgrad, tp " << tp;
    EXPECT_EQ(count_kind(stage.layer_forward, KernelKind::kGemm), 4);
    EXPECT_EQ(count_kind(stage.layer_backward, KernelKind::kGemm), 8);
    EXPECT_EQ(stage.layer_params, static_cast<int64_t>(weights) + 2 * 1024);
  }
}

TEST(MegatronTeStage, ContextParallelismSplitsTheTokensAndRingsTheKeysBesideEachStep) {
  const MegatronTeStage one = build_megatron_te_stage(small_llama(), layout(1, 1), recipe());
  const MegatronTeStage four = build_megatron_te_stage(small_llama(), layout(1, 4), recipe());
  EXPECT_EQ(four.tokens * 4, one.tokens);
  EXPECT_DOUBLE_EQ(gemm_flops(four.layer_forward) * 4, gemm_flops(one.layer_forward));
  EXPECT_EQ(count_comm(one.layer_forward, Collective::kSendRecv, CommGroup::kContext), 0);
  // cp steps: the causal block of the rank's 512 tokens, then 3 non-causal blocks of 512 x 256; the
  // attention FLOPs are a quarter of the whole sequence's causal attention.
  EXPECT_EQ(count_kind(four.layer_forward, KernelKind::kAttention), 4);
  double attention_flops = 0, whole = 0;
  for (const Kernel& k : four.layer_forward.kernels) {
    if (k.kind != KernelKind::kAttention) continue;
    attention_flops += k.attention.forward_flops();
    EXPECT_EQ(k.attention.seq_q, 512);
    EXPECT_EQ(k.attention.seq_kv, k.attention.causal ? 512 : 256);
  }
  for (const Kernel& k : one.layer_forward.kernels) whole += k.kind == KernelKind::kAttention ? k.attention.forward_flops() : 0;
  EXPECT_DOUBLE_EQ(attention_flops * 4, whole);
  // cp - 1 exchanges, each beside a step's attention: [mbs, s/cp] tokens x (k and v) x kv x bf16.
  ASSERT_EQ(count_comm(four.layer_forward, Collective::kSendRecv, CommGroup::kContext), 3);
  for (const Comm& c : four.layer_forward.comms) {
    if (c.group != CommGroup::kContext) continue;
    ASSERT_GE(c.hidden_behind, 0);
    EXPECT_EQ(four.layer_forward.kernels[static_cast<size_t>(c.hidden_behind)].kind, KernelKind::kAttention);
    EXPECT_EQ(c.bytes, 2 * 512 * 2 * 256 * 2);
  }
  // The backward exchanges the keys' gradients too.
  for (const Comm& c : four.layer_backward.comms) {
    if (c.group == CommGroup::kContext) {
      EXPECT_EQ(c.bytes, 2 * 2 * 512 * 2 * 256 * 2);
    }
  }
}

TEST(MegatronTeStage, SequenceParallelismGathersAndScattersTwiceAPassWithoutItTwoAllReduces) {
  const MegatronTeStage sp = build_megatron_te_stage(small_llama(), layout(4, 1), recipe());
  EXPECT_EQ(count_comm(sp.layer_forward, Collective::kAllGather, CommGroup::kTensor), 2);
  EXPECT_EQ(count_comm(sp.layer_forward, Collective::kReduceScatter, CommGroup::kTensor), 2);
  EXPECT_EQ(count_comm(sp.layer_forward, Collective::kAllReduce, CommGroup::kTensor), 0);
  // Backward: each row-parallel output gradient gathered, each column-parallel input re-gathered and its
  // gradient reduce-scattered.
  EXPECT_EQ(count_comm(sp.layer_backward, Collective::kAllGather, CommGroup::kTensor), 4);
  EXPECT_EQ(count_comm(sp.layer_backward, Collective::kReduceScatter, CommGroup::kTensor), 2);
  EXPECT_EQ(sp.sequence_tokens * 4, sp.tokens);
  const MegatronTeStage plain = build_megatron_te_stage(small_llama(), layout(4, 1), recipe(PrecisionName::kAmpBf16, false));
  EXPECT_EQ(count_comm(plain.layer_forward, Collective::kAllReduce, CommGroup::kTensor), 2);
  EXPECT_EQ(plain.sequence_tokens, plain.tokens);
  const MegatronTeStage single = build_megatron_te_stage(small_llama(), layout(1, 1), recipe());
  EXPECT_TRUE(single.layer_forward.comms.empty());
  EXPECT_TRUE(single.layer_backward.comms.empty());
}

TEST(MegatronTeStage, ForwardCollectivesAreHiddenOnlyUnderTpCommOverlapBackwardOnesBesideTheOtherGemm) {
  const MegatronTeStage sp = build_megatron_te_stage(small_llama(), layout(4, 1), recipe());
  for (const Comm& c : sp.layer_forward.comms) {
    EXPECT_TRUE(c.needs_tp_comm_overlap) << c.name;
    ASSERT_GE(c.hidden_behind, 0) << c.name;
    EXPECT_EQ(sp.layer_forward.kernels[static_cast<size_t>(c.hidden_behind)].kind, KernelKind::kGemm) << c.name;
  }
  int async = 0;
  for (const Comm& c : sp.layer_backward.comms) async += (c.hidden_behind >= 0 && !c.needs_tp_comm_overlap) ? 1 : 0;
  EXPECT_EQ(async, 4);  // two re-gathers beside the dgrad GEMMs, two reduce-scatters beside the wgrad GEMMs
}

TEST(MegatronTeStage, RecomputeAddsTheAttentionCoreOrTheWholeLayerToTheBackward) {
  const MegatronTeStage none = build_megatron_te_stage(small_llama(), layout(2, 1), recipe());
  const MegatronTeStage selective =
      build_megatron_te_stage(small_llama(), layout(2, 1), recipe(PrecisionName::kAmpBf16, true, Recompute::kSelective));
  const MegatronTeStage full =
      build_megatron_te_stage(small_llama(), layout(2, 1), recipe(PrecisionName::kAmpBf16, true, Recompute::kFull));
  EXPECT_EQ(count_kind(none.layer_backward, KernelKind::kAttention), 1);
  EXPECT_EQ(count_kind(selective.layer_backward, KernelKind::kAttention), 2);
  EXPECT_DOUBLE_EQ(gemm_flops(selective.layer_backward), gemm_flops(none.layer_backward));
  EXPECT_DOUBLE_EQ(gemm_flops(full.layer_backward), 3 * gemm_flops(none.layer_forward));
  EXPECT_EQ(full.layer_backward.comms.size(), none.layer_backward.comms.size() + none.layer_forward.comms.size());
}

TEST(MegatronTeStage, Fp8RunsTheLayersGemmsInFp8AndAddsCastsTheOutputLayerStaysBf16) {
  const MegatronTeStage bf16 = build_megatron_te_stage(small_llama(), layout(2, 1), recipe());
  const MegatronTeStage fp8 = build_megatron_te_stage(small_llama(), layout(2, 1), recipe(PrecisionName::kFp8));
  for (const Kernel& k : fp8.layer_forward.kernels) {
    if (k.kind == KernelKind::kGemm) {
      EXPECT_EQ(k.dtype, ComputeDType::kFp8) << k.name;
    }
    if (k.kind == KernelKind::kAttention) {
      EXPECT_EQ(k.dtype, ComputeDType::kBf16) << k.name;
    }
  }
  for (const Kernel& k : fp8.head_forward.kernels) {
    if (k.kind == KernelKind::kGemm) {
      EXPECT_EQ(k.dtype, ComputeDType::kBf16) << k.name;
    }
  }
  for (const Kernel& k : bf16.layer_forward.kernels) EXPECT_NE(k.dtype, ComputeDType::kFp8) << k.name;
  // Casts: proj and fc2 inputs forward (norm outputs are cast inside the norms); the four GEMMs' output
  // gradients backward; the weights once per iteration.
  auto casts = [](const PassWork& pass) {
    return std::count_if(pass.kernels.begin(), pass.kernels.end(),
                         [](const Kernel& k) { return k.name.find("_cast") != std::string::npos; });
  };
  EXPECT_EQ(casts(bf16.layer_forward), 0);
  EXPECT_EQ(casts(fp8.layer_forward), 2);
  EXPECT_EQ(casts(fp8.layer_backward), 4);
  EXPECT_TRUE(bf16.first_micro_batch.kernels.empty());
  ASSERT_EQ(fp8.first_micro_batch.kernels.size(), 1u);
  EXPECT_EQ(fp8.stage_forward.comms.size(), 1u);  // delayed scaling's amax reduction
  FrameworkRecipe current = recipe(PrecisionName::kFp8);
  current.fp8_recipe = Fp8Recipe::kCurrent;
  const MegatronTeStage cur = build_megatron_te_stage(small_llama(), layout(2, 1), current);
  EXPECT_TRUE(cur.stage_forward.comms.empty());
  EXPECT_GT(cur.layer_forward.kernels.size(), fp8.layer_forward.kernels.size());  // an amax kernel before each cast
}

TEST(MegatronTeStage, RefusesWhatMegatronRefuses) {
  EXPECT_THROW(build_megatron_te_stage(small_llama(), layout(1, 1), recipe(PrecisionName::kFp32)), UserError);
  FrameworkRecipe overlap = recipe(PrecisionName::kAmpBf16, false);
  overlap.tp_comm_overlap = true;
  EXPECT_THROW(build_megatron_te_stage(small_llama(), layout(2, 1), overlap), UserError);
}

TEST(MegatronTeStage, BucketsAreFortyMillionParametersOrAMillionPerRank) {
  EXPECT_EQ(megatron_bucket_params(8), 40'000'000);
  EXPECT_EQ(megatron_bucket_params(64), 64'000'000);
}

TEST(MegatronTeStage, OptimizerStepReadsAndWritesTheShard) {
  ParallelConfig c{4, 1, 1, 1, 4, 128};
  FrameworkRecipe r = recipe();
  r.techniques.distributed_optimizer = true;
  const PassWork sharded = optimizer_step_work(4'000'000, c, r);
  r.techniques.distributed_optimizer = false;
  const PassWork whole = optimizer_step_work(4'000'000, c, r);
  ASSERT_EQ(sharded.kernels.size(), 3u);
  EXPECT_DOUBLE_EQ(sharded.kernels[0].bytes, whole.kernels[0].bytes);      // the whole grad buffer zeroed
  EXPECT_DOUBLE_EQ(sharded.kernels[2].bytes * 4, whole.kernels[2].bytes);  // Adam on a quarter
  EXPECT_DOUBLE_EQ(whole.kernels[2].bytes, 4'000'000.0 * 30);              // 16 B read, 12 B written, 2 B bf16 copy
}

}  // namespace
}  // namespace itertime::predict::framework

namespace itertime::predict::framework {
namespace {

TEST(MegatronTeStageUnfused, TheAttentionCoreIsTwoBatchedGemmsAroundTheSoftmaxAndFourInTheBackward) {
  FrameworkRecipe r = recipe(PrecisionName::kAmpFp16, false);
  r.unfused_attention = true;
  r.dropout = true;
  const ParallelConfig c = layout(2, 1, 2, 2048);
  const MegatronTeStage stage = build_megatron_te_stage(small_llama(), c, r);
  EXPECT_EQ(count_kind(stage.layer_forward, KernelKind::kAttention), 0);
  EXPECT_EQ(count_kind(stage.layer_forward, KernelKind::kGemm), 4 + 2);
  EXPECT_EQ(count_kind(stage.layer_backward, KernelKind::kGemm), 8 + 4);
  // The scores: b * heads/tp * s rows of s, Q K^T over head_dim 64; 2 * that many FLOPs per GEMM.
  const double rows = 2.0 * 8 * 2048;
  double score_flops = 0, softmax_bytes = 0, dropout_bytes = 0;
  for (const Kernel& k : stage.layer_forward.kernels) {
    if (k.name == "scores_bmm" || k.name == "context_bmm") score_flops += k.gemm.flops();
    if (k.name == "scale_mask_softmax") softmax_bytes = k.bytes;
    if (k.name == "attention_dropout") dropout_bytes = k.bytes;
  }
  EXPECT_DOUBLE_EQ(score_flops, 2 * 2 * rows * 2048 * 64);
  EXPECT_DOUBLE_EQ(softmax_bytes, rows * 2048 * 4);  // read and write fp16 scores
  EXPECT_DOUBLE_EQ(dropout_bytes, rows * 2048 * 5);  // read, write, one-byte mask
  // The scores' GEMM writes more bytes than it has FLOPs per byte to hide them: k = 64 < the ridge.
  for (const Kernel& k : stage.layer_forward.kernels) {
    if (k.name == "scores_bmm") {
      EXPECT_GT(k.gemm_bytes * 300, k.gemm.flops());
    }
  }
  // Selective recompute reruns the core; context parallelism is refused without the fused kernel.
  r.techniques.recompute = Recompute::kSelective;
  EXPECT_EQ(count_kind(build_megatron_te_stage(small_llama(), c, r).layer_backward, KernelKind::kGemm), 8 + 4 + 2);
  EXPECT_THROW(build_megatron_te_stage(small_llama(), layout(1, 2), r), UserError);
}

}  // namespace
}  // namespace itertime::predict::framework
