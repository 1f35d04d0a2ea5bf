// test_reader_defaults.cpp: every default a user relies on in the readers of users' formats (formats/,
// issue 45), each by hand from the framework's own rule: Megatron-LM's arguments (the global batch when
// not given, the SwiGLU FFN size, GQA without --num-query-groups, the parallel sizes, norm epsilon, rotary
// base, tied embeddings, the tokenizer's vocabulary, the fp8 formats and recipes, SP at tp 1, recompute
// full's method), NeMo / Megatron-Bridge / Lightning precision strings and fp8 recipes, the trainer's
// world, torchtitan's degrees (replicate x shard, -1, the defaults) and its batches, and the warm-up rule
// of log timings (formats/log_timings.hpp settle()).
// Invariants: pure (text in, typed values out); no file is read.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "formats/log_timings.hpp"
#include "formats/megatron_args.hpp"
#include "formats/nemo_config.hpp"
#include "formats/torchtitan_toml.hpp"
#include "tests/unit/user_error.hpp"

namespace itertime::formats {
namespace {

// LLaMA-shaped sizes with nothing defaulted that a test below defaults.
const std::string kBase =
    "--num-layers 8 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --normalization RMSNorm "
    "--position-embedding-type rope --swiglu --disable-bias-linear --vocab-size 32000 --micro-batch-size 2 --bf16 ";

UserRun run_of(const std::string& line) { return user_run_from_megatron(megatron_arguments_from_command_line(line)); }

using itertime::testing::user_error_of;

bool assumed(const UserRun& run, const std::string& text) {
  return std::any_of(run.assumed.begin(), run.assumed.end(),
                     [&](const std::string& a) { return a.find(text) != std::string::npos; });
}

TEST(MegatronDefaults, GlobalBatchIsMicroBatchTimesDpWhenNotGiven) {
  // --world-size 16 over tp 2 x pp 2: dp = 16 / 4 = 4; the global batch mbs 2 x dp 4 = 8.
  const UserRun run = run_of(kBase +
                             "--ffn-hidden-size 14336 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                             "--world-size 16");
  EXPECT_TRUE(run.data_parallel_given);
  EXPECT_FALSE(run.global_batch_given);
  EXPECT_EQ(run.config.dp, 4);
  EXPECT_EQ(run.config.global_batch, 8);
  const UserRun given = run_of(kBase + "--ffn-hidden-size 14336 --world-size 4 --global-batch-size 64");
  EXPECT_TRUE(given.global_batch_given);
  EXPECT_EQ(given.config.global_batch, 64);
  EXPECT_EQ(given.config.dp, 4);
  // No world: dp is the caller's (1 until with_data_parallel), the batch one micro-batch.
  const UserRun alone = run_of(kBase + "--ffn-hidden-size 14336");
  EXPECT_FALSE(alone.data_parallel_given);
  EXPECT_EQ(alone.config.dp, 1);
  EXPECT_EQ(alone.config.global_batch, 2);
  // Sizes not given: tp, pp, cp 1, vp 1.
  EXPECT_EQ(alone.config.tp, 1);
  EXPECT_EQ(alone.config.pp, 1);
  EXPECT_EQ(alone.config.cp, 1);
  EXPECT_EQ(alone.config.vp, 1);
  // A log's data_parallel_size: world = dp x tp x pp x cp = 3 x 2 x 2 = 12.
  const UserRun logged = run_of(kBase +
                                "--ffn-hidden-size 14336 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                                "--data-parallel-size 3");
  EXPECT_EQ(logged.config.world_size(), 12);
  EXPECT_EQ(logged.config.dp, 3);
  EXPECT_EQ(logged.config.global_batch, 6);
}

TEST(MegatronDefaults, SwigluFfnIsTwoThirdsOfFourHiddenDownToSixtyFour) {
  // 4 x 4096 x 2 / 3 = 10922 (integer division), down to a multiple of 64: 170 x 64 = 10880.
  const UserRun run = run_of(kBase);
  EXPECT_EQ(run.model.intermediate_size, 10880);
  EXPECT_TRUE(assumed(run, "--ffn-hidden-size 10880"));
  // hidden 2048 (16 heads of 128): 4 x 2048 x 2 / 3 = 5461, down to 85 x 64 = 5440 (a multiple of 128
  // would be 5376: the 64 matters here, where 4096's 10880 is a multiple of 128 too).
  std::string small = kBase;
  small.replace(small.find("--hidden-size 4096"), 18, "--hidden-size 2048");
  small.replace(small.find("--num-attention-heads 32"), 24, "--num-attention-heads 16");
  EXPECT_EQ(run_of(small).model.intermediate_size, 5440);
  // Given, it is taken as given and nothing is assumed about it.
  const UserRun given = run_of(kBase + "--ffn-hidden-size 14336");
  EXPECT_EQ(given.model.intermediate_size, 14336);
  EXPECT_FALSE(assumed(given, "--ffn-hidden-size"));
  EXPECT_EQ(given.model.head_dim, 128);  // hidden / heads
}

TEST(MegatronDefaults, GroupQueryAttentionWithoutGroupsIsOneGroup) {
  const UserRun one = run_of(kBase + "--ffn-hidden-size 14336 --group-query-attention");
  EXPECT_EQ(one.model.num_kv_heads, 1);
  EXPECT_TRUE(assumed(one, "--num-query-groups 1"));
  const UserRun eight = run_of(kBase + "--ffn-hidden-size 14336 --group-query-attention --num-query-groups 8");
  EXPECT_EQ(eight.model.num_kv_heads, 8);
  EXPECT_FALSE(assumed(eight, "--num-query-groups"));
  // Groups without --group-query-attention: Megatron-LM ignores them, multi-head attention.
  const UserRun ignored = run_of(kBase + "--ffn-hidden-size 14336 --num-query-groups 8");
  EXPECT_EQ(ignored.model.num_kv_heads, 32);
  EXPECT_TRUE(assumed(ignored, "without --group-query-attention"));
  const UserRun mha = run_of(kBase + "--ffn-hidden-size 14336");
  EXPECT_EQ(mha.model.num_kv_heads, 32);
  EXPECT_NE(user_error_of([] {
              run_of(kBase + "--ffn-hidden-size 14336 --group-query-attention --num-query-groups 5");
            }).find("num-query-groups"),
            std::string::npos);
}

TEST(MegatronDefaults, NormRotaryTyingAndTheTokenizersVocabulary) {
  const UserRun run = run_of(kBase + "--ffn-hidden-size 14336");
  EXPECT_DOUBLE_EQ(run.model.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(run.model.rope_theta, 10000);
  EXPECT_TRUE(run.model.tie_word_embeddings) << "Megatron-LM ties unless --untie-embeddings-and-output-weights";
  EXPECT_FALSE(run_of(kBase + "--ffn-hidden-size 14336 --untie-embeddings-and-output-weights").model.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(run_of(kBase + "--ffn-hidden-size 14336 --rotary-base 500000").model.rope_theta, 500000);
  EXPECT_DOUBLE_EQ(run_of(kBase + "--ffn-hidden-size 14336 --norm-epsilon 1e-6").model.rms_norm_eps, 1e-6);
  std::string no_vocab = kBase + "--ffn-hidden-size 14336 ";
  no_vocab.replace(no_vocab.find("--vocab-size 32000"), 18, "");
  const UserRun llama3 =
      run_of(no_vocab + "--tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Meta-Llama-3.1-8B");
  EXPECT_EQ(llama3.model.vocab_size, 128256);
  EXPECT_TRUE(assumed(llama3, "vocabulary 128256"));
  EXPECT_EQ(run_of(no_vocab + "--tokenizer-type Llama2Tokenizer").model.vocab_size, 32000);
  EXPECT_EQ(run_of(no_vocab + "--tokenizer-type HuggingFaceTokenizer --tokenizer-model /x/Llama-2-7b").model.vocab_size, 32000);
  EXPECT_NE(user_error_of([&] { run_of(no_vocab + "--tokenizer-type GPT2BPETokenizer"); }).find("no vocabulary size"),
            std::string::npos);
}

TEST(MegatronDefaults, PrecisionsAndFp8FormatsAndRecipes) {
  const std::string base = kBase + "--ffn-hidden-size 14336 ";
  EXPECT_EQ(run_of(base).recipe.precision, PrecisionName::kAmpBf16);
  std::string fp16 = base;
  fp16.replace(fp16.find("--bf16"), 6, "--fp16");
  EXPECT_EQ(run_of(fp16).recipe.precision, PrecisionName::kAmpFp16);
  const UserRun hybrid = run_of(base + "--fp8-format hybrid");
  EXPECT_EQ(hybrid.recipe.precision, PrecisionName::kFp8);
  EXPECT_EQ(hybrid.recipe.fp8_recipe, predict::framework::Fp8Recipe::kDelayed) << "delayed scaling by default";
  EXPECT_FALSE(hybrid.recipe.fp8_param_gather);
  const UserRun e4m3 = run_of(base + "--fp8-format e4m3");
  EXPECT_EQ(e4m3.recipe.precision, PrecisionName::kFp8);
  EXPECT_TRUE(assumed(e4m3, "e4m3 predicted as hybrid"));
  EXPECT_EQ(run_of(base + "--fp8-format hybrid --fp8-recipe tensorwise").recipe.fp8_recipe,
            predict::framework::Fp8Recipe::kCurrent);
  EXPECT_TRUE(run_of(base + "--fp8-format hybrid --fp8-param-gather").recipe.fp8_param_gather);
  EXPECT_NE(user_error_of([&] { run_of(base + "--fp8-format hybrid --fp8-recipe mxfp8"); }).find("fp8-recipe"),
            std::string::npos);
  EXPECT_NE(user_error_of([&] { run_of(fp16 + "--fp8-format hybrid"); }).find("--bf16"), std::string::npos);
  EXPECT_NE(user_error_of([&] { run_of(base + "--fp8-param-gather"); }).find("needs --fp8-format"), std::string::npos);
  EXPECT_TRUE(run_of(base).recipe.gradient_accumulation_fusion) << "Megatron-LM's default";
  EXPECT_FALSE(run_of(base).recipe.tp_comm_overlap);
}

TEST(MegatronDefaults, TechniquesFollowTheLayout) {
  const std::string base = kBase + "--ffn-hidden-size 14336 --world-size 8 ";
  const UserRun tp1 = run_of(base + "--sequence-parallel");
  EXPECT_FALSE(tp1.recipe.techniques.sequence_parallel) << "Megatron-LM turns SP off at tp 1";
  EXPECT_FALSE(tp1.recipe.techniques.vocab_parallel);
  const UserRun tp2 = run_of(base + "--sequence-parallel --tensor-model-parallel-size 2");
  EXPECT_TRUE(tp2.recipe.techniques.sequence_parallel);
  EXPECT_TRUE(tp2.recipe.techniques.vocab_parallel);
  const UserRun full = run_of(base + "--recompute-granularity full");
  EXPECT_EQ(full.recipe.techniques.recompute, Recompute::kFull);
  EXPECT_TRUE(assumed(full, "--recompute-method uniform"));
  EXPECT_EQ(run_of(base + "--recompute-granularity selective").recipe.techniques.recompute, Recompute::kSelective);
  EXPECT_EQ(run_of(base).recipe.techniques.recompute, Recompute::kNone);
  EXPECT_NE(
      user_error_of([&] { run_of(base + "--overlap-param-gather --use-distributed-optimizer"); }).find("overlap-grad-reduce"),
      std::string::npos);
  const UserRun all = run_of(base + "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather");
  EXPECT_EQ(recipe_text(all.recipe.techniques), "dopt+ovl+opg");
}

// NeMo 2 / Megatron-Bridge: a mixed-precision recipe's name or Lightning's precision string.
std::map<std::string, std::string> precision_keys(const std::string& yaml) {
  const MegatronArguments a = nemo_arguments(yaml, "n.yaml");
  std::map<std::string, std::string> out;
  for (const char* key : {"bf16", "fp16", "fp8", "fp8_recipe", "fp32_precision"}) {
    if (a.values.count(key)) out[key] = a.values.at(key);
  }
  return out;
}

TEST(NemoDefaults, PrecisionStringsAndFp8Recipes) {
  using Keys = std::map<std::string, std::string>;
  EXPECT_EQ(precision_keys("mixed_precision: bf16_mixed\n"), (Keys{{"bf16", "true"}}));
  EXPECT_EQ(precision_keys("mixed_precision: fp16_mixed\n"), (Keys{{"fp16", "true"}}));
  EXPECT_EQ(precision_keys("mixed_precision: bf16_with_fp8_delayed_scaling_mixed\n"),
            (Keys{{"bf16", "true"}, {"fp8", "hybrid"}, {"fp8_recipe", "delayed"}}));
  EXPECT_EQ(precision_keys("mixed_precision: bf16_with_fp8_current_scaling_mixed\n"),
            (Keys{{"bf16", "true"}, {"fp8", "hybrid"}, {"fp8_recipe", "tensorwise"}}));
  EXPECT_EQ(precision_keys("mixed_precision: bf16_with_mxfp8_mixed\n"), (Keys{{"bf16", "true"}, {"fp8_recipe", "mxfp8"}}));
  // Lightning's precision plugin: "bf16-mixed", "16-mixed", "32".
  EXPECT_EQ(precision_keys("trainer:\n  plugins:\n    precision: bf16-mixed\n"), (Keys{{"bf16", "true"}}));
  EXPECT_EQ(precision_keys("trainer:\n  plugins:\n    precision: 16-mixed\n"), (Keys{{"fp16", "true"}}));
  EXPECT_EQ(precision_keys("trainer:\n  plugins:\n    precision: '32'\n"), (Keys{{"fp32_precision", "32"}}));
  // A precision outside a plugins section is not a recipe name.
  EXPECT_TRUE(precision_keys("model:\n  precision: bf16-mixed\n").empty());
}

TEST(NemoDefaults, TheWorldIsDevicesTimesNodesAndConfigNamesMapToMegatrons) {
  EXPECT_EQ(nemo_arguments("trainer:\n  devices: 8\n  num_nodes: 4\n", "n.yaml").world_size, 32);
  EXPECT_EQ(nemo_arguments("trainer:\n  devices: 8\n", "n.yaml").world_size, 8) << "one node when num_nodes is absent";
  EXPECT_EQ(nemo_arguments("model:\n  num_layers: 2\n", "n.yaml").world_size, 0);
  const MegatronArguments a = nemo_arguments(
      "model:\n  gated_linear_unit: true\n  layernorm_epsilon: 1.0e-06\n  virtual_pipeline_model_parallel_size: 2\n"
      "  fp8_param: true\n",
      "n.yaml");
  EXPECT_EQ(a.values.at("swiglu"), "true");
  EXPECT_EQ(a.values.at("norm_epsilon"), "1.0e-06");
  EXPECT_EQ(a.values.at("num_virtual_stages_per_pipeline_rank"), "2");
  EXPECT_EQ(a.values.at("fp8_param_gather"), "true");
  EXPECT_EQ(a.shown_as.at("swiglu"), "model.gated_linear_unit");
  // A configuration's num_query_groups is the KV heads, without a switch.
  const UserRun run = read_nemo_config_text(
      "model:\n  num_layers: 8\n  hidden_size: 4096\n  ffn_hidden_size: 14336\n  num_attention_heads: 32\n"
      "  num_query_groups: 8\n  seq_length: 4096\n  normalization: RMSNorm\n  position_embedding_type: rope\n"
      "  gated_linear_unit: true\n  add_bias_linear: false\n  vocab_size: 32000\n  micro_batch_size: 1\n"
      "mixed_precision: bf16_with_fp8_delayed_scaling_mixed\n",
      "n.yaml");
  EXPECT_EQ(run.model.num_kv_heads, 8);
  EXPECT_EQ(run.recipe.precision, PrecisionName::kFp8);
  EXPECT_EQ(run.recipe.fp8_recipe, predict::framework::Fp8Recipe::kDelayed);
}

// torchtitan: dp = replicate x shard; shard -1 is the rest of the world (dp left to the caller).
const std::string kTitan = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\nseq_len = 8192\n";

TEST(TorchtitanDefaults, DegreesAndBatches) {
  const UserRun rest = read_torchtitan_toml_text(kTitan, "t.toml");
  EXPECT_FALSE(rest.data_parallel_given) << "shard -1 (the default): the rest of the world";
  EXPECT_EQ(rest.config.tp, 1);
  EXPECT_EQ(rest.config.pp, 1);
  EXPECT_EQ(rest.config.cp, 1);
  EXPECT_EQ(rest.config.micro_batch, 2) << "without a pipeline, the local batch";
  EXPECT_EQ(rest.recipe.techniques.recompute, Recompute::kSelective) << "activation_checkpoint.mode selective, op";
  EXPECT_EQ(rest.recipe.precision, PrecisionName::kAmpBf16);
  // replicate 2 x shard 4 = dp 8, over tp 2 x cp 2: world 32; global = local 2 x dp 8 = 16.
  const UserRun both =
      read_torchtitan_toml_text(kTitan +
                                    "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n"
                                    "tensor_parallel_degree = 2\ncontext_parallel_degree = 2\n",
                                "t.toml");
  EXPECT_TRUE(both.data_parallel_given);
  EXPECT_EQ(both.config.dp, 8);
  EXPECT_EQ(both.config.tp, 2);
  EXPECT_EQ(both.config.cp, 2);
  EXPECT_EQ(both.config.world_size(), 32);
  EXPECT_EQ(both.config.global_batch, 16);
  EXPECT_TRUE(both.recipe.techniques.sequence_parallel);
  EXPECT_EQ(recipe_text(both.recipe.techniques), "sp+vp+dopt+rc-sel+ovl+opg");
  // A given global batch wins.
  const UserRun global = read_torchtitan_toml_text(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\nglobal_batch_size = 64\nseq_len = 8192\n"
      "[parallelism]\ndata_parallel_shard_degree = 4\n",
      "t.toml");
  EXPECT_EQ(global.config.global_batch, 64);
  EXPECT_EQ(global.config.dp, 4);
  // pp > 1: the micro-batch is pipeline_parallel_microbatch_size (default 1); Interleaved1F1B without
  // layers per stage: 2 virtual stages.
  const UserRun pipe =
      read_torchtitan_toml_text(kTitan +
                                    "[parallelism]\ndata_parallel_shard_degree = 1\npipeline_parallel_degree = 2\n"
                                    "pipeline_parallel_schedule = \"Interleaved1F1B\"\n",
                                "t.toml");
  EXPECT_EQ(pipe.config.micro_batch, 1);
  EXPECT_EQ(pipe.config.vp, 2);
  EXPECT_EQ(pipe.config.dp, 1);
  EXPECT_FALSE(pipe.recipe.techniques.distributed_optimizer) << "dp x cp 1: nothing to shard";
  EXPECT_NE(user_error_of([] {
              read_torchtitan_toml_text(kTitan + "[parallelism]\ndata_parallel_shard_degree = 0\n", "t.toml");
            }).find("-1 (the rest)"),
            std::string::npos);
}

TEST(TorchtitanDefaults, Float8AndAsyncTp) {
  const UserRun fp8 = read_torchtitan_toml_text(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"float8\"]\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n"
      "[parallelism]\ntensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n",
      "t.toml");
  EXPECT_EQ(fp8.recipe.precision, PrecisionName::kFp8);
  EXPECT_EQ(fp8.recipe.fp8_recipe, predict::framework::Fp8Recipe::kCurrent);
  EXPECT_FALSE(fp8.recipe.fp8_param_gather);
  EXPECT_TRUE(fp8.recipe.tp_comm_overlap);
  const UserRun plain = read_torchtitan_toml_text(kTitan, "t.toml");
  EXPECT_EQ(plain.recipe.precision, PrecisionName::kAmpBf16);
  EXPECT_FALSE(plain.recipe.tp_comm_overlap);
}

// settle(): the first interval dropped always; then each leading one more than 5 % from the median of
// those after it; at least 2 steady intervals.
std::vector<LogInterval> intervals(const std::vector<double>& times) {
  std::vector<LogInterval> out;
  for (std::size_t i = 0; i < times.size(); ++i)
    out.push_back(LogInterval{i + 1, static_cast<int64_t>(10 * (i + 1)), 10, times[i]});
  return out;
}

TEST(LogWarmup, FirstIntervalAlwaysDroppedThenThoseBeyondFivePercent) {
  // 100 is within 5 % of the rest's median but still dropped (it holds the first iteration).
  const LogMeasurement steady = settle("x.log", intervals({100, 100, 100, 100}));
  EXPECT_EQ(steady.intervals_warmup, 1u);
  EXPECT_EQ(steady.warmup_iters, 10);
  EXPECT_EQ(steady.timed_iters, 30);
  // 105 against the median 100 of the rest: exactly 5 %, kept; 105.1: dropped.
  EXPECT_EQ(settle("x.log", intervals({500, 105, 100, 100, 100})).intervals_warmup, 1u);
  EXPECT_EQ(settle("x.log", intervals({500, 105.1, 100, 100, 100})).intervals_warmup, 2u);
  EXPECT_EQ(settle("x.log", intervals({500, 94.9, 100, 100, 100})).intervals_warmup, 2u);
  // Median, mean (iteration-weighted), spread over the steady ones: 100, 102, 98 -> median 100, floor
  // (0 + 2 + 2) / 3 / 100 = 1.333 %.
  const LogMeasurement m = settle("x.log", intervals({900, 100, 102, 98}));
  EXPECT_DOUBLE_EQ(m.time_us_median, 100);
  EXPECT_DOUBLE_EQ(m.time_us_mean, 100);
  EXPECT_DOUBLE_EQ(m.time_us_min, 98);
  EXPECT_DOUBLE_EQ(m.time_us_max, 102);
  EXPECT_NEAR(m.spread_pct, 4.0 / 3.0, 1e-12);
  // At least two steady intervals remain: the warm-up stops dropping there, and 2 lines are too few.
  EXPECT_EQ(settle("x.log", intervals({900, 300, 100, 100})).intervals_warmup, 2u);
  EXPECT_EQ(settle("x.log", intervals({900, 300, 200, 100})).intervals_warmup, 2u);
  EXPECT_NE(user_error_of([] { settle("x.log", intervals({900, 100})); }).find("at least 2"), std::string::npos);
}

}  // namespace
}  // namespace itertime::formats
