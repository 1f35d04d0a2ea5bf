// test_op_builder.cpp: the stage builder (predict/builder/op_builder.hpp) without LibTorch: shapes scale with TP,
// counts with layers, a production-size model builds with plausible FLOPs, the predictor uses built
// stages for configurations that were never traced, and the call recorder aggregates as /ops does.
// (Equality with real traces: tests/torch/test_op_builder.cpp.)
// Invariants: pure; models from data/models/; no file is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/ops_store.hpp"
#include "common/training_techniques.hpp"
#include "comm_rows.hpp"
#include "predict/builder/op_builder.hpp"
#include "predict/builder/op_emitter.hpp"
#include "predict/predictor.hpp"

namespace itertime::predict {
namespace {

// One prediction with a resolver of its own (traced stages first, then built ones).
PredictOutcome predict_with_fresh_resolver(const FittedModel& model, const PredictRequest& request) {
  StageResolver resolver(model);
  return predict(resolver, request);
}
Prediction predicted(const FittedModel& model, const PredictRequest& request) {
  PredictOutcome outcome = predict_with_fresh_resolver(model, request);
  if (!outcome.ok()) throw UserError(outcome.reason);
  return *outcome.prediction;
}

LlamaSpec load(const std::string& name) {
  return load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/" + name + ".json");
}

int64_t count_of(const BuiltStage& stage, Phase phase, const std::string& name) {
  int64_t n = 0;
  for (const BuiltOp& op : stage.ops) {
    if (op.phase == phase && op.name == name) n += op.count;
  }
  return n;
}

// Forward projections: matrix products against a transposed 2-D weight ("[in,out]{1,in}").
bool is_projection(const BuiltOp& op) {
  return op.phase == Phase::kForward && op.name == "aten::matmul" && op.signature.find("]{1,") != std::string::npos;
}

double projection_flops(const BuiltStage& stage, bool include_head, int64_t vocab) {
  double total = 0;
  for (const BuiltOp& op : stage.ops) {
    if (!is_projection(op)) continue;
    const bool head = op.signature.find("," + std::to_string(vocab) + "]{1,") != std::string::npos;
    if (head && !include_head) continue;
    total += op.flops * static_cast<double>(op.count);
  }
  return total;
}

TEST(OpBuilder, TensorParallelHalvesProjectionShapesAndKeepsTheHeadReplicated) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const BuiltStage full = build_stage_ops(spec, 1, 1, 0, 1, 32, PrecisionName::kFp32);
  const BuiltStage half = build_stage_ops(spec, 2, 1, 0, 1, 32, PrecisionName::kFp32);
  EXPECT_DOUBLE_EQ(projection_flops(half, false, spec.vocab_size), projection_flops(full, false, spec.vocab_size) / 2.0);
  // q projection: [hidden, heads*head_dim] -> halved columns.
  const std::string q_full = "aten::matmul(fp32[1,32,128], fp32[128,128]{1,128})->fp32";
  const std::string q_half = "aten::matmul(fp32[1,32,128], fp32[128,64]{1,128})->fp32";
  bool found_full = false, found_half = false;
  for (const BuiltOp& op : full.ops) found_full = found_full || op.signature == q_full;
  for (const BuiltOp& op : half.ops) found_half = found_half || op.signature == q_half;
  EXPECT_TRUE(found_full);
  EXPECT_TRUE(found_half);
  // Sharded parameters: projections halved, norms, embedding and LM head replicated.
  const int64_t replicated = spec.embedding_params() + spec.lm_head_params() + (2 * spec.num_layers + 1) * spec.hidden_size;
  EXPECT_EQ(full.local_params - replicated, 2 * (half.local_params - replicated));
  // TP adds one all-reduce per attention and MLP block, each way.
  int64_t tp_forward = 0, tp_backward = 0;
  for (const CommOp& comm : half.comms) {
    if (comm.kind == CommKind::kTpAllReduce) (comm.phase == Phase::kForward ? tp_forward : tp_backward) += comm.count;
  }
  EXPECT_EQ(tp_forward, 2 * spec.num_layers);
  EXPECT_EQ(tp_backward, 2 * spec.num_layers);
  for (const CommOp& comm : full.comms) EXPECT_NE(comm.kind, CommKind::kTpAllReduce);
}

TEST(OpBuilder, CountsScaleWithLayers) {
  LlamaSpec spec = load("tiny-llama-gqa");
  const BuiltStage four = build_stage_ops(spec, 1, 1, 0, 2, 16, PrecisionName::kAmpBf16);
  spec.num_layers = 8;
  const BuiltStage eight = build_stage_ops(spec, 1, 1, 0, 2, 16, PrecisionName::kAmpBf16);
  EXPECT_EQ(count_of(four, Phase::kForward, "aten::silu"), 4);
  EXPECT_EQ(count_of(eight, Phase::kForward, "aten::silu"), 8);
  EXPECT_EQ(count_of(eight, Phase::kBackward, "aten::silu_backward"), 8);
  EXPECT_EQ(count_of(eight, Phase::kForward, "aten::softmax"), 8);
  // 7 projections and 2 attention products per layer, plus the LM head.
  EXPECT_EQ(count_of(four, Phase::kForward, "aten::matmul"), 9 * 4 + 1);
  EXPECT_EQ(count_of(eight, Phase::kForward, "aten::matmul"), 9 * 8 + 1);
  // AdamW: 9 operators per parameter tensor (9 per layer, embedding, final norm, LM head).
  EXPECT_EQ(count_of(eight, Phase::kOptimizer, "aten::addcdiv_"), 9 * 8 + 3);
  EXPECT_EQ(count_of(eight, Phase::kOptimizer, "aten::mul_") - count_of(four, Phase::kOptimizer, "aten::mul_"), 3 * 9 * 4);
  // Everything per layer doubles; the rest (embedding, head, loss) stays.
  EXPECT_EQ(count_of(eight, Phase::kBackward, "aten::mm") - count_of(four, Phase::kBackward, "aten::mm"),
            count_of(four, Phase::kBackward, "aten::mm") - 2);
  EXPECT_EQ(eight.local_params - four.local_params, 4 * spec.layer_params());
}

TEST(OpBuilder, BlindBuildHasNoCastsAndFp32Comms) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const BuiltStage blind = build_stage_ops(spec, 2, 2, 0, 1, 16, PrecisionName::kFp32);
  for (const BuiltOp& op : blind.ops) {
    EXPECT_EQ(op.signature.find("bf16"), std::string::npos) << op.signature;
  }
  for (const CommOp& comm : blind.comms) EXPECT_EQ(comm.dtype, DType::kFloat32);
  const BuiltStage amp = build_stage_ops(spec, 2, 2, 0, 1, 16, PrecisionName::kAmpBf16);
  EXPECT_GT(count_of(amp, Phase::kForward, "aten::to"), count_of(blind, Phase::kForward, "aten::to"));
  EXPECT_GT(count_of(amp, Phase::kBackward, "aten::to"), 0);  // ToCopyBackward of autocast's casts
}

TEST(OpBuilder, Llama31_8bAtTp8Pp4BuildsWithPlausibleFlops) {
  const LlamaSpec spec = load("llama3.1-8b");
  const int tp = 8, pp = 4, micro_batch = 1, seq_len = 2048;
  const auto stages = stage_layers(static_cast<int>(spec.num_layers), pp);
  const double tokens = static_cast<double>(micro_batch) * seq_len;
  for (int s = 0; s < pp; ++s) {
    const BuiltStage built = build_stage_ops(spec, tp, pp, s, micro_batch, seq_len, PrecisionName::kBf16);
    ASSERT_FALSE(built.ops.empty());
    const StageLayers& layers = stages[static_cast<std::size_t>(s)];
    EXPECT_EQ(built.num_layers, layers.num_layers);
    // Per TP rank: sharded layer projections (no norms), the replicated LM head on the last stage.
    const double layer_matmul = static_cast<double>(spec.layer_params() - 2 * spec.hidden_size) / tp;
    double matmul_params = layer_matmul * layers.num_layers;
    if (layers.has_head) matmul_params += static_cast<double>(spec.vocab_size * spec.hidden_size);
    const double flops = projection_flops(built, true, spec.vocab_size);
    EXPECT_NEAR(flops / (2.0 * tokens * matmul_params), 1.0, 0.05) << "stage " << s;
    double forward_flops = 0;
    for (const BuiltOp& op : built.ops) {
      if (op.phase == Phase::kForward) forward_flops += op.flops * static_cast<double>(op.count);
    }
    EXPECT_GT(forward_flops, flops);  // attention products and element-wise work on top
    const int64_t expected_params =
        static_cast<int64_t>(layer_matmul * layers.num_layers) + 2 * spec.hidden_size * layers.num_layers +
        (layers.has_embedding ? spec.embedding_params() : 0) + (layers.has_head ? spec.lm_head_params() + spec.hidden_size : 0);
    EXPECT_EQ(built.local_params, expected_params) << "stage " << s;
  }
}

TEST(OpBuilder, RefusesLayoutsTheModelDoesNotAdmit) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  EXPECT_THROW(build_stage_ops(spec, 3, 1, 0, 1, 16, PrecisionName::kFp32), UserError);
  EXPECT_THROW(build_stage_ops(spec, 1, 2, 2, 1, 16, PrecisionName::kFp32), UserError);
  EXPECT_THROW(build_stage_ops(spec, 1, 8, 0, 1, 16, PrecisionName::kFp32), UserError);
}

// Training techniques (issue 16); equality with traces: tests/torch/test_op_builder.cpp.
StageRecipe with_techniques(const char* recipe) {
  StageRecipe out;
  out.techniques = parse_recipe_text(recipe);
  return out;
}

int64_t comm_count(const BuiltStage& stage, Phase phase, CommKind kind) {
  int64_t n = 0;
  for (const CommOp& comm : stage.comms) {
    if (comm.phase == phase && comm.kind == kind) n += comm.count;
  }
  return n;
}

// A stage as text: every operator and comm in order, so that two builds compare whole.
std::string stage_text(const BuiltStage& stage) {
  std::string text;
  for (const BuiltOp& op : stage.ops) {
    text += to_string(op.phase) + " " + op.signature + " x" + std::to_string(op.count) + "\n";
  }
  for (const CommOp& comm : stage.comms) {
    text += to_string(comm.phase) + " " + to_string(comm.kind) + " " + to_string(comm.dtype) + " " + std::to_string(comm.bytes) +
            " x" + std::to_string(comm.count) + "\n";
  }
  return text + "params " + std::to_string(stage.local_params) + " layers " + std::to_string(stage.num_layers);
}

// build_stage_ops_gather_pair builds dopt+ovl and dopt+ovl+opg once up to the all-gathers: each of the
// two must equal its own build, and they must differ (the gathers' order, the copy back).
TEST(OpBuilder, TheGatherPairEqualsBothOwnBuilds) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  for (const char* text : {"dopt+ovl-64K", "dopt+ovl-64K+opg", "sp+vp+dopt+rc-full+ovl-1K"}) {
    for (int dp : {2, 3}) {
      for (int stage : {0, 1}) {
        StageRecipe recipe = with_techniques(text);
        recipe.dp = dp;
        const std::vector<BuiltStage> pair =
            build_stage_ops_gather_pair(spec, 2, 2, stage, 1, 16, PrecisionName::kAmpBf16, recipe);
        ASSERT_EQ(pair.size(), 2u);
        recipe.techniques.overlap_parameter_gather = false;
        const std::string without = stage_text(build_stage_ops(spec, 2, 2, stage, 1, 16, PrecisionName::kAmpBf16, recipe));
        recipe.techniques.overlap_parameter_gather = true;
        const std::string with = stage_text(build_stage_ops(spec, 2, 2, stage, 1, 16, PrecisionName::kAmpBf16, recipe));
        EXPECT_EQ(stage_text(pair[0]), without) << text << " dp " << dp << " stage " << stage;
        EXPECT_EQ(stage_text(pair[1]), with) << text << " dp " << dp << " stage " << stage;
        EXPECT_NE(without, with);
        EXPECT_EQ(count_of(pair[0], Phase::kOptimizer, "aten::copy_") - count_of(pair[1], Phase::kOptimizer, "aten::copy_"),
                  count_of(pair[0], Phase::kOptimizer, "aten::view_as"))
            << "opg copies nothing back";
      }
    }
  }
  StageRecipe plain = with_techniques("dopt");
  plain.dp = 2;
  EXPECT_THROW(build_stage_ops_gather_pair(spec, 2, 2, 0, 1, 16, PrecisionName::kFp32, plain), UserError);
  StageRecipe at_one = with_techniques("dopt+ovl-64K");  // ovl drops at dp 1
  EXPECT_THROW(build_stage_ops_gather_pair(spec, 2, 2, 0, 1, 16, PrecisionName::kFp32, at_one), UserError);
}

int64_t comm_bytes(const BuiltStage& stage, CommKind kind) {
  for (const CommOp& comm : stage.comms) {
    if (comm.kind == kind) return comm.bytes;
  }
  return -1;
}

TEST(OpBuilder, StageKeysOfPlainTrainingAreUnchanged) {
  EXPECT_EQ(store::stage_key("tiny-llama", 2, 2, 1, 1, 64, "amp-bf16", "aware"),
            "tiny-llama/tp2/pp2/s1/mbs1/seq64/amp-bf16/aware");
  EXPECT_EQ(store::stage_key("tiny-llama", 2, 2, 1, 1, 64, "amp-bf16", "aware", TrainingTechniques{}),
            "tiny-llama/tp2/pp2/s1/mbs1/seq64/amp-bf16/aware");
  EXPECT_EQ(store::stage_key("tiny-llama", 2, 2, 1, 1, 64, "fp32", "blind", parse_recipe_text("sp+vp+rc-full")),
            "tiny-llama/tp2/pp2/s1/mbs1/seq64/fp32/blind/sp+vp+rc-full");
  // The DP degree counts only with the distributed optimizer.
  EXPECT_EQ(store::stage_key("tiny-llama", 2, 2, 1, 1, 64, "amp-bf16", "aware", TrainingTechniques{}, 8),
            "tiny-llama/tp2/pp2/s1/mbs1/seq64/amp-bf16/aware");
  EXPECT_EQ(store::stage_key("tiny-llama", 2, 2, 1, 1, 64, "fp32", "blind", parse_recipe_text("sp+vp+rc-full"), 4),
            "tiny-llama/tp2/pp2/s1/mbs1/seq64/fp32/blind/sp+vp+rc-full");
}

TEST(OpBuilder, DistributedOptimizerStageKeysCarryTheDpDegree) {
  EXPECT_EQ(store::stage_key("tiny-llama", 2, 2, 1, 1, 64, "amp-bf16", "aware", parse_recipe_text("dopt"), 4),
            "tiny-llama/tp2/pp2/s1/mbs1/seq64/amp-bf16/aware/dopt/dp4");
  EXPECT_EQ(store::stage_key("tiny-llama", 1, 1, 0, 1, 64, "fp32", "blind", parse_recipe_text("sp+vp+dopt+rc-full"), 1),
            "tiny-llama/tp1/pp1/s0/mbs1/seq64/fp32/blind/sp+vp+dopt+rc-full/dp1");
  EXPECT_THROW(store::stage_key("tiny-llama", 1, 1, 0, 1, 64, "fp32", "aware", parse_recipe_text("dopt")), InternalError);
}

TEST(OpBuilder, SequenceParallelismGathersAndScattersTheSequence) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const int64_t layers = 2;  // stage 0 of pp 2
  const BuiltStage plain = build_stage_ops(spec, 2, 2, 0, 1, 32, PrecisionName::kAmpBf16);
  const BuiltStage sp = build_stage_ops(spec, 2, 2, 0, 1, 32, PrecisionName::kAmpBf16, with_techniques("sp"));
  // One all-gather into and one reduce-scatter out of each attention and MLP block, each way; the
  // embedding's shard costs one all-gather in the backward.
  EXPECT_EQ(comm_count(sp, Phase::kForward, CommKind::kTpAllGather), 2 * layers);
  EXPECT_EQ(comm_count(sp, Phase::kForward, CommKind::kTpReduceScatter), 2 * layers);
  EXPECT_EQ(comm_count(sp, Phase::kBackward, CommKind::kTpReduceScatter), 2 * layers);
  EXPECT_EQ(comm_count(sp, Phase::kBackward, CommKind::kTpAllGather), 2 * layers + 1);
  EXPECT_EQ(comm_count(sp, Phase::kForward, CommKind::kTpAllReduce) + comm_count(sp, Phase::kBackward, CommKind::kTpAllReduce),
            0);
  EXPECT_EQ(comm_count(plain, Phase::kForward, CommKind::kTpAllReduce), 2 * layers);
  // The norms' gradients summed over TP once per iteration, and a shard of the sequence sent on.
  EXPECT_EQ(comm_count(sp, Phase::kSpGradients, CommKind::kTpAllReduce), 1);
  EXPECT_EQ(comm_bytes(sp, CommKind::kTpAllReduce), 2 * layers * spec.hidden_size * 4);
  EXPECT_EQ(comm_bytes(sp, CommKind::kPpSendForward), comm_bytes(plain, CommKind::kPpSendForward) / 2);
  EXPECT_EQ(comm_bytes(sp, CommKind::kTpAllGather), 1 * (32 / 2) * spec.hidden_size * 4);  // the fp32 norm output's shard
  EXPECT_EQ(count_of(sp, Phase::kSpGradients, "aten::cat"), 1);
  EXPECT_EQ(sp.local_params, plain.local_params);
  // Without TP there is nothing to split: the plain stage.
  const BuiltStage alone = build_stage_ops(spec, 1, 2, 0, 1, 32, PrecisionName::kAmpBf16, with_techniques("sp"));
  const BuiltStage alone_plain = build_stage_ops(spec, 1, 2, 0, 1, 32, PrecisionName::kAmpBf16);
  ASSERT_EQ(alone.ops.size(), alone_plain.ops.size());
  for (std::size_t i = 0; i < alone.ops.size(); ++i) EXPECT_EQ(alone.ops[i].signature, alone_plain.ops[i].signature);
}

TEST(OpBuilder, VocabularyParallelHeadShardsTheVocabulary) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const BuiltStage plain = build_stage_ops(spec, 2, 1, 0, 1, 16, PrecisionName::kFp32);
  const BuiltStage vp = build_stage_ops(spec, 2, 1, 0, 1, 16, PrecisionName::kFp32, with_techniques("vp"));
  EXPECT_EQ(plain.local_params - vp.local_params, spec.vocab_size / 2 * spec.hidden_size * 2);  // embedding and head halved
  EXPECT_EQ(count_of(vp, Phase::kForward, "aten::cross_entropy_loss"), 0);
  EXPECT_EQ(count_of(vp, Phase::kForward, "aten::max"), 2);  // the row maxima, then their maximum over TP
  EXPECT_EQ(comm_count(vp, Phase::kForward, CommKind::kTpAllGather), 1);
}

TEST(OpBuilder, RecomputeRerunsTheCoreOrTheLayerInTheBackward) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const int64_t layers = 4;
  const BuiltStage plain = build_stage_ops(spec, 2, 1, 0, 1, 16, PrecisionName::kFp32);
  const BuiltStage selective = build_stage_ops(spec, 2, 1, 0, 1, 16, PrecisionName::kFp32, with_techniques("rc-sel"));
  const BuiltStage full = build_stage_ops(spec, 2, 1, 0, 1, 16, PrecisionName::kFp32, with_techniques("rc-full"));
  EXPECT_EQ(count_of(plain, Phase::kBackward, "aten::matmul"), 0);                    // the backward of a matmul is mm / bmm
  EXPECT_EQ(count_of(selective, Phase::kBackward, "aten::matmul"), 2 * layers);       // q k^T and p v again
  EXPECT_EQ(count_of(full, Phase::kBackward, "aten::matmul"), (7 + 2) * layers);      // every projection too
  EXPECT_EQ(comm_count(full, Phase::kBackward, CommKind::kTpAllReduce), 4 * layers);  // the rerun's all-reduces too
  EXPECT_EQ(count_of(full, Phase::kForward, "aten::matmul"), count_of(plain, Phase::kForward, "aten::matmul"));
}

StageRecipe sharded_over(int dp, const char* recipe = "dopt") {
  StageRecipe out = with_techniques(recipe);
  out.dp = dp;
  return out;
}

int64_t comm_total(const BuiltStage& stage, CommKind kind) {
  int64_t n = 0;
  for (const CommOp& comm : stage.comms) {
    if (comm.kind == kind) n += comm.count;
  }
  return n;
}

TEST(OpBuilder, DistributedOptimizerReduceScattersUpdatesOneShardAndAllGathers) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const BuiltStage plain = build_stage_ops(spec, 2, 2, 1, 1, 16, PrecisionName::kAmpBf16);
  const int64_t params = plain.local_params;
  ASSERT_EQ(params, 250496);  // 2 layers, the final norm and the LM head at tp 2
  for (int dp : {1, 2, 3, 4}) {
    const BuiltStage dopt = build_stage_ops(spec, 2, 2, 1, 1, 16, PrecisionName::kAmpBf16, sharded_over(dp));
    const int64_t shard = (params + dp - 1) / dp;  // dp 3 pads the buffer by one element
    // One reduce-scatter (dp_buffer) and one all-gather (optimizer) of one rank's fp32 shard, no all-reduce.
    EXPECT_EQ(comm_total(dopt, CommKind::kDpAllReduce), 0) << dp;
    EXPECT_EQ(comm_count(dopt, Phase::kDpBuffer, CommKind::kDpReduceScatter), 1) << dp;
    EXPECT_EQ(comm_count(dopt, Phase::kOptimizer, CommKind::kDpAllGather), 1) << dp;
    EXPECT_EQ(comm_total(dopt, CommKind::kDpReduceScatter) + comm_total(dopt, CommKind::kDpAllGather), 2) << dp;
    EXPECT_EQ(comm_bytes(dopt, CommKind::kDpReduceScatter), shard * 4) << dp;
    EXPECT_EQ(comm_bytes(dopt, CommKind::kDpAllGather), shard * 4) << dp;
    for (const CommOp& comm : dopt.comms) {
      if (comm.kind == CommKind::kDpReduceScatter || comm.kind == CommKind::kDpAllGather) {
        EXPECT_EQ(comm.dtype, DType::kFloat32);
      }
    }
    // The rest of the step's communication is the plain stage's.
    EXPECT_EQ(comm_total(dopt, CommKind::kTpAllReduce), comm_total(plain, CommKind::kTpAllReduce));
    EXPECT_EQ(comm_bytes(dopt, CommKind::kPpSendBackward), comm_bytes(plain, CommKind::kPpSendBackward));
    // AdamW on one flat tensor: 9 calls, not 9 per parameter tensor.
    EXPECT_EQ(count_of(dopt, Phase::kOptimizer, "aten::addcdiv_"), 1) << dp;
    EXPECT_EQ(count_of(dopt, Phase::kOptimizer, "aten::mul_"), 3) << dp;
    bool shard_step = false;
    for (const BuiltOp& op : dopt.ops) {
      shard_step = shard_step || (op.phase == Phase::kOptimizer && op.name == "aten::addcdiv_" &&
                                  op.signature.find("fp32[" + std::to_string(shard) + "]") != std::string::npos);
    }
    EXPECT_TRUE(shard_step) << dp;
    // The gathered values copied back into every parameter tensor after the step (2 layers of 9, the
    // final norm and the head); the gradients are no longer copied back.
    const int64_t tensors = 2 * 9 + 2;
    EXPECT_EQ(count_of(dopt, Phase::kOptimizer, "aten::narrow"), tensors) << dp;
    EXPECT_EQ(count_of(dopt, Phase::kOptimizer, "aten::copy_"), tensors) << dp;
    EXPECT_EQ(count_of(dopt, Phase::kDpBuffer, "aten::copy_"), 0) << dp;
    EXPECT_EQ(count_of(dopt, Phase::kDpBuffer, "aten::narrow"), 1) << dp;  // the padded buffer's head
    EXPECT_EQ(count_of(dopt, Phase::kDpBuffer, "aten::cat"), 1) << dp;
    EXPECT_EQ(dopt.local_params, params);
  }
  // Off, the DP degree changes nothing.
  const BuiltStage plain_at_four = build_stage_ops(spec, 2, 2, 1, 1, 16, PrecisionName::kAmpBf16, sharded_over(4, "sp"));
  const BuiltStage sp = build_stage_ops(spec, 2, 2, 1, 1, 16, PrecisionName::kAmpBf16, with_techniques("sp"));
  ASSERT_EQ(plain_at_four.ops.size(), sp.ops.size());
  for (std::size_t i = 0; i < sp.ops.size(); ++i) EXPECT_EQ(plain_at_four.ops[i].signature, sp.ops[i].signature);
  EXPECT_EQ(comm_total(sp, CommKind::kDpAllReduce), 1);
  EXPECT_EQ(comm_total(sp, CommKind::kDpReduceScatter) + comm_total(sp, CommKind::kDpAllGather), 0);
}

TEST(OpBuilder, UnaryResultsKeepADenseLayoutWithItsSizeOneStrides) {
  // The upper half of a rotary gradient with one head per rank: [1, 1, 16, 16] of a [1, 1, 16, 32] laid out
  // [b, h, hd, s]; dense once the size-1 dimensions are ignored, so neg keeps its strides (LibTorch 1.13 and 2.6).
  const TensorLayout half = strided(DType::kBFloat16, {1, 1, 16, 16}, {512, 512, 1, 16});
  EXPECT_TRUE(non_overlapping_and_dense(half));
  EXPECT_EQ(unary_result(half, DType::kBFloat16).strides, (Dims{512, 512, 1, 16}));
  EXPECT_EQ(elementwise_result(half, DType::kBFloat16).strides, (Dims{256, 256, 1, 16}));  // packed: the general rule
  // Not dense (half of every row): the general rule.
  const TensorLayout gappy = strided(DType::kFloat32, {1, 2, 16, 8}, {512, 16, 32, 1});
  EXPECT_FALSE(non_overlapping_and_dense(gappy));
  EXPECT_EQ(unary_result(gappy, DType::kFloat32).strides, elementwise_result(gappy, DType::kFloat32).strides);
}

TEST(OpBuilder, RefusesTechniquesItCannotBuild) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  StageRecipe overlapped_sharded = with_techniques("dopt+ovl");  // built (the trainer runs it): not refused
  overlapped_sharded.dp = 2;
  const BuiltStage both = build_stage_ops(spec, 2, 1, 0, 1, 16, PrecisionName::kFp32, overlapped_sharded);
  EXPECT_EQ(comm_total(both, CommKind::kDpAllReduce), 0);
  EXPECT_GE(comm_total(both, CommKind::kDpReduceScatter), 1);
  EXPECT_EQ(comm_total(both, CommKind::kDpReduceScatter), comm_total(both, CommKind::kDpAllGather));
  EXPECT_THROW(build_stage_ops(spec, 2, 1, 0, 1, 16, PrecisionName::kFp32, sharded_over(0)), UserError);
  EXPECT_THROW(build_stage_ops(spec, 4, 1, 0, 1, 18, PrecisionName::kFp32, with_techniques("sp")), UserError);  // 18 % 4
  LlamaSpec odd_vocabulary = spec;
  odd_vocabulary.vocab_size = 510;
  EXPECT_THROW(build_stage_ops(odd_vocabulary, 4, 1, 0, 1, 16, PrecisionName::kFp32, with_techniques("vp")), UserError);
}

TEST(OpBuilder, DialectFollowsTheLibTorchVersion) {
  EXPECT_EQ(torch_dialect(""), TorchDialect::kTorch1);  // files from before the version was stored
  EXPECT_EQ(torch_dialect("1.13.0"), TorchDialect::kTorch1);
  EXPECT_EQ(torch_dialect("2.6.0"), TorchDialect::kTorch2);
  EXPECT_EQ(torch_dialect("2.9.1+cu130"), TorchDialect::kTorch2);
  EXPECT_THROW(torch_dialect("3.0.0"), UserError);
  const LlamaSpec spec = load("tiny-llama-gqa");
  // sdpa needs 2.x; auto is not a kernel.
  EXPECT_THROW(build_stage_ops(spec, 1, 1, 0, 1, 16, PrecisionName::kFp32, {AttentionKernel::kSdpa, TorchDialect::kTorch1}),
               UserError);
  EXPECT_THROW(build_stage_ops(spec, 1, 1, 0, 1, 16, PrecisionName::kFp32, {AttentionKernel::kAuto, TorchDialect::kTorch2}),
               UserError);
}

// The fused kernel replaces the score computation and its backward, and nothing else.
TEST(OpBuilder, SdpaReplacesTheScoreChain) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const BuiltStage eager =
      build_stage_ops(spec, 1, 1, 0, 1, 16, PrecisionName::kFp32, {AttentionKernel::kEager, TorchDialect::kTorch2});
  const BuiltStage sdpa =
      build_stage_ops(spec, 1, 1, 0, 1, 16, PrecisionName::kFp32, {AttentionKernel::kSdpa, TorchDialect::kTorch2});
  auto calls = [](const BuiltStage& stage, const std::string& name) {
    int64_t n = 0;
    for (const BuiltOp& op : stage.ops) n += op.name == name ? op.count : 0;
    return n;
  };
  const int64_t layers = spec.num_layers;
  EXPECT_EQ(calls(sdpa, "aten::scaled_dot_product_attention"), layers);
  EXPECT_EQ(calls(sdpa, "aten::_scaled_dot_product_flash_attention_for_cpu_backward"), layers);
  EXPECT_EQ(calls(sdpa, "aten::softmax"), 0);
  EXPECT_EQ(calls(eager, "aten::softmax"), layers);
  EXPECT_EQ(calls(sdpa, "aten::bmm"), 0);
  EXPECT_EQ(calls(eager, "aten::bmm"), 4 * layers);
  EXPECT_EQ(calls(sdpa, "aten::mm"), calls(eager, "aten::mm"));  // the projections are untouched
  EXPECT_EQ(sdpa.local_params, eager.local_params);
}

// A fitted model with no stage trace: one profiled signature, one regression per (name, dtypes).
TEST(OpBuilder, PredictorBuildsStagesNeverTraced) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const BuiltStage built = build_stage_ops(spec, 1, 1, 0, 1, 16, PrecisionName::kFp32);
  FittedModel model;
  model.source_file = "synthetic";
  model.occupancies = {1};
  const BuiltOp& profiled = built.ops.front();
  model.signatures[0] =
      OpInfo{profiled.name, profiled.signature, profiled.input_dtypes, profiled.output_dtype, profiled.flops, profiled.bytes};
  model.signature_ids[profiled.signature] = 0;
  model.op_time_us[{0, 1}] = 3.0;
  for (const BuiltOp& op : built.ops) {
    model.regressions[{op.name + "|" + op.input_dtypes, 2}] = OpRegression{1.0, 1e-6, 0.0, 3};
  }
  PredictRequest request;
  request.model_name = spec.name;
  request.config = ParallelConfig{1, 1, 1, 1, 4, 16};
  request.precision = PrecisionName::kFp32;
  EXPECT_FALSE(predict_with_fresh_resolver(model, request).ok());  // no trace and no model to build from
  request.model = &spec;
  const Prediction p = predicted(model, request);
  EXPECT_GT(p.total_us, 0.0);
  EXPECT_GT(p.extrapolated_fraction, 0.9);
  EXPECT_LT(p.extrapolated_fraction, 1.0);
  bool noted = false;
  for (const std::string& note : p.notes) {
    noted = noted || note.find("built from the model (not traced): 1 of " + std::to_string(built.ops.size()) +
                               " operators profiled") != std::string::npos;
  }
  EXPECT_TRUE(noted);
  // The regression's time scales with FLOPs: a longer sequence costs more.
  request.config.seq_len = 32;
  EXPECT_GT(predicted(model, request).total_us, p.total_us);
  // Blind: the fp32 build, whatever the policy.
  request.config.seq_len = 16;
  request.precision = PrecisionName::kAmpBf16;
  request.blind = true;
  EXPECT_DOUBLE_EQ(predicted(model, request).total_us, p.total_us);
}

// Stages are built once per shape (layers, first, last): stage 0 and stage 1 of small-llama at pp 3 have
// three layers each but differ (embedding), and each must still get its own operators. The expected
// per-micro-batch forward time is summed here from each stage's own build with the same regression.
TEST(OpBuilder, PredictorBuildsEachStageShapeOnceAndKeepsStagesApart) {
  const LlamaSpec spec = load("small-llama");
  const int pp = 3;
  FittedModel model;
  model.source_file = "synthetic";
  model.occupancies = {3};
  model.comm =
      CommModel(store::to_records(test_rows::synthetic_rows("send", "float32", 2, "consecutive", 5.0, 1e-3, 1024, 1 << 20)));
  const OpRegression regression{2.0, 1e-6, 1e-7, 3};
  std::vector<BuiltStage> built;
  for (int s = 0; s < pp; ++s) {
    built.push_back(build_stage_ops(spec, 1, pp, s, 1, 16, PrecisionName::kFp32));
    for (const BuiltOp& op : built.back().ops) model.regressions[{op.name + "|" + op.input_dtypes, 3}] = regression;
  }
  PredictRequest request;
  request.model_name = spec.name;
  request.model = &spec;
  request.config = ParallelConfig{1, 1, pp, 1, 4, 16};
  request.precision = PrecisionName::kFp32;
  const Prediction cold = predicted(model, request);
  ASSERT_EQ(cold.stage_forward_us.size(), static_cast<std::size_t>(pp));
  for (int s = 0; s < pp; ++s) {
    double forward_us = 0;
    for (const BuiltOp& op : built[static_cast<std::size_t>(s)].ops) {
      if (op.phase != Phase::kForward) continue;
      forward_us += static_cast<double>(op.count) * std::max(0.0, regression.intercept_us + regression.us_per_flop * op.flops +
                                                                      regression.us_per_byte * op.bytes);
    }
    EXPECT_NEAR(cold.stage_forward_us[static_cast<std::size_t>(s)], forward_us, 1e-9 * forward_us) << "stage " << s;
  }
  EXPECT_NE(cold.stage_forward_us[0], cold.stage_forward_us[1]);  // same layer count, not the same stage
  // A second query reuses the cached builds and gives the same answer.
  const Prediction warm = predicted(model, request);
  EXPECT_EQ(warm.total_us, cold.total_us);
  EXPECT_EQ(warm.stage_backward_us, cold.stage_backward_us);
}

// The resolver builds a bucketed distributed optimizer's stage with and without opg at once and keeps
// both: the second recipe costs no build, and each resolves to its own operators and comm order.
TEST(OpBuilder, ResolverBuildsDoptOvlAndOpgOnce) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  FittedModel model;
  model.source_file = "synthetic";
  model.occupancies = {4};
  StageQuery query;
  query.model_name = spec.name;
  query.model = &spec;
  query.config = ParallelConfig{2, 2, 1, 1, 4, 16};
  query.precision = PrecisionName::kFp32;
  query.occupancy = 4;
  query.techniques = parse_recipe_text("dopt+ovl-64K+opg");
  StageResolver resolver(model, StagePolicy::kBuiltOnly);
  const StageOutcome with = resolver.resolve(query);
  ASSERT_NE(with.stage, nullptr) << with.reason;
  EXPECT_EQ(resolver.cached_stages(), 2u);
  query.techniques.overlap_parameter_gather = false;
  const StageOutcome without = resolver.resolve(query);
  ASSERT_NE(without.stage, nullptr) << without.reason;
  EXPECT_EQ(resolver.cached_stages(), 2u) << "dopt+ovl came with opg's build";
  EXPECT_NE(with.stage, without.stage);
  EXPECT_GT(without.stage->operators, with.stage->operators) << "dopt+ovl copies the parameters back";
  query.techniques = parse_recipe_text("dopt");  // not bucketed: one build
  ASSERT_NE(resolver.resolve(query).stage, nullptr);
  EXPECT_EQ(resolver.cached_stages(), 3u);
}

// Oversubscribed CPU ranks: with 4 data-parallel ranks on 2 rank slots every rank always computes, so
// processor sharing doubles the operators profiled with the 2 slots busy. That must equal a model that
// does not share but whose occupancy-4 profile is the occupancy-2 one doubled.
TEST(OpBuilder, SharedCoresStretchOperatorsProfiledWithEverySlotBusy) {
  const LlamaSpec spec = load("tiny-llama-gqa");
  const BuiltStage built = build_stage_ops(spec, 1, 1, 0, 1, 16, PrecisionName::kFp32);
  auto model_with = [&](double slots, double occupancy4_intercept_us) {
    FittedModel model;
    model.source_file = "synthetic";
    model.occupancies = {2, 4};
    model.rank_slots = slots;
    model.node_ranks = 4;
    model.comm = CommModel(
        store::to_records(test_rows::synthetic_rows("all_reduce", "float32", 4, "consecutive", 30.0, 1e-3, 1024, 1 << 22)));
    for (const BuiltOp& op : built.ops) {
      model.regressions[{op.name + "|" + op.input_dtypes, 2}] = OpRegression{2.0, 1e-6, 0.0, 3};
      model.regressions[{op.name + "|" + op.input_dtypes, 4}] = OpRegression{occupancy4_intercept_us, 2e-6, 0.0, 3};
    }
    return model;
  };
  PredictRequest request;
  request.model_name = spec.name;
  request.model = &spec;
  request.config = ParallelConfig{4, 1, 1, 1, 8, 16};
  request.precision = PrecisionName::kFp32;
  const Prediction shared = predicted(model_with(2.0, 100.0), request);  // occupancy-4 profile ignored
  const Prediction doubled = predicted(model_with(0.0, 4.0), request);   // no sharing, occupancy 4 = 2 x occupancy 2
  EXPECT_NEAR(shared.total_us, doubled.total_us, 1e-9 * doubled.total_us);
  EXPECT_NEAR(shared.raw_total_us, doubled.raw_total_us, 1e-9 * doubled.raw_total_us);
  bool noted = false;
  for (const std::string& note : shared.notes) noted = noted || note.find("share 2 rank slots") != std::string::npos;
  EXPECT_TRUE(noted);
  // Within the slots nothing is shared: 2 ranks use the occupancy-2 profile as they are.
  request.config = ParallelConfig{2, 1, 1, 1, 8, 16};
  EXPECT_NEAR(predicted(model_with(2.0, 100.0), request).total_us, predicted(model_with(0.0, 100.0), request).total_us, 1e-9);
}

// The builder's call recorder (predict/builder/op_emitter.hpp): signatures, aggregation, repeat counts, comms.
TEST(OpEmitter, AggregatesCallsPerPhaseAndSignatureInOrderOfFirstAppearance) {
  using namespace builder;
  OpEmitter emit;
  const TensorLayout a = contiguous(DType::kBFloat16, {4, 8});
  const TensorLayout b = transposed(contiguous(DType::kBFloat16, {16, 8}), 0, 1);
  emit.mm(a, b);
  emit.set_repeat(3);
  emit.mm(a, b);  // the same signature: counted, not listed again
  emit.call("aten::sum.dim_IntList", {tensor_arg(a), int_list_arg({0, 1}), bool_arg(true), none_arg()}, DType::kFloat32);
  emit.comm(CommKind::kTpAllReduce, DType::kBFloat16, 64);
  emit.set_phase(Phase::kBackward);
  emit.set_repeat(1);
  emit.mm(a, b);  // another phase: a new entry
  emit.comm_once(Phase::kDpBuffer, CommKind::kDpAllReduce, DType::kFloat32, 128);
  const std::vector<BuiltOp>& ops = emit.ops();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].phase, Phase::kForward);
  EXPECT_EQ(ops[0].name, "aten::mm");
  EXPECT_EQ(ops[0].signature, "aten::mm(bf16[4,8], bf16[8,16]{1,8})->bf16");
  EXPECT_EQ(ops[0].input_dtypes, "bf16,bf16");
  EXPECT_EQ(ops[0].output_dtype, "bf16");
  EXPECT_DOUBLE_EQ(ops[0].flops, 2.0 * 4 * 8 * 16);
  EXPECT_EQ(ops[0].count, 4);
  EXPECT_EQ(ops[1].signature, "aten::sum.dim_IntList(bf16[4,8], [0, 1], True, None)->fp32");
  EXPECT_EQ(ops[1].name, "aten::sum");
  EXPECT_EQ(ops[1].count, 3);
  EXPECT_EQ(ops[2].phase, Phase::kBackward);
  EXPECT_EQ(ops[2].count, 1);
  ASSERT_EQ(emit.comms().size(), 2u);
  EXPECT_EQ(emit.comms()[0].phase, Phase::kForward);
  EXPECT_EQ(emit.comms()[0].count, 3);
  EXPECT_EQ(emit.comms()[1].phase, Phase::kDpBuffer);
  EXPECT_EQ(emit.comms()[1].count, 1);
  // Value arguments as c10 prints them.
  EXPECT_EQ(double_arg(1.0 - 1e-3 * 0.01).text, "0.99999000000000005");
  EXPECT_EQ(dtype_arg(DType::kFloat32).text, "6");
  EXPECT_EQ(int_list_arg({-1}).text, "[-1]");
}

}  // namespace
}  // namespace itertime::predict
