// framework_types.hpp: the vocabulary of the framework models (issue 32): which training framework a
// prediction models, the transformer as that framework sees its shapes, and the framework's recipe.
// Invariants:
//  - Framework::kItertime is itertime's own LibTorch trainer (the stage builder, the calibrated
//    predictor); Framework::kMegatronTe is Megatron-Core with Transformer Engine (predict/framework/).
//    parse_framework(to_string(f)) == f; any other text is a UserError naming it and the choices.
//  - TransformerShape holds sizes only (no weights): a LLaMA (RMSNorm, SwiGLU, rotary, no biases, GQA)
//    from a LlamaSpec, or a GPT (LayerNorm, GeLU MLP, learned positions, biases) given by its sizes, so
//    that published measurements of either family can be scored. Parameter counts are exact for the
//    Megatron-Core layer of that family (docs/framework.md).
//  - FrameworkRecipe is what a Megatron-Core launch sets: the precision (bf16 or fp16 parameters with
//    fp32 main gradients, or fp8 GEMMs under a scaling recipe), Megatron's techniques (common/
//    training_techniques.hpp; the vocabulary-parallel embedding and head are always on where tp > 1, as
//    Megatron has no other), and the switches that only the framework has.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/model_spec.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"

namespace itertime::predict::framework {

enum class Framework { kItertime, kMegatronTe };
std::string to_string(Framework framework);  // "itertime", "megatron-te"
Framework parse_framework(std::string_view text);

// gated SiLU (LLaMA, 3 GEMMs), GeLU (GPT, 2 GEMMs) or squared ReLU (Nemotron-4, 2 GEMMs; Megatron-Core runs it
// unfused: torch.pow(F.relu(x), 2), megatron/core/activations.py)
enum class MlpKind { kSwiGlu, kGelu, kSquaredRelu };
enum class NormKind { kRmsNorm, kLayerNorm };

struct TransformerShape {
  std::string name;
  int64_t hidden = 0;
  int64_t ffn = 0;  // the MLP's inner size (per gate for SwiGLU: fc1 is [2*ffn, hidden])
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab = 0;
  MlpKind mlp = MlpKind::kSwiGlu;
  NormKind norm = NormKind::kRmsNorm;
  bool rotary = true;             // rotary embeddings (else learned absolute positions, max_positions rows)
  int64_t learned_positions = 0;  // rows of the learned position embedding (0 with rotary)
  bool linear_bias = false;       // biases on every linear (GPT)
  bool tied_embeddings = false;

  int64_t q_size() const { return heads * head_dim; }
  int64_t kv_size() const { return kv_heads * head_dim; }
  // One decoder layer: qkv, proj, fc1, fc2 weights (and biases), two norms' weights (and biases).
  int64_t layer_params() const;
  int64_t embedding_params() const;  // word embedding (+ positions)
  int64_t output_params() const;     // the output layer (0 when tied) and the final norm
  int64_t total_params() const;
  // Training FLOPs per token for MFU, as LlamaSpec::training_flops_per_token (PaLM's formula): 6 x the
  // GEMM parameters (the output layer included) + 12 x layers x q_size x seq (causal mask not halved).
  double training_flops_per_token(int64_t seq_len) const;
};

TransformerShape shape_of(const LlamaSpec& model);

// Transformer Engine's FP8 scaling recipes: delayed (DelayedScaling: scales from an amax history, the
// default of TE 1.x) and current (Float8CurrentScaling: an amax reduction before each cast).
enum class Fp8Recipe { kDelayed, kCurrent };
std::string to_string(Fp8Recipe recipe);  // "delayed", "current"
Fp8Recipe parse_fp8_recipe(std::string_view text);

// How Megatron-LM splits the decoder layers over the pipeline (megatron/training/arguments.py and
// megatron/core/transformer/transformer_block.py get_num_layers_to_build): the embedding and / or the
// loss counted as one layer each (--account-for-embedding-in-pipeline-split,
// --account-for-loss-in-pipeline-split), or the first / last pipeline rank given its own layer count
// (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers; 0: not given). `given`
// false: the options are not fixed by a user's input, and the rule set (megatron_layout_rules.hpp)
// takes the first of Megatron's plain split and NeMo's embedding + loss accounting that is legal.
struct PipelineSplit {
  bool given = false;
  bool account_for_embedding = false;
  bool account_for_loss = false;
  int64_t first_stage_layers = 0;
  int64_t last_stage_layers = 0;
  bool uneven() const { return account_for_embedding || account_for_loss || first_stage_layers > 0 || last_stage_layers > 0; }
  bool operator==(const PipelineSplit& o) const {
    return given == o.given && account_for_embedding == o.account_for_embedding && account_for_loss == o.account_for_loss &&
           first_stage_layers == o.first_stage_layers && last_stage_layers == o.last_stage_layers;
  }
};

struct FrameworkRecipe {
  // kAmpBf16 (Megatron --bf16), kAmpFp16 (--fp16), or kFp8 (--bf16 --fp8-format hybrid): parameters in
  // bf16/fp16 with fp32 main gradients; other policies are refused by the framework model.
  PrecisionName precision = PrecisionName::kAmpBf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // with kFp8 only
  TrainingTechniques techniques;               // vocab_parallel is implied where tp > 1
  bool tp_comm_overlap = false;                // --tp-comm-overlap (TE userbuffers; needs sequence parallelism)
  bool gradient_accumulation_fusion = true;    // wgrad GEMMs accumulate into fp32 main_grad directly
  // --fp8-param-gather (NeMo's fp8 recipe; with kFp8 only): the decoder GEMM weights are TE fp8
  // parameters, gathered by the distributed optimizer in fp8, with no bf16 copy kept.
  bool fp8_param_gather = false;
  // Megatron-LM before Transformer Engine and flash attention (its 2021-2022 releases, the stack of
  // published GPT runs): the attention core as two batched GEMMs around the fused scale-mask-softmax
  // (megatron/model/transformer.py CoreAttention, megatron/model/fused_softmax.py), the scores in memory.
  bool unfused_attention = false;
  // Hidden and attention-probability dropout (GPT runs; LLaMA trains without): a mask per element.
  bool dropout = false;
  PipelineSplit pipeline_split;  // the layers over the pipeline ranks (megatron_layout_rules.hpp)
};

}  // namespace itertime::predict::framework
