// test_megatron_layout_rules.cpp: the one rule set for Megatron-LM layouts (predict/framework/
// megatron_layout_rules.hpp) against cases derived by hand from Megatron-LM's validation at
// d98e8a64ddf34856e74b24714e3bedb2f5a39553 (arguments.py validate_args, transformer_config.py,
// transformer_block.py get_num_layers_to_build, schedules.py). Each rule has a case that is legal but for
// that rule (so the case fails if the rule is dropped), and the layer splits are checked against
// get_num_layers_to_build's arithmetic written out beside each. NeMo's 405B tp8 pp8 vp8 layout (126 layers,
// embedding and loss counted) is predicted alike by score-published's reader and predict_framework.
// Invariants: models from data/models/; no published step time is read (the published row here carries a
// placeholder measurement, which is not compared).
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "predict/framework/framework_predictor.hpp"
#include "predict/framework/megatron_layout_rules.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/framework_plan.hpp"
#include "validate/published_figures.hpp"

namespace itertime::predict::framework {
namespace {

// h 64, SwiGLU ffn 96, 8 layers, 8 heads of 8, 8 KV heads, vocabulary 1000.
// TransformerShape's leading fields in order: name, hidden, ffn, layers, heads, kv_heads, head_dim, vocab.
TransformerShape toy(int64_t layers = 8) { return TransformerShape{"toy", 64, 96, layers, 8, 8, 8, 1000}; }

// dp, tp, pp, micro_batch, global_batch, seq_len, cp, vp.
ParallelConfig layout(int dp, int tp, int pp, int cp, int vp, int mbs, int gbs, int seq) {
  return ParallelConfig{dp, tp, pp, mbs, gbs, seq, cp, vp};
}

bool mentions(const std::vector<std::string>& broken, const std::string& words) {
  for (const std::string& b : broken)
    if (b.find(words) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& broken) {
  std::string out;
  for (const std::string& b : broken) out += b + " | ";
  return out;
}

// PipelineSplit's fields in order: given, account_for_embedding, account_for_loss, first_stage_layers,
// last_stage_layers.
PipelineSplit given(bool embedding, bool loss, int64_t first = 0, int64_t last = 0) {
  return PipelineSplit{true, embedding, loss, first, last};
}

TEST(MegatronLayoutRules, BaseCaseIsLegal) {
  EXPECT_TRUE(layout_violations(toy(), layout(2, 2, 2, 1, 1, 1, 8, 32)).empty());
  EXPECT_TRUE(layout_violations(toy(), layout(1, 2, 2, 2, 2, 1, 8, 32)).empty());
}

// transformer_config.py: num_attention_heads % tp.
TEST(MegatronLayoutRules, HeadsOverTp) {
  TransformerShape s = toy();
  s.heads = 12;  // 12 % 8 = 4; KV heads 8, ffn 96 divide by 8
  EXPECT_TRUE(mentions(layout_violations(s, layout(1, 8, 1, 1, 1, 1, 1, 32)), "attention heads"));
}

// transformer_config.py: num_query_groups a multiple or a divisor of tp; itertime models the multiple only.
TEST(MegatronLayoutRules, QueryGroupsOverTp) {
  TransformerShape s = toy();
  s.heads = 12, s.kv_heads = 6, s.ffn = 96;  // tp 4: 12 % 4 = 0, 96 % 4 = 0; 6 % 4 = 2 and 4 % 6 = 4
  const auto broken = layout_violations(s, layout(1, 4, 1, 1, 1, 1, 1, 32));
  EXPECT_TRUE(mentions(broken, "--num-query-groups 6 must be a multiple or a divisor")) << joined(broken);
  s.kv_heads = 2;  // tp 4: 4 % 2 = 0, Megatron replicates the KV heads: Megatron's rule holds, the model's limit does not
  const auto limits = framework_model_limits(s, layout(1, 4, 1, 1, 1, 1, 1, 32));
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_NE(limits[0].find("replicates"), std::string::npos);
  EXPECT_FALSE(mentions(layout_violations(s, layout(1, 4, 1, 1, 1, 1, 1, 32)), "multiple or a divisor"));
}

// tensor_parallel/layers.py ColumnParallelLinear: divide(ffn, tp).
TEST(MegatronLayoutRules, FfnOverTp) {
  TransformerShape s = toy();
  s.ffn = 98;  // 98 % 4 = 2
  EXPECT_TRUE(mentions(layout_violations(s, layout(1, 4, 1, 1, 1, 1, 1, 32)), "--ffn-hidden-size 98"));
}

// num_microbatches_calculator.py: gbs % (mbs x dp).
TEST(MegatronLayoutRules, GlobalBatch) {
  EXPECT_TRUE(mentions(layout_violations(toy(), layout(2, 1, 1, 1, 1, 2, 6, 32)), "--global-batch-size 6"));
  EXPECT_TRUE(layout_violations(toy(), layout(2, 1, 1, 1, 1, 2, 8, 32)).empty());
}

// arguments.py: seq % (2 cp) with cp > 1 (the load-balanced ring's two chunks per rank). 36 % 4 = 0 but 36 % 8 = 4.
TEST(MegatronLayoutRules, ContextParallelTwoChunksPerRank) {
  EXPECT_TRUE(mentions(layout_violations(toy(), layout(1, 1, 1, 4, 1, 1, 1, 36)), "2 x --context-parallel-size = 8"));
  EXPECT_TRUE(layout_violations(toy(), layout(1, 1, 1, 4, 1, 1, 1, 40)).empty());
}

// arguments.py: interleaving needs pp > 1; schedules.py: m a multiple of pp (group size pp in [pp, m], m mod pp 0).
TEST(MegatronLayoutRules, InterleavedSchedule) {
  EXPECT_TRUE(mentions(layout_violations(toy(), layout(1, 1, 1, 1, 2, 1, 4, 32)), "need --pipeline-model-parallel-size > 1"));
  // pp 2 vp 2 over 8 layers (2 each), m = 3: 3 % 2 = 1.
  EXPECT_TRUE(mentions(layout_violations(toy(), layout(1, 1, 2, 1, 2, 1, 3, 32)), "micro-batches (3"));
  EXPECT_TRUE(layout_violations(toy(), layout(1, 1, 2, 1, 2, 1, 4, 32)).empty());
  // Without interleaving m = 3 over pp 2 is legal.
  EXPECT_TRUE(layout_violations(toy(), layout(1, 1, 2, 1, 1, 1, 3, 32)).empty());
}

// arguments.py: "Number of layers should be divisible by the pipeline-model-parallel size" (the plain split
// a user's line without the accounting options asks for), and with it the accounted 126 + 2 = 128 over 16.
TEST(MegatronLayoutRules, PlainSplitAndAccounting) {
  const TransformerShape s = toy(126);
  const ParallelConfig c = layout(1, 1, 16, 1, 1, 1, 16, 32);
  const auto plain = layout_violations(s, c, given(false, false));
  EXPECT_TRUE(mentions(plain, "126 layers do not split evenly over pp 16")) << joined(plain);
  EXPECT_TRUE(mentions(plain, "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split make it 128"));
  EXPECT_TRUE(layout_violations(s, c, given(true, true)).empty());
  // Only one accounted: 127 % 16 = 15.
  EXPECT_TRUE(mentions(layout_violations(s, c, given(true, false)), "126 layers + the embedding = 127"));
  // Not given: resolved to the accounted split, legal.
  EXPECT_TRUE(layout_violations(s, c).empty());
  const PipelineSplit resolved = resolve_pipeline_split(126, 16, 1, {});
  EXPECT_TRUE(resolved.account_for_embedding && resolved.account_for_loss && !resolved.given);
  EXPECT_EQ(resolve_pipeline_split(126, 16, 1, given(false, false)), given(false, false));  // a given split stays
  // get_num_layers_to_build: 128 / 16 = 8 per rank; rank 0 and rank 15 build 7.
  const std::vector<int64_t> counts = megatron_stage_layer_counts(126, 16, 1, given(true, true));
  ASSERT_EQ(counts.size(), 16u);
  EXPECT_EQ(counts[0], 7);
  EXPECT_EQ(counts[1], 8);
  EXPECT_EQ(counts[15], 7);
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), int64_t{0}), 126);
  // 80 layers over pp 3: neither 80 nor 82 splits; refused with no accounting hint.
  const auto eighty = layout_violations(toy(80), layout(1, 1, 3, 1, 1, 1, 3, 32));
  EXPECT_TRUE(mentions(eighty, "80 layers do not split evenly over pp 3")) << joined(eighty);
  EXPECT_FALSE(mentions(eighty, "account-for"));
}

// transformer_block.py with vp: (126 + 2) / 8 = 16 per rank, 16 / 8 = 2 per chunk; the first chunk of rank 0
// and the last chunk of rank 7 build 1 (NeMo's 405B tp8 pp8 vp8).
TEST(MegatronLayoutRules, AccountedSplitWithVirtualStages) {
  const std::vector<int64_t> counts = megatron_stage_layer_counts(126, 8, 8, given(true, true));
  ASSERT_EQ(counts.size(), 64u);
  EXPECT_EQ(counts[0], 1);
  EXPECT_EQ(counts[63], 1);
  for (std::size_t j = 1; j < 63; ++j) EXPECT_EQ(counts[j], 2) << j;
  // Plain: 126 % 8 = 6: refused; the rank's 16 accounted layers into vp 3: 16 % 3 = 1: refused.
  EXPECT_FALSE(layout_violations(toy(126), layout(1, 1, 8, 1, 8, 1, 8, 32), given(false, false)).empty());
  EXPECT_TRUE(mentions(layout_violations(toy(126), layout(1, 1, 8, 1, 3, 1, 8, 32), given(true, true)),
                       "the 16 layers of each pipeline rank"));
  EXPECT_TRUE(layout_violations(toy(126), layout(1, 1, 8, 1, 8, 1, 8, 32), given(true, true)).empty());
  // The memory model's stages are these (one split for both).
  const auto stages = megatron_virtual_stage_layers(126, 8, 8);
  EXPECT_EQ(stages[0].num_layers, 1);
  EXPECT_EQ(stages[1].num_layers, 2);
  EXPECT_THROW(megatron_virtual_stage_layers(126, 8, 8, given(false, false)), UserError);
}

// transformer_config.py "Uneven PP": first / last counts, the middle ranks split evenly, each a multiple of vp.
TEST(MegatronLayoutRules, DecoderFirstAndLastPipelineLayers) {
  // 80 over pp 3: first 26, last 26, middle 28.
  EXPECT_TRUE(layout_violations(toy(80), layout(1, 1, 3, 1, 1, 1, 3, 32), given(false, false, 26, 26)).empty());
  std::vector<int64_t> counts = megatron_stage_layer_counts(80, 3, 1, given(false, false, 26, 26));
  EXPECT_EQ(counts, (std::vector<int64_t>{26, 28, 26}));
  // first 26 only: 54 over 2 middle-and-last ranks = 27 each.
  counts = megatron_stage_layer_counts(80, 3, 1, given(false, false, 26, 0));
  EXPECT_EQ(counts, (std::vector<int64_t>{26, 27, 27}));
  // vp 2 with pp 3 (m 6): rank 0 26 / 2 = 13 per chunk, rank 1 28 / 2 = 14, rank 2 13; j = chunk * 3 + rank.
  EXPECT_TRUE(layout_violations(toy(80), layout(1, 1, 3, 1, 2, 1, 6, 32), given(false, false, 26, 26)).empty());
  counts = megatron_stage_layer_counts(80, 3, 2, given(false, false, 26, 26));
  EXPECT_EQ(counts, (std::vector<int64_t>{13, 14, 13, 13, 14, 13}));
  // first 25 with vp 2: 25 % 2 = 1.
  EXPECT_TRUE(mentions(layout_violations(toy(80), layout(1, 1, 3, 1, 2, 1, 6, 32), given(false, false, 25, 27)),
                       "--decoder-first-pipeline-num-layers 25 must be a multiple of vp 2"));
  // Middle 80 - 25 - 26 = 29 over 2 middle ranks (pp 4): 29 % 2 = 1.
  EXPECT_TRUE(
      mentions(layout_violations(toy(80), layout(1, 1, 4, 1, 1, 1, 4, 32), given(false, false, 25, 26)), "the 29 layers left"));
  // pp 2 with both given: 10 - 4 - 4 = 2 layers for no middle rank.
  EXPECT_TRUE(mentions(layout_violations(toy(10), layout(1, 1, 2, 1, 1, 1, 2, 32), given(false, false, 4, 4)),
                       "leave 2 layers for 0 middle"));
  // Not with the accounting options.
  EXPECT_TRUE(
      mentions(layout_violations(toy(80), layout(1, 1, 3, 1, 1, 1, 3, 32), given(true, false, 26, 26)), "cannot be combined"));
}

// arguments.py (SP turned off at tp 1), mappings.py (tokens per CP rank over tp), arguments.py
// (--tp-comm-overlap needs SP; --overlap-param-gather needs the distributed optimizer and overlapped reduction).
TEST(MegatronLayoutRules, RecipeSwitches) {
  FrameworkRecipe r;
  r.techniques.sequence_parallel = true;
  EXPECT_TRUE(recipe_violations(layout(1, 1, 1, 1, 1, 1, 1, 36), r).empty());  // off at tp 1 (arguments.py), not refused
  EXPECT_TRUE(recipe_violations(layout(1, 4, 1, 1, 1, 1, 1, 32), r).empty());
  // seq 36 over tp 8: 36 % 8 = 4 (legal without SP).
  EXPECT_TRUE(mentions(recipe_violations(layout(1, 8, 1, 1, 1, 1, 1, 36), r), "36 tokens per CP rank"));
  r.techniques.sequence_parallel = false;
  EXPECT_TRUE(recipe_violations(layout(1, 8, 1, 1, 1, 1, 1, 36), r).empty());
  r.tp_comm_overlap = true;
  EXPECT_TRUE(mentions(recipe_violations(layout(1, 8, 1, 1, 1, 1, 1, 32), r), "--tp-comm-overlap needs --sequence-parallel"));
  r.tp_comm_overlap = false;
  r.techniques.overlap_parameter_gather = true;
  r.techniques.distributed_optimizer = true;
  EXPECT_TRUE(mentions(recipe_violations(layout(1, 8, 1, 1, 1, 1, 1, 32), r), "--overlap-param-gather needs"));
  r.techniques.overlap_gradient_reduction = true;
  EXPECT_TRUE(recipe_violations(layout(1, 8, 1, 1, 1, 1, 1, 32), r).empty());
}

// NeMo's 405B layout (llama31_405b.py: tp8 pp8 cp4 vp... here vp8 with the embedding and loss counted,
// as issue 44 states it) through score-published's reader and predict_framework: one rule set, one answer.
TEST(MegatronLayoutRules, Nemo405bPredictedByScorePublishedAndPredictAlike) {
  const LlamaSpec spec = load_llama_config(std::string(ITERTIME_SOURCE_DIR) + "/data/models/llama3.1-405b.json");
  const TransformerShape shape = shape_of(spec);
  const std::string row = R"({"source": {"id": "t", "title": "t", "reference": "t", "framework": "Megatron-Core"},
    "rows": [{"id": "405b", "where": "test", "hardware": "h100-sxm", "host_cpu": "intel", "gpus": 1024,
      "model": {"name": "LLaMA 3.1 405B", "hidden": 16384, "ffn": 53248, "layers": 126, "heads": 128, "kv_heads": 8,
                "head_dim": 128, "vocab": 128256, "mlp": "swiglu", "norm": "rmsnorm", "positions": "rotary",
                "linear_bias": false, "tied_embeddings": false},
      "layout": {"dp": 8, "tp": 8, "pp": 8, "cp": 2, "vp": 8, "micro_batch": 1, "global_batch": 64, "seq_len": 8192},
      "precision": "amp-bf16",
      "techniques": {"attention": "fused", "dropout": false, "sequence_parallel": true, "distributed_optimizer": true,
                     "recompute": "none", "overlap_gradient_reduction": true, "overlap_parameter_gather": true,
                     "tp_comm_overlap": true},
      "measured": {"value": 1, "unit": "s per iteration"}}]})";
  const validate::PublishedSource source = validate::parse_published_figures(row, "test.json");
  ASSERT_EQ(source.rows.size(), 1u);
  const FrameworkTarget target = framework_target("h100-sxm", std::string(ITERTIME_SOURCE_DIR) + "/data/hardware");
  const validate::PublishedRow& published = source.rows[0];
  const FrameworkOutcome from_row = predict_framework(target, {published.shape, published.config, published.recipe});
  ASSERT_TRUE(from_row.ok()) << from_row.reason;
  FrameworkRecipe recipe = published.recipe;
  recipe.pipeline_split = given(true, true);  // as a NeMo / Megatron-LM line states it
  const FrameworkOutcome from_predict = predict_framework(target, {shape, published.config, recipe});
  ASSERT_TRUE(from_predict.ok()) << from_predict.reason;
  EXPECT_EQ(from_row.prediction->total_us, from_predict.prediction->total_us);
  EXPECT_EQ(from_row.prediction->peak_memory_bytes, from_predict.prediction->peak_memory_bytes);
  // The plain split Megatron-LM would refuse: so does predict.
  recipe.pipeline_split = given(false, false);
  const FrameworkOutcome plain = predict_framework(target, {shape, published.config, recipe});
  EXPECT_FALSE(plain.ok());
  EXPECT_NE(plain.reason.find("126 layers do not split evenly over pp 8"), std::string::npos) << plain.reason;
}

}  // namespace
}  // namespace itertime::predict::framework
