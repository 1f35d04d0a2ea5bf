// test_megatron_inputs.cpp: what a Megatron-LM user writes is modelled or refused, never dropped (issue 44):
// --recompute-activations is selective recompute (arguments.py validate_args), the pipeline split options
// are read and checked by the one rule set, FSDP / CPU offloading / CUDA graphs are refused in one line,
// dropout follows Megatron-LM's default (0.1, said in `assumed`), and --from a training log reads its
// arguments block (padded_vocab_size used when the vocabulary is not printed).
// Invariants: one temporary file per test that needs a path, removed after it.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/errors.hpp"
#include "formats/megatron_args.hpp"
#include "formats/user_input.hpp"

namespace itertime::formats {
namespace {

const std::string kLlama =
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
    "--num-query-groups 8 --seq-length 4096 --normalization RMSNorm --position-embedding-type rope --swiglu "
    "--disable-bias-linear --untie-embeddings-and-output-weights --vocab-size 128256 --micro-batch-size 1 --bf16 "
    "--hidden-dropout 0 --attention-dropout 0 ";

UserRun read(const std::string& line) { return user_run_from_megatron(megatron_arguments_from_command_line(line)); }

std::string error_of(const std::string& line) {
  try {
    read(line);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MegatronInputs, RecomputeActivationsIsSelective) {
  const UserRun run = read(kLlama + "--recompute-activations");
  EXPECT_EQ(run.recipe.techniques.recompute, Recompute::kSelective);
  EXPECT_TRUE(run.not_understood.empty());
  EXPECT_NE(error_of(kLlama + "--recompute-activations --recompute-granularity full").find("contradicts"), std::string::npos);
}

TEST(MegatronInputs, WhatTheModelDoesNotRepresentIsRefusedInOneLine) {
  for (const char* option : {"--use-torch-fsdp2", "--cpu-offloading", "--enable-cuda-graph", "--use-megatron-fsdp"}) {
    const std::string error = error_of(kLlama + option);
    EXPECT_NE(error.find(option), std::string::npos) << error;
    EXPECT_NE(error.find("does not represent"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
}

TEST(MegatronInputs, DropoutFollowsMegatronsDefault) {
  const std::string without =
      "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
      "--seq-length 4096 --normalization RMSNorm --position-embedding-type rope --swiglu "
      "--disable-bias-linear --vocab-size 32000 --micro-batch-size 1 --bf16";
  const UserRun run = read(without);
  EXPECT_TRUE(run.recipe.dropout);
  bool said = false;
  for (const std::string& a : run.assumed) said = said || a.find("dropout 0.1") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_FALSE(read(kLlama).recipe.dropout);
}

// 126 layers over pp 8 (world 64 = tp 8 x pp 8): Megatron-LM refuses it without the accounting options.
TEST(MegatronInputs, PipelineSplitOptionsAreReadAndChecked) {
  const std::string big =
      "torchrun --nnodes 8 --nproc-per-node 8 pretrain_gpt.py --num-layers 126 --hidden-size 16384 "
      "--ffn-hidden-size 53248 --num-attention-heads 128 --group-query-attention --num-query-groups 8 "
      "--seq-length 8192 --normalization RMSNorm --position-embedding-type rope --swiglu "
      "--disable-bias-linear --untie-embeddings-and-output-weights --vocab-size 128256 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 --hidden-dropout 0 --attention-dropout 0 "
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 ";
  const std::string refused = error_of(big);
  EXPECT_NE(refused.find("126 layers do not split evenly over pp 8"), std::string::npos) << refused;
  const UserRun run = read(big + "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split");
  EXPECT_TRUE(run.recipe.pipeline_split.account_for_embedding && run.recipe.pipeline_split.account_for_loss);
  EXPECT_TRUE(run.not_understood.empty());
  // vp from --num-layers-per-virtual-pipeline-stage counts the accounted layers: 128 / 8 / 2 = vp 8.
  EXPECT_EQ(read(big + "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
                       "--num-layers-per-virtual-pipeline-stage 2")
                .config.vp,
            8);
}

TEST(MegatronInputs, FromATrainingLogReadsItsArgumentsBlock) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "itertime_issue44_train.log";
  {
    std::ofstream out(path);
    out << "some launcher output\n"
        << "------------------------ arguments ------------------------\n";
    const char* lines[][2] = {{"attention_dropout", "0.0"},
                              {"bf16", "True"},
                              {"add_bias_linear", "False"},
                              {"ffn_hidden_size", "14336"},
                              {"global_batch_size", "16"},
                              {"group_query_attention", "True"},
                              {"hidden_dropout", "0.0"},
                              {"hidden_size", "4096"},
                              {"micro_batch_size", "1"},
                              {"normalization", "RMSNorm"},
                              {"num_attention_heads", "32"},
                              {"num_layers", "32"},
                              {"num_query_groups", "8"},
                              {"padded_vocab_size", "128256"},
                              {"pipeline_model_parallel_size", "1"},
                              {"position_embedding_type", "rope"},
                              {"seq_length", "4096"},
                              {"swiglu", "True"},
                              {"tensor_model_parallel_size", "4"},
                              {"untie_embeddings_and_output_weights", "True"},
                              {"vocab_size", "None"},
                              {"world_size", "8"}};
    for (const auto& [name, value] : lines)
      out << "  " << name << " " << std::string(48 - std::string(name).size(), '.') << " " << value << "\n";
    out << "-------------------- end of arguments ---------------------\n";
  }
  const UserRun run = read_user_run(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(run.format, "megatron-log");
  EXPECT_EQ(run.model.vocab_size, 128256);  // padded_vocab_size, said in assumed
  EXPECT_EQ(run.config.tp, 4);
  EXPECT_EQ(run.config.dp, 2);
  EXPECT_EQ(run.config.global_batch, 16);
  bool said = false;
  for (const std::string& a : run.assumed) said = said || a.find("padded_vocab_size") != std::string::npos;
  EXPECT_TRUE(said);
}

// Read, assumed and not understood account for every key: the keys stated twice (dataset.seq_length beside
// model.seq_length, mixed_precision beside model.bf16), a tokenizer's vocabulary beside the model's, and a
// configuration's false (optimizer.use_precision_aware_optimizer) were in none of them before issue 44.
TEST(MegatronInputs, EveryKeyOfAConfigurationIsAccountedFor) {
  const UserRun run = read_user_run(std::string(ITERTIME_SOURCE_DIR) + "/tests/formats/fixtures/llama3_8b_bridge.yaml");
  std::string all;
  for (const auto* list : {&run.read, &run.assumed, &run.not_understood})
    for (const std::string& entry : *list) all += entry + " | ";
  for (const char* key : {"model.seq_length", "dataset.seq_length", "model.bf16", "mixed_precision", "tokenizer.vocab_size",
                          "model.vocab_size", "optimizer.use_precision_aware_optimizer"})
    EXPECT_NE(all.find(key), std::string::npos) << key << " in none of read, assumed, not understood";
}

}  // namespace
}  // namespace itertime::formats
