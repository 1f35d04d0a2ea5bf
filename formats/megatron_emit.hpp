// megatron_emit.hpp: the reverse of megatron_args.hpp: a configuration as the Megatron-LM command line
// that launches it (plan --emit megatron-args).
// Invariants:
//  - The text is one line, `torchrun --nnodes N --nproc-per-node G pretrain_gpt.py ARGS`, so that its
//    world size travels with it; read back with megatron_args.hpp it gives the same model sizes, layout,
//    precision, fp8 recipe, techniques and framework switches (tests/formats: the round trip).
//  - Only options Megatron-LM has; the vocabulary as a tokenizer where LLaMA's (HuggingFaceTokenizer with
//    meta-llama/Llama-3.1-8B or Llama-2-7b-hf), else --vocab-size with NullTokenizer.
#pragma once

#include <string>

#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "predict/framework/framework_types.hpp"

namespace itertime::formats {

// gpus_per_node 0: all ranks on one node.
std::string megatron_command_line(const LlamaSpec& model, const ParallelConfig& config,
                                  const predict::framework::FrameworkRecipe& recipe, int gpus_per_node);

}  // namespace itertime::formats
