// megatron_emit.cpp: a configuration as Megatron-LM's command line (megatron_emit.hpp).
#include "formats/megatron_emit.hpp"

#include <cstdio>
#include <cstdlib>

#include "predict/framework/megatron_layout_rules.hpp"

namespace itertime::formats {

std::string megatron_command_line(const LlamaSpec& m, const ParallelConfig& c, const predict::framework::FrameworkRecipe& recipe,
                                  int gpus_per_node) {
  const int world = c.world_size();
  const int per_node = gpus_per_node > 0 && world % gpus_per_node == 0 ? gpus_per_node : world;
  std::string out = "torchrun --nnodes " + std::to_string(world / per_node) + " --nproc-per-node " + std::to_string(per_node) +
                    " pretrain_gpt.py";
  const auto add = [&out](const std::string& option, const std::string& value = "") {
    out += " " + option + (value.empty() ? "" : " " + value);
  };
  const auto num = [](double x) {  // the shortest text that reads back as x
    char text[32];
    for (int digits = 6; digits <= 17; ++digits) {
      std::snprintf(text, sizeof(text), "%.*g", digits, x);
      if (std::strtod(text, nullptr) == x) break;
    }
    return std::string(text);
  };
  add("--num-layers", std::to_string(m.num_layers));
  add("--hidden-size", std::to_string(m.hidden_size));
  add("--ffn-hidden-size", std::to_string(m.intermediate_size));
  add("--num-attention-heads", std::to_string(m.num_heads));
  if (m.num_kv_heads != m.num_heads) {
    add("--group-query-attention");
    add("--num-query-groups", std::to_string(m.num_kv_heads));
  }
  if (m.max_position_embeddings > 0) add("--max-position-embeddings", std::to_string(m.max_position_embeddings));
  add("--normalization", "RMSNorm");
  add("--norm-epsilon", num(m.rms_norm_eps));
  add("--position-embedding-type", "rope");
  add("--rotary-base", num(m.rope_theta));
  add("--swiglu");
  // LLaMA trains without dropout (Megatron-LM's default is 0.1: the reader predicts masks without these).
  if (!recipe.dropout) {
    add("--attention-dropout", "0.0");
    add("--hidden-dropout", "0.0");
  }
  add("--disable-bias-linear");
  if (!m.tie_word_embeddings) add("--untie-embeddings-and-output-weights");
  if (m.vocab_size == 128256) {
    add("--tokenizer-type", "HuggingFaceTokenizer");
    add("--tokenizer-model", "meta-llama/Llama-3.1-8B");
  } else if (m.vocab_size == 32000) {
    add("--tokenizer-type", "HuggingFaceTokenizer");
    add("--tokenizer-model", "meta-llama/Llama-2-7b-hf");
  } else {
    add("--tokenizer-type", "NullTokenizer");
    add("--vocab-size", std::to_string(m.vocab_size));
  }
  add("--seq-length", std::to_string(c.seq_len));
  add("--micro-batch-size", std::to_string(c.micro_batch));
  add("--global-batch-size", std::to_string(c.global_batch));
  add("--tensor-model-parallel-size", std::to_string(c.tp));
  add("--pipeline-model-parallel-size", std::to_string(c.pp));
  if (c.cp > 1) add("--context-parallel-size", std::to_string(c.cp));
  // The split of the one rule set (predict/framework/megatron_layout_rules.hpp), stated so that Megatron-LM
  // builds the layers the prediction assumed; vp as arguments.py derives it: --num-layers-per-virtual-
  // pipeline-stage counts the accounted embedding and loss as layers, and the uneven first / last ranks
  // need --num-virtual-stages-per-pipeline-rank.
  const predict::framework::PipelineSplit split =
      predict::framework::resolve_pipeline_split(m.num_layers, c.pp, c.vp, recipe.pipeline_split);
  const std::string split_options = predict::framework::pipeline_split_options(split);
  if (!split_options.empty()) out += " " + split_options;
  if (c.vp > 1 && (split.first_stage_layers > 0 || split.last_stage_layers > 0)) {
    add("--num-virtual-stages-per-pipeline-rank", std::to_string(c.vp));
  } else if (c.vp > 1) {
    const int64_t accounted = m.num_layers + (split.account_for_embedding ? 1 : 0) + (split.account_for_loss ? 1 : 0);
    add("--num-layers-per-virtual-pipeline-stage", std::to_string(accounted / (int64_t{c.pp} * c.vp)));
  }
  add(recipe.precision == PrecisionName::kAmpFp16 ? "--fp16" : "--bf16");
  if (recipe.precision == PrecisionName::kFp8) {
    add("--fp8-format", "hybrid");
    add("--fp8-recipe", recipe.fp8_recipe == predict::framework::Fp8Recipe::kCurrent ? "tensorwise" : "delayed");
    if (recipe.fp8_param_gather) add("--fp8-param-gather");
  }
  const TrainingTechniques& t = recipe.techniques;
  if (t.sequence_parallel) add("--sequence-parallel");
  if (t.distributed_optimizer) add("--use-distributed-optimizer");
  if (t.overlap_gradient_reduction) add("--overlap-grad-reduce");
  if (t.overlap_parameter_gather) add("--overlap-param-gather");
  if (t.recompute == Recompute::kSelective) add("--recompute-granularity", "selective");
  if (t.recompute == Recompute::kFull) {
    add("--recompute-granularity", "full");
    add("--recompute-method", "uniform");
    add("--recompute-num-layers", "1");
  }
  if (recipe.tp_comm_overlap) add("--tp-comm-overlap");
  if (!recipe.gradient_accumulation_fusion) add("--no-gradient-accumulation-fusion");
  return out;
}

}  // namespace itertime::formats
