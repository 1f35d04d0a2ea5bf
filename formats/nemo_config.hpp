// nemo_config.hpp: a NeMo 2 / Megatron-Bridge configuration dump (YAML) read into a UserRun (issue 34).
// Invariants:
//  - The YAML is flattened to dotted keys ("model.num_layers", "trainer.strategy.ddp.overlap_grad_reduce")
//    and each key is mapped by its last name, whatever the section it sits in, so one mapping reads both
//    Megatron-Bridge's ConfigContainer.to_yaml (model., train., ddp., mixed_precision., tokenizer.) and a
//    NeMo 2 recipe dumped as YAML (model.config., data., trainer.strategy., optim.config.). The names are
//    Megatron-Core's (TransformerConfig, DistributedDataParallelConfig: Megatron-LM's dest names), plus
//    the config classes' own: gated_linear_unit (--swiglu), share_embeddings_and_output_weights (the
//    opposite of --untie-embeddings-and-output-weights), layernorm_epsilon, virtual_pipeline_model_
//    parallel_size, num_moe_experts, fp8_param, a mixed_precision recipe name ("bf16_mixed",
//    "bf16_with_fp8_delayed_scaling_mixed", ...), Lightning's precision ("bf16-mixed"), and the trainer's
//    devices x num_nodes as the world size.
//  - Then user_run_from_megatron maps it (megatron_arguments.hpp): the same rules, refusals and lists,
//    each key shown as the YAML names it ("model.num_layers: 32") with its line.
//  - A key read twice (model.seq_length, dataset.seq_length) must agree, else a UserError naming both
//    lines; model.vocab_size is the model's, a tokenizer's vocab_size only where the model gives none.
//  - Null values are unset; malformed YAML is a UserError naming file and line.
#pragma once

#include <string>

#include "formats/megatron_arguments.hpp"
#include "formats/user_run.hpp"

namespace itertime::formats {

MegatronArguments nemo_arguments(const std::string& yaml_text, const std::string& source);
UserRun read_nemo_config_text(const std::string& yaml_text, const std::string& source);

}  // namespace itertime::formats
