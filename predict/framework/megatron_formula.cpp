// megatron_formula.cpp: megatron/training/theoretical_memory_usage.py (Megatron-LM, docs/framework.md names the
// commit), term by term, for a dense model (no MoE, MLA or MTP: their terms are zero for LLaMA and GPT).
#include "predict/framework/megatron_formula.hpp"

#include <algorithm>

#include "predict/framework/megatron_memory.hpp"

namespace itertime::predict::framework {

MegatronFormulaMemory megatron_formula_memory(const TransformerShape& shape, const ParallelConfig& config,
                                              const FrameworkRecipe& recipe, FormulaReading reading) {
  const bool aware = reading == FormulaReading::kContextParallelAware;
  const double h = static_cast<double>(shape.hidden);
  const double heads = static_cast<double>(shape.heads);
  const double groups = static_cast<double>(shape.kv_heads);            // num_query_groups
  const double query_projection = static_cast<double>(shape.q_size());  // kv_channels * num_attention_heads
  const double ffn = static_cast<double>(shape.ffn);
  const double layers = static_cast<double>(shape.layers);
  const double vocab = static_cast<double>(megatron_padded_vocab(shape.vocab, config.tp));
  const double tp = config.tp, pp = config.pp;
  const double data_parallel = aware ? static_cast<double>(config.dp) * config.cp : config.dp;
  const double seq = aware ? static_cast<double>(config.seq_len) / config.cp : config.seq_len;
  const double b = config.micro_batch;
  const bool interleaved = config.vp > 1;  // args.virtual_pipeline_model_parallel_size is None otherwise
  const double vp = config.vp;
  const double micro_batches = static_cast<double>(config.num_micro_batches());

  // compute_weight_and_optimizer_memory.
  const double gated = shape.mlp == MlpKind::kSwiGlu ? 1.5 : 1.0;
  const double norm_size = shape.norm == NormKind::kRmsNorm ? 1.0 : 2.0;
  const double self_attention = 2.0 * h * h * ((1.0 + groups / heads) * (query_projection / h));
  const double embedding_size = h * vocab;
  const double final_layernorm = norm_size * h;
  const double dense_mlp = 2.0 * h * ffn * gated;
  const double layernorm = 2.0 * h * norm_size;
  const double tp_sharded_block = (self_attention + dense_mlp) * layers;
  const double replicated_block = layernorm * layers + final_layernorm;
  double tp_sharded_most_loaded = (tp_sharded_block / pp + embedding_size) / tp;
  const double replicated_most_loaded = replicated_block / pp;
  if (!shape.tied_embeddings && config.pp == 1) tp_sharded_most_loaded += embedding_size / tp;
  const double bytes_per_parameter = recipe.techniques.distributed_optimizer ? 6.0 + 12.0 / data_parallel : 18.0;

  MegatronFormulaMemory f;
  f.parameters_on_most_loaded_shard = tp_sharded_most_loaded + replicated_most_loaded;
  f.weight_and_optimizer_bytes = f.parameters_on_most_loaded_shard * bytes_per_parameter;

  // report_theoretical_memory's choice of activation formula (arguments.py turns SP off at tp 1).
  const bool sequence_parallel = recipe.techniques.sequence_parallel && config.tp > 1;
  f.sequence_parallel_branch = sequence_parallel && recipe.techniques.recompute == Recompute::kSelective;
  const double penalty = 1.0 + (pp - 1.0) / (pp * vp);
  double activation = 0;
  if (f.sequence_parallel_branch) {
    // compute_activation_memory: Table 2 of arXiv 2205.05198, first pipeline stage.
    activation = seq * b * h * (18.0 + 4.0 * (ffn / h)) * layers;
    activation += 8.0 * seq * b * pp;  // input to the embedding, pp micro-batches in flight
    activation += seq * b * h * pp;    // the embedding's dropout mask
    if (interleaved) activation *= penalty;
    if (!interleaved && config.pp > 1) activation *= std::min(1.0, micro_batches / pp);
    if (config.pp == 1) activation += seq * b * h * 4.0 * (1.0 + vocab / h);  // output layer and CE loss
    activation /= tp;
  } else {
    // compute_activation_memory_without_sp.
    activation = seq * b * h * (10.0 + 24.0 / tp) * layers;
    activation += 8.0 * seq * b * pp;
    activation += seq * b * h * pp;
    if (interleaved) activation *= penalty;
    if (!interleaved && config.pp > 1) activation *= std::min(1.0, micro_batches / pp);
    if (config.pp == 1) activation += (seq * b * vocab / tp + seq * b * h) * 2.0;
    activation *= 1.05;
  }
  f.activation_bytes = activation;
  f.total_bytes = f.weight_and_optimizer_bytes + f.activation_bytes;
  return f;
}

}  // namespace itertime::predict::framework
