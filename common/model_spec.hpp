// model_spec.hpp: a LLaMA model as described by its Hugging Face config.json.
// Invariants: a LlamaSpec that load_llama_config returns is internally consistent (positive sizes,
// hidden = heads * head_dim, heads divisible by KV heads); parameter counts are exact for the HF
// architecture (RMSNorm, rotary embeddings, SwiGLU, GQA, bias-free linears, optionally tied embeddings).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace itertime {

struct LlamaSpec {
  std::string name;  // from the file name (or "_name_or_path"), for display and HDF5 keys
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;  // 0 when the config does not say
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;

  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // Parameters of one decoder layer: q, k, v, o projections, gate/up/down, two RMSNorm weights.
  int64_t layer_params() const;
  int64_t embedding_params() const { return vocab_size * hidden_size; }
  int64_t lm_head_params() const { return tie_word_embeddings ? 0 : vocab_size * hidden_size; }
  int64_t total_params() const;
  // Parameters that take part in matrix products for each token (everything but the embedding
  // lookup and the norm weights; the LM head counts, also when tied).
  int64_t matmul_params() const;
  // Training FLOPs per token (forward + backward, no recomputation): 6 * matmul_params plus the
  // attention score/value products, 12 * layers * hidden * seq_len (as in PaLM's MFU formula, without
  // halving for the causal mask).
  double training_flops_per_token(int64_t seq_len) const;
  // Tensor-parallel degrees that divide the attention heads, the KV heads and the FFN size.
  std::vector<int> legal_tp_degrees() const;
  // Pipeline degrees: 1 .. num_layers.
  std::vector<int> legal_pp_degrees() const;
};

// Reads a HF config.json. Throws UserError naming the file and the problem (missing file, not JSON,
// missing or invalid field).
LlamaSpec load_llama_config(const std::string& path);
// Parses the text of a config.json; `source` names it in error messages.
LlamaSpec parse_llama_config(const std::string& json_text, const std::string& source);

}  // namespace itertime
