// framework_types.cpp: the framework vocabulary's text forms and the shape's parameter counts.
#include "predict/framework/framework_types.hpp"

#include "common/errors.hpp"

namespace itertime::predict::framework {

std::string to_string(Framework framework) { return framework == Framework::kMegatronTe ? "megatron-te" : "itertime"; }

Framework parse_framework(std::string_view text) {
  if (text == "itertime") return Framework::kItertime;
  if (text == "megatron-te") return Framework::kMegatronTe;
  throw UserError("unknown framework '" + std::string(text) + "': use itertime (itertime's own trainer) or megatron-te " +
                  "(Megatron-Core with Transformer Engine)");
}

std::string to_string(Fp8Recipe recipe) { return recipe == Fp8Recipe::kCurrent ? "current" : "delayed"; }

Fp8Recipe parse_fp8_recipe(std::string_view text) {
  if (text == "delayed") return Fp8Recipe::kDelayed;
  if (text == "current") return Fp8Recipe::kCurrent;
  throw UserError("unknown fp8 recipe '" + std::string(text) +
                  "': use delayed (TE DelayedScaling) or current (TE Float8CurrentScaling)");
}

namespace {
int64_t norm_params(const TransformerShape& shape) {
  return shape.norm == NormKind::kLayerNorm ? 2 * shape.hidden : shape.hidden;
}
int64_t fc1_rows(const TransformerShape& shape) { return shape.mlp == MlpKind::kSwiGlu ? 2 * shape.ffn : shape.ffn; }
// GEMM weights of one layer: qkv, proj, fc1, fc2.
int64_t layer_gemm_params(const TransformerShape& shape) {
  const int64_t qkv_rows = shape.q_size() + 2 * shape.kv_size();
  return qkv_rows * shape.hidden + shape.hidden * shape.q_size() + fc1_rows(shape) * shape.hidden + shape.hidden * shape.ffn;
}
}  // namespace

int64_t TransformerShape::layer_params() const {
  int64_t params = layer_gemm_params(*this) + 2 * norm_params(*this);
  if (linear_bias) params += (q_size() + 2 * kv_size()) + hidden + fc1_rows(*this) + hidden;
  return params;
}

int64_t TransformerShape::embedding_params() const { return vocab * hidden + learned_positions * hidden; }

int64_t TransformerShape::output_params() const { return (tied_embeddings ? 0 : vocab * hidden) + norm_params(*this); }

int64_t TransformerShape::total_params() const { return layers * layer_params() + embedding_params() + output_params(); }

double TransformerShape::training_flops_per_token(int64_t seq_len) const {
  const double gemm_params = static_cast<double>(layers * layer_gemm_params(*this) + vocab * hidden);
  return 6.0 * gemm_params + 12.0 * static_cast<double>(layers * q_size() * seq_len);
}

TransformerShape shape_of(const LlamaSpec& model) {
  TransformerShape shape;
  shape.name = model.name;
  shape.hidden = model.hidden_size;
  shape.ffn = model.intermediate_size;
  shape.layers = model.num_layers;
  shape.heads = model.num_heads;
  shape.kv_heads = model.num_kv_heads;
  shape.head_dim = model.head_dim;
  shape.vocab = model.vocab_size;
  shape.tied_embeddings = model.tie_word_embeddings;
  return shape;
}

}  // namespace itertime::predict::framework
