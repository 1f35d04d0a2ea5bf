// megatron_layout_rules.hpp: the one rule set for whether Megatron-LM runs a layout (issue 44), written from
// its argument validation at NVIDIA/Megatron-LM commit d98e8a64ddf34856e74b24714e3bedb2f5a39553
// (2026-08-22): megatron/training/arguments.py validate_args, megatron/core/transformer/transformer_config.py
// and megatron/core/model_parallel_config.py __post_init__, megatron/core/transformer/transformer_block.py
// get_num_layers_to_build, megatron/core/pipeline_parallel/schedules.py (the interleaved schedule's checks),
// megatron/core/num_microbatches_calculator.py. predict, plan, score-published, the memory model, the
// readers of users' formats and --emit all ask these functions; no other code states a layout rule.
// Invariants:
//  - Each broken rule is one phrase naming the Megatron-LM option (as a user writes it) and what would be
//    legal; an empty list: Megatron-LM starts this layout and itertime's framework model predicts it.
//  - layout_violations(shape, config, split) = Megatron's rules on the degrees and the layer split, then
//    the limits of itertime's model (framework_model_limits; and a model chunk without a decoder layer,
//    which Megatron-LM builds and itertime's layouts do not). recipe_violations(config, recipe) = the rules
//    on the recipe's switches (sequence parallelism, TP comm overlap, overlapped parameter gather).
//    framework_violations(shape, config, recipe) = both, with recipe.pipeline_split.
//  - resolve_pipeline_split: a given split stays as it is; one not given is Megatron's plain split when
//    legal, else NeMo's embedding + loss accounting when that is legal, else the plain split (which the
//    rules then refuse, naming the accounting where it would have helped).
//  - megatron_stage_layer_counts(...) for a legal resolved split: pp * vp counts, virtual stage
//    j = chunk * pp + rank, summing to the layers; as get_num_layers_to_build gives them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/parallel_config.hpp"
#include "predict/framework/framework_types.hpp"

namespace itertime::predict::framework {

inline constexpr const char* kMegatronRulesCommit = "d98e8a64ddf34856e74b24714e3bedb2f5a39553";

PipelineSplit resolve_pipeline_split(int64_t layers, int pp, int vp, const PipelineSplit& split);

// Decoder layers per virtual stage (j = chunk * pp + rank) of a resolved, legal split.
std::vector<int64_t> megatron_stage_layer_counts(int64_t layers, int pp, int vp, const PipelineSplit& split);

// The split as Megatron-LM options ("--account-for-embedding-in-pipeline-split ...", "" for the plain split).
std::string pipeline_split_options(const PipelineSplit& split);

// One broken rule and the layout field it is about: "tp", "pp", "cp", "vp", "global_batch", or "layout"
// (a degree < 1), so that a reader can name the field (score-published's rows).
struct LayoutRuleBreak {
  std::string field;
  std::string text;
};
std::vector<LayoutRuleBreak> layout_rule_breaks(const TransformerShape& shape, const ParallelConfig& config,
                                                const PipelineSplit& split = {});

// Megatron's rules on the degrees and the layer split (the split resolved first), then the model's limits:
// layout_rule_breaks' texts.
std::vector<std::string> layout_violations(const TransformerShape& shape, const ParallelConfig& config,
                                           const PipelineSplit& split = {});
// What Megatron-LM runs but itertime's framework model does not represent (KV heads replicated over tp,
// more than 64 virtual stages per rank).
std::vector<std::string> framework_model_limits(const TransformerShape& shape, const ParallelConfig& config);
// Megatron's rules on the recipe's switches at this layout (sequence parallelism at tp 1 is off, as
// arguments.py makes it, not refused).
std::vector<std::string> recipe_violations(const ParallelConfig& config, const FrameworkRecipe& recipe);
// Both, with recipe.pipeline_split.
std::vector<std::string> framework_violations(const TransformerShape& shape, const ParallelConfig& config,
                                              const FrameworkRecipe& recipe);

}  // namespace itertime::predict::framework
