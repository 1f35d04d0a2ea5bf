// megatron_emit.cpp: a configuration as Megatron-LM's command line (megatron_emit.hpp).
#include "formats/megatron_emit.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "predict/framework/megatron_layout_rules.hpp"

namespace itertime::formats {

namespace {

// Appends " OPTION" or " OPTION VALUE" to a command line.
class CommandLine {
 public:
  explicit CommandLine(std::string start) : text_(std::move(start)) {}
  void add(const std::string& option, const std::string& value = "") {
    text_ += " " + option + (value.empty() ? "" : " " + value);
  }
  void add_text(const std::string& options) { text_ += " " + options; }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// The shortest text that reads back as x.
std::string shortest_number(double x) {
  char text[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, x);
    if (std::strtod(text, nullptr) == x) break;
  }
  return std::string(text);
}

// The model's architecture and tokenizer.
void add_model_options(CommandLine& line, const LlamaSpec& m, const predict::framework::FrameworkRecipe& recipe) {
  line.add("--num-layers", std::to_string(m.num_layers));
  line.add("--hidden-size", std::to_string(m.hidden_size));
  line.add("--ffn-hidden-size", std::to_string(m.intermediate_size));
  line.add("--num-attention-heads", std::to_string(m.num_heads));
  if (m.num_kv_heads != m.num_heads) {
    line.add("--group-query-attention");
    line.add("--num-query-groups", std::to_string(m.num_kv_heads));
  }
  if (m.max_position_embeddings > 0) line.add("--max-position-embeddings", std::to_string(m.max_position_embeddings));
  line.add("--normalization", "RMSNorm");
  line.add("--norm-epsilon", shortest_number(m.rms_norm_eps));
  line.add("--position-embedding-type", "rope");
  line.add("--rotary-base", shortest_number(m.rope_theta));
  line.add("--swiglu");
  // LLaMA trains without dropout (Megatron-LM's default is 0.1: the reader predicts masks without these).
  if (!recipe.dropout) {
    line.add("--attention-dropout", "0.0");
    line.add("--hidden-dropout", "0.0");
  }
  line.add("--disable-bias-linear");
  if (!m.tie_word_embeddings) line.add("--untie-embeddings-and-output-weights");
  if (m.vocab_size == 128256) {
    line.add("--tokenizer-type", "HuggingFaceTokenizer");
    line.add("--tokenizer-model", "meta-llama/Llama-3.1-8B");
  } else if (m.vocab_size == 32000) {
    line.add("--tokenizer-type", "HuggingFaceTokenizer");
    line.add("--tokenizer-model", "meta-llama/Llama-2-7b-hf");
  } else {
    line.add("--tokenizer-type", "NullTokenizer");
    line.add("--vocab-size", std::to_string(m.vocab_size));
  }
}

// The batches, the parallel sizes and the pipeline's split of the layers.
void add_layout_options(CommandLine& line, const LlamaSpec& m, const ParallelConfig& c,
                        const predict::framework::FrameworkRecipe& recipe) {
  line.add("--seq-length", std::to_string(c.seq_len));
  line.add("--micro-batch-size", std::to_string(c.micro_batch));
  line.add("--global-batch-size", std::to_string(c.global_batch));
  line.add("--tensor-model-parallel-size", std::to_string(c.tp));
  line.add("--pipeline-model-parallel-size", std::to_string(c.pp));
  if (c.cp > 1) line.add("--context-parallel-size", std::to_string(c.cp));
  // The split of the one rule set (predict/framework/megatron_layout_rules.hpp), stated so that Megatron-LM
  // builds the layers the prediction assumed; vp as arguments.py derives it: --num-layers-per-virtual-
  // pipeline-stage counts the accounted embedding and loss as layers, and the uneven first / last ranks
  // need --num-virtual-stages-per-pipeline-rank.
  const predict::framework::PipelineSplit split =
      predict::framework::resolve_pipeline_split(m.num_layers, c.pp, c.vp, recipe.pipeline_split);
  const std::string split_options = predict::framework::pipeline_split_options(split);
  if (!split_options.empty()) line.add_text(split_options);
  if (c.vp > 1 && (split.first_stage_layers > 0 || split.last_stage_layers > 0)) {
    line.add("--num-virtual-stages-per-pipeline-rank", std::to_string(c.vp));
  } else if (c.vp > 1) {
    const int64_t accounted = m.num_layers + (split.account_for_embedding ? 1 : 0) + (split.account_for_loss ? 1 : 0);
    line.add("--num-layers-per-virtual-pipeline-stage", std::to_string(accounted / (int64_t{c.pp} * c.vp)));
  }
}

// The precision and the training techniques.
void add_recipe_options(CommandLine& line, const predict::framework::FrameworkRecipe& recipe) {
  line.add(recipe.precision == PrecisionName::kAmpFp16 ? "--fp16" : "--bf16");
  if (recipe.precision == PrecisionName::kFp8) {
    line.add("--fp8-format", "hybrid");
    line.add("--fp8-recipe", recipe.fp8_recipe == predict::framework::Fp8Recipe::kCurrent ? "tensorwise" : "delayed");
    if (recipe.fp8_param_gather) line.add("--fp8-param-gather");
  }
  const TrainingTechniques& t = recipe.techniques;
  if (t.sequence_parallel) line.add("--sequence-parallel");
  if (t.distributed_optimizer) line.add("--use-distributed-optimizer");
  if (t.overlap_gradient_reduction) line.add("--overlap-grad-reduce");
  if (t.overlap_parameter_gather) line.add("--overlap-param-gather");
  if (t.recompute == Recompute::kSelective) line.add("--recompute-granularity", "selective");
  if (t.recompute == Recompute::kFull) {
    line.add("--recompute-granularity", "full");
    line.add("--recompute-method", "uniform");
    line.add("--recompute-num-layers", "1");
  }
  if (recipe.tp_comm_overlap) line.add("--tp-comm-overlap");
  if (!recipe.gradient_accumulation_fusion) line.add("--no-gradient-accumulation-fusion");
}

}  // namespace

std::string megatron_command_line(const LlamaSpec& m, const ParallelConfig& c, const predict::framework::FrameworkRecipe& recipe,
                                  int gpus_per_node) {
  const int world = c.world_size();
  const int per_node = gpus_per_node > 0 && world % gpus_per_node == 0 ? gpus_per_node : world;
  CommandLine line("torchrun --nnodes " + std::to_string(world / per_node) + " --nproc-per-node " + std::to_string(per_node) +
                   " pretrain_gpt.py");
  add_model_options(line, m, recipe);
  add_layout_options(line, m, c, recipe);
  add_recipe_options(line, recipe);
  return line.text();
}

}  // namespace itertime::formats
