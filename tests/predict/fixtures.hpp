// fixtures.hpp: small shared pieces of the predict tests: a hand-countable LLaMA and the text of the
// UserError a call throws.
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
inline LlamaSpec small_model() {
  LlamaSpec m;
  m.name = "small";
  m.hidden_size = 64;
  m.intermediate_size = 128;
  m.num_layers = 2;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.vocab_size = 100;
  return m;
}

inline std::string user_error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

}  // namespace itertime::predict::fixtures
