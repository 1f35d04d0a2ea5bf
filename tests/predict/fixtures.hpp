// fixtures.hpp: small shared pieces of the predict tests: a hand-countable LLaMA (and llama_of, for a
// model of other sizes) and the text of the UserError a call throws.
// Invariants: small_model() never changes (tests derive figures from it by hand, see
// test_throughput.cpp); user_error_of() returns "" when the call throws nothing (other exceptions pass).
#pragma once

#include <functional>
#include <string>

#include "common/errors.hpp"
#include "common/model_spec.hpp"

namespace itertime::predict::fixtures {

// hidden 64, ffn 128, 2 layers, 4 heads of 16, 2 KV heads, vocabulary 100. Matrix parameters per layer:
// q 64*64 = 4,096, k and v 2*64*32 = 4,096, o 4,096, gate/up/down 3*64*128 = 24,576 => 36,864; two
// layers 73,728; the head 100*64 = 6,400 => 80,128. FLOPs per token at sequence 32: 6*80,128 +
// 12*2*64*32 = 480,768 + 49,152 = 529,920.
// A LLaMA named `name` of these sizes, given in LlamaSpec's field order (the rest keep their defaults).
inline LlamaSpec llama_of(const std::string& name, int64_t hidden_size, int64_t intermediate_size, int64_t num_layers,
                          int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, int64_t vocab_size) {
  const LlamaSpec defaults;
  return LlamaSpec{name,
                   hidden_size,
                   intermediate_size,
                   num_layers,
                   num_heads,
                   num_kv_heads,
                   head_dim,
                   vocab_size,
                   defaults.max_position_embeddings,
                   defaults.rms_norm_eps,
                   defaults.rope_theta,
                   defaults.tie_word_embeddings};
}

inline LlamaSpec small_model() { return llama_of("small", 64, 128, 2, 4, 2, 16, 100); }

inline std::string user_error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

}  // namespace itertime::predict::fixtures
