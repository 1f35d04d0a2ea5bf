// test_formats.cpp: the users' own formats (formats/, issue 34): the shell-like split of an arguments
// file, Megatron-LM's options to a UserRun, the launch line plan emits read back to the same candidate,
// NeMo 2 / Megatron-Bridge YAML and torchtitan TOML, and the refusals (one line naming file and line).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/errors.hpp"
#include "formats/megatron_args.hpp"
#include "formats/megatron_emit.hpp"
#include "formats/nemo_config.hpp"
#include "formats/torchtitan_toml.hpp"
#include "formats/user_input.hpp"
#include "tests/unit/user_error.hpp"

namespace itertime::formats {
namespace {

const std::string kSource = ITERTIME_SOURCE_DIR;
const std::string kLlama =
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
    "--num-query-groups 8 --seq-length 4096 --normalization RMSNorm --position-embedding-type rope --swiglu "
    "--disable-bias-linear --untie-embeddings-and-output-weights --vocab-size 128256 --micro-batch-size 1 --bf16 ";

using itertime::testing::user_error_of;

TEST(MegatronArgs, SplitsLikeAShell) {
  const std::vector<Word> words = split_words("a \\\n  --b 'c d' # comment --e\n\"f\\\"g\" --h=1\n", "x", true);
  ASSERT_EQ(words.size(), 5u);
  EXPECT_EQ(words[0].text, "a");
  EXPECT_EQ(words[2].text, "c d");
  EXPECT_EQ(words[2].line, 2);
  EXPECT_EQ(words[3].text, "f\"g");
  EXPECT_EQ(words[3].line, 3);
  EXPECT_EQ(words[4].text, "--h=1");
  EXPECT_NE(user_error_of([] { split_words("--a 'b\n", "f.sh"); }).find("f.sh:1: a quote (') is never closed"),
            std::string::npos);
}

TEST(MegatronArgs, ReadsTheFixtureAsLlama31_8b) {
  const UserRun run = read_user_run(kSource + "/tests/formats/fixtures/llama3_8b_megatron.sh");
  EXPECT_EQ(run.format, "megatron-args");
  EXPECT_EQ(run.model.num_layers, 32);
  EXPECT_EQ(run.model.hidden_size, 4096);
  EXPECT_EQ(run.model.intermediate_size, 14336);
  EXPECT_EQ(run.model.num_kv_heads, 8);
  EXPECT_EQ(run.model.vocab_size, 128256);
  EXPECT_FALSE(run.model.tie_word_embeddings);
  EXPECT_EQ(run.config.world_size(), 16);  // torchrun --nproc-per-node 8 --nnodes 2
  EXPECT_EQ(run.config.dp, 2);
  EXPECT_EQ(run.config.tp, 4);
  EXPECT_EQ(run.config.pp, 2);
  EXPECT_EQ(recipe_text(run.recipe.techniques), "sp+vp+dopt+ovl+opg");
  EXPECT_EQ(run.recipe.precision, PrecisionName::kAmpBf16);
  const std::vector<std::string> expected = {"--data-path /data/my corpus_text_document", "--log-interval 1", "--lr 3.0e-4",
                                             "--min-lr 3.0e-5", "--train-iters 100"};
  EXPECT_EQ(run.not_understood, expected);
}

// The launch line of a candidate reads back to the same model, layout and recipe.
TEST(MegatronArgs, EmittedLaunchLinesReadBack) {
  LlamaSpec model;
  model.num_layers = 32;
  model.hidden_size = 4096;
  model.intermediate_size = 14336;
  model.num_heads = 32;
  model.num_kv_heads = 8;
  model.head_dim = 128;
  model.max_position_embeddings = 131072;
  model.rms_norm_eps = 1e-5;
  model.rope_theta = 500000;
  using predict::framework::Fp8Recipe;
  using predict::framework::FrameworkRecipe;
  struct Case {
    ParallelConfig config;
    FrameworkRecipe recipe;
    int64_t vocab;
    bool tied;
  };
  std::vector<Case> cases;
  for (const char* techniques : {"", "sp+vp+dopt+ovl+opg", "sp+vp+dopt+rc-sel+ovl", "sp+vp+rc-full", "dopt+rc-full+ovl+opg"}) {
    for (PrecisionName precision : {PrecisionName::kAmpBf16, PrecisionName::kAmpFp16, PrecisionName::kFp8}) {
      Case c{ParallelConfig{4, 2, 2, 2, 64, 4096}, {}, 128256, false};
      c.config.cp = 2;
      c.config.vp = 2;
      c.recipe.precision = precision;
      c.recipe.techniques = parse_recipe_text(techniques);
      c.recipe.techniques.vocab_parallel = true;  // Megatron's output layer at tp 2
      if (precision == PrecisionName::kFp8) {
        c.recipe.fp8_recipe = Fp8Recipe::kCurrent;
        c.recipe.fp8_param_gather = c.recipe.techniques.distributed_optimizer;
      }
      c.recipe.tp_comm_overlap = c.recipe.techniques.sequence_parallel;
      cases.push_back(c);
    }
  }
  Case small{ParallelConfig{8, 1, 1, 4, 32, 2048}, {}, 50000, true};
  small.recipe.gradient_accumulation_fusion = false;
  cases.push_back(small);
  for (const Case& c : cases) {
    model.vocab_size = c.vocab;
    model.tie_word_embeddings = c.tied;
    const std::string line = megatron_command_line(model, c.config, c.recipe, 8);
    SCOPED_TRACE(line);
    const UserRun run = user_run_from_megatron(megatron_arguments_from_command_line(line));
    EXPECT_TRUE(run.not_understood.empty());
    EXPECT_EQ(run.model.num_layers, model.num_layers);
    EXPECT_EQ(run.model.hidden_size, model.hidden_size);
    EXPECT_EQ(run.model.intermediate_size, model.intermediate_size);
    EXPECT_EQ(run.model.num_kv_heads, model.num_kv_heads);
    EXPECT_EQ(run.model.vocab_size, model.vocab_size);
    EXPECT_EQ(run.model.tie_word_embeddings, model.tie_word_embeddings);
    EXPECT_EQ(run.model.rms_norm_eps, model.rms_norm_eps);
    EXPECT_EQ(run.model.rope_theta, model.rope_theta);
    EXPECT_EQ(run.config.to_string(), c.config.to_string());
    EXPECT_EQ(run.recipe.precision, c.recipe.precision);
    EXPECT_EQ(recipe_text(run.recipe.techniques), recipe_text(c.recipe.techniques));
    EXPECT_EQ(run.recipe.fp8_recipe, c.recipe.fp8_recipe);
    EXPECT_EQ(run.recipe.fp8_param_gather, c.recipe.fp8_param_gather);
    EXPECT_EQ(run.recipe.tp_comm_overlap, c.recipe.tp_comm_overlap);
    EXPECT_EQ(run.recipe.gradient_accumulation_fusion, c.recipe.gradient_accumulation_fusion);
  }
}

// A log's arguments block (megatron_log.hpp): every key, false flags and defaults included; the keys
// not used are listed, false flags (options not given) are not.
TEST(MegatronArgs, LogStyleArguments) {
  MegatronArguments a = megatron_arguments_from_command_line(kLlama + "--global-batch-size 16");
  a.source = "train.log";
  a.values["world_size"] = "8";
  a.values["use_distributed_optimizer"] = "false";
  a.values["fp16"] = "false";
  a.values["lr"] = "0.0003";
  a.line_of["lr"] = 120;
  const UserRun run = user_run_from_megatron(a);
  EXPECT_EQ(run.config.dp, 8);
  EXPECT_EQ(run.not_understood, std::vector<std::string>{"--lr 0.0003"});
  a.values.erase("world_size");
  a.values["data_parallel_size"] = "4";
  a.values["virtual_pipeline_model_parallel_size"] = "1";
  EXPECT_EQ(user_run_from_megatron(a).config.dp, 4);
  a.values["num_layers"] = "many";
  a.line_of["num_layers"] = 42;
  EXPECT_EQ(user_error_of([&] { user_run_from_megatron(a); }), "train.log:42: --num-layers many: not a whole number");
}

TEST(MegatronArgs, Refusals) {
  const auto refusal = [](const std::string& args) {
    return user_error_of([&] { user_run_from_megatron(megatron_arguments_from_command_line(args)); });
  };
  EXPECT_EQ(refusal(kLlama + "--num-experts 8"),
            "--megatron-args: --num-experts 8: a mixture of experts; itertime models dense LLaMA models only");
  EXPECT_NE(refusal(kLlama + "--fp16").find("both --bf16 and --fp16"), std::string::npos);
  EXPECT_NE(refusal(kLlama + "--fp8-format hybrid --fp8-recipe mxfp8").find("--fp8-recipe mxfp8"), std::string::npos);
  EXPECT_NE(refusal(kLlama + "--recompute-granularity full --recompute-method block --recompute-num-layers 2")
                .find("recomputes only some"),
            std::string::npos);
  EXPECT_NE(refusal(kLlama + "--swiglu=yes").find("--swiglu is a flag"), std::string::npos);
  EXPECT_NE(refusal(kLlama + "--tensor-model-parallel-size 2 4").find("takes one value"), std::string::npos);
  EXPECT_NE(refusal(kLlama + "--seq-length 8192").find("--seq-length 8192 contradicts --seq-length 4096"), std::string::npos);
  // Without a world size the data-parallel size is the caller's.
  const UserRun run = user_run_from_megatron(megatron_arguments_from_command_line(kLlama + "--tensor-model-parallel-size 2"));
  EXPECT_FALSE(run.data_parallel_given);
  const UserRun at8 = with_data_parallel(run, 4, "--gpus 8");
  EXPECT_EQ(at8.config.global_batch, 4);  // Megatron's default: micro-batch x dp
  EXPECT_NE(user_error_of([&] {
              with_data_parallel(user_run_from_megatron(megatron_arguments_from_command_line(kLlama + "--global-batch-size 6")),
                                 4, "--dp 4");
            }).find("--megatron-args with --dp 4"),
            std::string::npos);
}

// NeMo 2's recipe layout (trainer.strategy, model.config, data, optim.config, Lightning's precision plugin).
TEST(NemoConfig, Nemo2Layout) {
  const std::string yaml =
      "trainer:\n"
      "  devices: 8\n"
      "  num_nodes: 2\n"
      "  plugins:\n"
      "    precision: bf16-mixed\n"
      "  strategy:\n"
      "    tensor_model_parallel_size: 4\n"
      "    pipeline_model_parallel_size: 1\n"
      "    sequence_parallel: true\n"
      "    ddp:\n"
      "      overlap_grad_reduce: true\n"
      "model:\n"
      "  config:\n"
      "    num_layers: 32\n"
      "    hidden_size: 4096\n"
      "    ffn_hidden_size: 14336\n"
      "    num_attention_heads: 32\n"
      "    num_query_groups: 8\n"
      "    normalization: RMSNorm\n"
      "    gated_linear_unit: true\n"
      "    add_bias_linear: false\n"
      "    position_embedding_type: rope\n"
      "    share_embeddings_and_output_weights: false\n"
      "    vocab_size: 128256\n"
      "    seq_length: 8192\n"
      "data:\n"
      "  seq_length: 8192\n"
      "  micro_batch_size: 1\n"
      "  global_batch_size: 64\n"
      "optim:\n"
      "  config:\n"
      "    use_distributed_optimizer: true\n"
      "    lr: 0.0003\n";
  const UserRun run = read_nemo_config_text(yaml, "nemo2.yaml");
  EXPECT_EQ(run.config.to_string(), "dp4-tp4-pp1 mbs1 gbs64 seq8192");
  EXPECT_EQ(run.model.num_kv_heads, 8);
  EXPECT_FALSE(run.model.tie_word_embeddings);
  EXPECT_EQ(recipe_text(run.recipe.techniques), "sp+vp+dopt+ovl");
  EXPECT_EQ(run.not_understood, std::vector<std::string>{"optim.config.lr: 0.0003"});
  EXPECT_EQ(user_error_of([] { read_nemo_config_text("model: [1, 2\n", "bad.yaml"); }).rfind("bad.yaml:", 0), 0u);
  EXPECT_EQ(user_error_of([] {
              read_nemo_config_text(
                  "model:\n  normalization: RMSNorm\n  position_embedding_type: rope\n  gated_linear_unit: "
                  "true\n  add_bias_linear: false\n  num_layers: 3x\n",
                  "n.yaml");
            }),
            "n.yaml:6: model.num_layers: 3x: not a whole number");
}

TEST(TorchtitanToml, ShardDegreeFromTheWorld) {
  const std::string toml =
      "[model]\nname = \"llama3\"\nflavor = \"70B\"\n"
      "[training]\nlocal_batch_size = 2\nseq_len = 8192\n"
      "[parallelism]\ntensor_parallel_degree = 8\npipeline_parallel_degree = 4\npipeline_parallel_microbatch_size = 1\n"
      "[activation_checkpoint]\nmode = \"full\"\n";
  const UserRun run = read_torchtitan_toml_text(toml, "t.toml");
  EXPECT_FALSE(run.data_parallel_given);
  EXPECT_EQ(run.model.num_layers, 80);
  EXPECT_EQ(run.model.intermediate_size, 28672);
  const UserRun at = with_data_parallel(run, 4, "--gpus 128");
  EXPECT_EQ(at.config.to_string(), "dp4-tp8-pp4 mbs1 gbs8 seq8192");  // global = local_batch_size x dp
  EXPECT_EQ(recipe_text(at.recipe.techniques), "sp+vp+dopt+rc-full+ovl+opg");
  EXPECT_NE(user_error_of([] {
              read_torchtitan_toml_text("[model]\nname = \"llama3\"\nflavor = \"9B\"\n", "t.toml");
            }).find("t.toml:3: model.flavor \"9B\""),
            std::string::npos);
}

// Found by Fuzz.UserFormats under UBSan: a local batch near 2^63 times the data-parallel degree overflowed.
TEST(TorchtitanToml, IntegersOutOfRangeAreRefused) {
  const std::string toml =
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 9223372036854775807\nseq_len = 8192\n";
  EXPECT_EQ(user_error_of([&] { read_torchtitan_toml_text(toml, "t.toml"); }),
            "t.toml:5: training.local_batch_size = 9223372036854775807: out of range (a size, batch or degree)");
}

TEST(UserInput, DetectsTheFormat) {
  EXPECT_EQ(detect_format("x", "# launch\ntorchrun pretrain_gpt.py --num-layers 2\n"), InputFormat::kMegatronArgs);
  EXPECT_EQ(detect_format("x", "[model]\nname = \"llama3\"\n"), InputFormat::kTorchtitan);
  EXPECT_EQ(detect_format("x", "model:\n  num_layers: 2\n"), InputFormat::kNemo);
  EXPECT_EQ(detect_format("x.yaml", ""), InputFormat::kNemo);
  EXPECT_NE(user_error_of([] { detect_format("x", "hello\n"); }).find("--from-format"), std::string::npos);
}

}  // namespace
}  // namespace itertime::formats
