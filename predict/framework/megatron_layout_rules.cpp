// megatron_layout_rules.cpp: Megatron-LM's layout rules (megatron_layout_rules.hpp). Each rule names the
// file of NVIDIA/Megatron-LM at d98e8a64ddf34856e74b24714e3bedb2f5a39553 whose check it transcribes (read,
// not copied); docs/framework.md lists them as a table.
#include "predict/framework/megatron_layout_rules.hpp"

#include <algorithm>

namespace itertime::predict::framework {

namespace {

std::string num(int64_t n) { return std::to_string(n); }

// The layers the plain / accounted split spreads over pp: L plus one per accounted embedding or loss.
int64_t accounted_layers(int64_t layers, const PipelineSplit& s) {
  return layers + (s.account_for_embedding ? 1 : 0) + (s.account_for_loss ? 1 : 0);
}

// The rules on the split alone (transformer_config.py __post_init__ "Uneven PP" and account_for branches,
// arguments.py validate_args' "Number of layers should be divisible by the pipeline-model-parallel size",
// transformer_block.py get_num_layers_to_build's asserts). Appends to `out`.
void split_rules(int64_t layers, int pp, int vp, const PipelineSplit& s, std::vector<LayoutRuleBreak>& out) {
  const auto pp_rule = [&out](std::string text) { out.push_back({"pp", std::move(text)}); };
  const bool first = s.first_stage_layers > 0, last = s.last_stage_layers > 0;
  if (first || last) {
    if (s.account_for_embedding || s.account_for_loss) {
      pp_rule(
          "--decoder-first/last-pipeline-num-layers cannot be combined with --account-for-embedding/loss-in-pipeline-split "
          "(Megatron-LM's transformer_config.py)");
      return;
    }
    int64_t rest = layers - s.first_stage_layers - s.last_stage_layers;
    const int64_t middle = int64_t{pp} - (first ? 1 : 0) - (last ? 1 : 0);
    if (vp > 1 && first && s.first_stage_layers % vp != 0)
      out.push_back(
          {"vp", "--decoder-first-pipeline-num-layers " + num(s.first_stage_layers) + " must be a multiple of vp " + num(vp)});
    if (vp > 1 && last && s.last_stage_layers % vp != 0)
      out.push_back(
          {"vp", "--decoder-last-pipeline-num-layers " + num(s.last_stage_layers) + " must be a multiple of vp " + num(vp)});
    if (middle < 0 || rest < 0 || (rest > 0) != (middle > 0)) {
      pp_rule("--decoder-first/last-pipeline-num-layers leave " + num(rest) + " layers for " + num(std::max<int64_t>(middle, 0)) +
              " middle pipeline ranks (pp " + num(pp) + "); both must be 0 or both positive");
      return;
    }
    if (middle > 0 && rest % middle != 0) {
      pp_rule("the " + num(rest) + " layers left by --decoder-first/last-pipeline-num-layers must split evenly over the " +
              num(middle) + " middle pipeline ranks");
    } else if (middle > 0 && vp > 1 && (rest / middle) % vp != 0) {
      out.push_back(
          {"vp", "the " + num(rest / middle) + " layers of each middle pipeline rank must be a multiple of vp " + num(vp)});
    }
    return;
  }
  const int64_t total = accounted_layers(layers, s);
  const std::string counted = s.account_for_embedding || s.account_for_loss
                                  ? num(layers) + " layers + " +
                                        (s.account_for_embedding && s.account_for_loss ? std::string("the embedding and the loss")
                                         : s.account_for_embedding                     ? std::string("the embedding")
                                                                                       : std::string("the loss")) +
                                        " = " + num(total)
                                  : num(layers) + " layers";
  const bool accounting_helps =
      !s.account_for_embedding && !s.account_for_loss && (layers + 2) % pp == 0 && ((layers + 2) / pp) % vp == 0;
  const std::string hint = accounting_helps
                               ? "; --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split make it " +
                                     num(layers + 2) + " (NeMo's split), which does"
                               : "";
  if (total % pp != 0) {
    pp_rule(counted + " do not split evenly over pp " + num(pp) +
            " (Megatron-LM: \"Number of layers should be divisible by the pipeline-model-parallel size\")" + hint);
  } else if (vp > 1 && (total / pp) % vp != 0) {
    out.push_back({"vp", "the " + num(total / pp) + " layers of each pipeline rank (" + counted + " over pp " + num(pp) +
                             ") do not split into vp " + num(vp) + " chunks" + hint});
  }
}

}  // namespace

PipelineSplit resolve_pipeline_split(int64_t layers, int pp, int vp, const PipelineSplit& split) {
  if (split.given) return split;
  PipelineSplit plain;
  std::vector<LayoutRuleBreak> broken;
  if (pp >= 1 && vp >= 1) split_rules(layers, pp, vp, plain, broken);
  if (broken.empty() || pp < 1 || vp < 1) return plain;
  PipelineSplit accounted;
  accounted.account_for_embedding = accounted.account_for_loss = true;
  std::vector<LayoutRuleBreak> still;
  split_rules(layers, pp, vp, accounted, still);
  return still.empty() ? accounted : plain;
}

std::vector<int64_t> megatron_stage_layer_counts(int64_t layers, int pp, int vp, const PipelineSplit& s) {
  const int64_t stages = int64_t{pp} * vp;
  std::vector<int64_t> out(static_cast<std::size_t>(stages), 0);
  for (int64_t j = 0; j < stages; ++j) {
    const int64_t rank = j % pp;
    int64_t per_rank = 0;
    if (s.first_stage_layers > 0 || s.last_stage_layers > 0) {
      const int64_t middle = int64_t{pp} - (s.first_stage_layers > 0 ? 1 : 0) - (s.last_stage_layers > 0 ? 1 : 0);
      const int64_t rest = layers - s.first_stage_layers - s.last_stage_layers;
      per_rank = middle > 0 ? rest / middle : 0;
      if (rank == 0 && s.first_stage_layers > 0) per_rank = s.first_stage_layers;
      if (rank == pp - 1 && s.last_stage_layers > 0) per_rank = s.last_stage_layers;
    } else {
      per_rank = accounted_layers(layers, s) / pp;
    }
    int64_t n = per_rank / vp;
    // transformer_block.py: the accounted embedding (loss) takes one layer's place in the first (last)
    // virtual stage.
    if (s.account_for_embedding && j == 0) --n;
    if (s.account_for_loss && j == stages - 1) --n;
    out[static_cast<std::size_t>(j)] = n;
  }
  return out;
}

std::string pipeline_split_options(const PipelineSplit& s) {
  std::string out;
  const auto add = [&out](const std::string& option) { out += (out.empty() ? "" : " ") + option; };
  if (s.account_for_embedding) add("--account-for-embedding-in-pipeline-split");
  if (s.account_for_loss) add("--account-for-loss-in-pipeline-split");
  if (s.first_stage_layers > 0) add("--decoder-first-pipeline-num-layers " + num(s.first_stage_layers));
  if (s.last_stage_layers > 0) add("--decoder-last-pipeline-num-layers " + num(s.last_stage_layers));
  return out;
}

std::vector<std::string> framework_model_limits(const TransformerShape& shape, const ParallelConfig& c) {
  std::vector<std::string> out;
  if (c.tp >= 1 && shape.kv_heads % c.tp != 0)
    out.push_back("tp " + num(c.tp) + " does not divide the " + num(shape.kv_heads) +
                  " KV heads: Megatron-LM replicates them, which itertime's framework model does not represent");
  if (c.vp > 64) out.push_back("vp " + num(c.vp) + ": itertime's framework model takes at most 64 virtual stages per rank");
  return out;
}

std::vector<LayoutRuleBreak> layout_rule_breaks(const TransformerShape& shape, const ParallelConfig& c,
                                                const PipelineSplit& given) {
  std::vector<LayoutRuleBreak> out;
  const auto add = [&out](const char* field, std::string text) { out.push_back({field, std::move(text)}); };
  if (c.dp < 1 || c.tp < 1 || c.pp < 1 || c.cp < 1 || c.vp < 1 || c.micro_batch < 1 || c.global_batch < 1 || c.seq_len < 1) {
    add("layout",
        "every parallel degree, the micro-batch, the global batch and the sequence must be >= 1 (" + c.to_string() + ")");
    return out;
  }
  // transformer_config.py __post_init__: attention heads a multiple of tp; num_query_groups a multiple or
  // a divisor of tp.
  if (shape.heads % c.tp != 0)
    add("tp", "--tensor-model-parallel-size " + num(c.tp) + " must divide the " + num(shape.heads) + " attention heads");
  if (shape.kv_heads % c.tp != 0 && c.tp % shape.kv_heads != 0)
    add("tp", "--num-query-groups " + num(shape.kv_heads) + " must be a multiple or a divisor of tp " + num(c.tp));
  // tensor_parallel/layers.py ColumnParallelLinear: divide(output_size, world_size) (utils.py ensure_divisibility).
  if (shape.ffn % c.tp != 0)
    add("tp", "--tensor-model-parallel-size " + num(c.tp) + " must divide --ffn-hidden-size " + num(shape.ffn));
  // num_microbatches_calculator.py: the global batch a multiple of micro-batch x dp.
  if (c.global_batch % (int64_t{c.dp} * c.micro_batch) != 0)
    add("global_batch", "--global-batch-size " + num(c.global_batch) +
                            " must be a multiple of --micro-batch-size x dp = " + num(int64_t{c.dp} * c.micro_batch));
  // arguments.py: "seq-length should be a multiple of 2 * context-parallel-size" (the load-balanced ring
  // gives each CP rank two chunks).
  if (c.cp > 1 && c.seq_len % (2 * c.cp) != 0)
    add("cp", "--seq-length " + num(c.seq_len) + " must be a multiple of 2 x --context-parallel-size = " + num(2 * c.cp));
  if (c.vp > 1) {
    // arguments.py: the interleaved schedule needs pp > 1 (with its default p2p overlap).
    if (c.pp == 1) add("vp", "virtual pipeline stages (vp " + num(c.vp) + ") need --pipeline-model-parallel-size > 1");
    // schedules.py forward_backward_pipelining_with_interleaving: microbatch_group_size_per_vp_stage
    // (default pp, model_parallel_config.py) within [pp, m] and m mod it 0 or >= pp: m a multiple of pp.
    if (c.pp > 1 && c.global_batch % (int64_t{c.dp} * c.micro_batch) == 0 && c.num_micro_batches() % c.pp != 0)
      add("vp", "the interleaved schedule needs the micro-batches (" + num(c.num_micro_batches()) +
                    " = gbs / (dp x mbs)) a multiple of pp " + num(c.pp));
  }
  if (c.vp == 1 || c.pp > 1) {
    const PipelineSplit split = resolve_pipeline_split(shape.layers, c.pp, c.vp, given);
    const std::size_t before = out.size();
    split_rules(shape.layers, c.pp, c.vp, split, out);
    // Megatron-LM builds a model chunk of no decoder layer (the accounted embedding or loss alone);
    // itertime's layouts (ParallelConfig) give every chunk a layer: a limit of the model, stated here.
    if (out.size() == before && c.vp <= 64) {
      const std::vector<int64_t> counts = megatron_stage_layer_counts(shape.layers, c.pp, c.vp, split);
      if (*std::min_element(counts.begin(), counts.end()) < 1)
        add("vp", "pp " + num(c.pp) + " x vp " + num(c.vp) + " leaves a model chunk without a decoder layer (" +
                      num(shape.layers) + " layers): Megatron-LM builds it, itertime's layouts do not");
    }
  }
  for (std::string& limit : framework_model_limits(shape, c)) add(limit.rfind("vp", 0) == 0 ? "vp" : "tp", std::move(limit));
  return out;
}

std::vector<std::string> layout_violations(const TransformerShape& shape, const ParallelConfig& config,
                                           const PipelineSplit& split) {
  std::vector<std::string> out;
  for (LayoutRuleBreak& broken : layout_rule_breaks(shape, config, split)) out.push_back(std::move(broken.text));
  return out;
}

std::vector<std::string> recipe_violations(const ParallelConfig& c, const FrameworkRecipe& recipe) {
  std::vector<std::string> out;
  const TrainingTechniques& t = recipe.techniques;
  // Sequence parallelism at tp 1 is not a refusal: arguments.py validate_args turns it off with a warning
  // (before model_parallel_config.py's "Cannot use sequence parallelism without tensor parallelism"), and
  // the models read it as off there.
  // mappings.py _split_along_first_dim: the sequence on a CP rank split over tp.
  if (t.sequence_parallel && c.tp > 1 && c.cp >= 1 && (c.seq_len / c.cp) % c.tp != 0)
    out.push_back("--sequence-parallel: the " + num(c.seq_len / c.cp) + " tokens per CP rank must split over tp " + num(c.tp));
  // arguments.py: TP comm overlap only with sequence parallelism.
  if (recipe.tp_comm_overlap && !(t.sequence_parallel && c.tp > 1)) out.push_back("--tp-comm-overlap needs --sequence-parallel");
  // arguments.py: overlapped parameter gather only with the distributed optimizer and overlapped reduction.
  if (t.overlap_parameter_gather && !(t.distributed_optimizer && t.overlap_gradient_reduction))
    out.push_back("--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce");
  return out;
}

std::vector<std::string> framework_violations(const TransformerShape& shape, const ParallelConfig& config,
                                              const FrameworkRecipe& recipe) {
  std::vector<std::string> out = layout_violations(shape, config, recipe.pipeline_split);
  for (std::string& broken : recipe_violations(config, recipe)) out.push_back(std::move(broken));
  return out;
}

}  // namespace itertime::predict::framework
