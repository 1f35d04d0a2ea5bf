// op_builder.cpp: see op_builder.hpp. Checks the layout and the techniques (taken at the recipe's dp: no
// overlap at dp 1), then has builder::StageBuilder (op_builder_stage.hpp) emit the stage call by call in
// the order the CPU autograd engine of LibTorch 1.13 or 2.x (StageRecipe::dialect) runs it for
// calibrate/llama_model.cpp with the recipe's attention kernel (learned from traces; docs/method.md lists
// where the dialects differ), then aggregate it.
// Invariants:
//  - Signatures are rendered by common/op_signature.hpp, the tracer's own format, and their FLOPs and
//    bytes come from common/op_cost.hpp as the tracer's do, so an equal signature implies equal figures.
//  - Tensor strides follow ATen (predict/builder/aten_emulation.hpp): views keep their strides, reshape is a view
//    when ATen's computeStride allows it (else a contiguous copy), element-wise results follow their
//    first input's layout.
#include "predict/builder/op_builder.hpp"

#include "common/errors.hpp"
#include "common/parallel_config.hpp"
#include "predict/builder/op_builder_stage.hpp"

namespace itertime::predict {
namespace {

void check_stage_request(const LlamaSpec& model, int tp, int pp, int stage, int micro_batch, int seq_len,
                         const StageRecipe& recipe) {
  if (recipe.attention == AttentionKernel::kAuto) {
    throw UserError("build_stage_ops: the attention kernel must be eager or sdpa, not auto");
  }
  if (recipe.attention == AttentionKernel::kSdpa && recipe.dialect == TorchDialect::kTorch1) {
    throw UserError("build_stage_ops: sdpa attention needs LibTorch 2.x; LibTorch 1.13 has no scaled_dot_product_attention");
  }
  if (tp < 1 || pp < 1 || stage < 0 || stage >= pp || micro_batch < 1 || seq_len < 1) {
    throw UserError("build_stage_ops: tp, pp, micro_batch and seq_len must be positive and 0 <= stage < pp");
  }
  if (model.num_heads % tp != 0 || model.num_kv_heads % tp != 0 || model.intermediate_size % tp != 0) {
    throw UserError("model " + model.name + ": tp " + std::to_string(tp) + " does not divide the heads, KV heads and FFN size");
  }
  if (model.num_layers < pp) throw UserError("model " + model.name + " has fewer layers than pp " + std::to_string(pp));
  const TrainingTechniques& t = recipe.techniques;
  if (recipe.dp < 1) throw UserError("build_stage_ops: dp must be at least 1, not " + std::to_string(recipe.dp));
  if (t.overlap_gradient_reduction && t.gradient_bucket_bytes < 1) {
    throw UserError("build_stage_ops: training recipe '" + recipe_text(t) + "': gradient_bucket_bytes must be at least 1");
  }
  if (recipe.cp < 1) throw UserError("build_stage_ops: cp must be at least 1, not " + std::to_string(recipe.cp));
  if (recipe.cp > 1 && seq_len % (2 * recipe.cp) != 0) {
    throw UserError("build_stage_ops: context parallelism (cp " + std::to_string(recipe.cp) + ") needs seq_len " +
                    std::to_string(seq_len) + " to be a multiple of 2*cp");
  }
  const int local_seq = seq_len / recipe.cp;
  if (t.sequence_parallel && local_seq % tp != 0) {
    throw UserError("build_stage_ops: sequence parallelism needs seq_len" + std::string(recipe.cp > 1 ? "/cp " : " ") +
                    std::to_string(local_seq) + " to be a multiple of tp " + std::to_string(tp));
  }
  if (t.vocab_parallel && model.vocab_size % tp != 0) {
    throw UserError("build_stage_ops: a vocabulary-parallel head needs vocab_size " + std::to_string(model.vocab_size) +
                    " of model " + model.name + " to be a multiple of tp " + std::to_string(tp));
  }
}

}  // namespace

TorchDialect torch_dialect(const std::string& libtorch_version) {
  if (libtorch_version.empty() || libtorch_version.rfind("1.", 0) == 0) return TorchDialect::kTorch1;
  if (libtorch_version.rfind("2.", 0) == 0) return TorchDialect::kTorch2;
  throw UserError("LibTorch " + libtorch_version +
                  ": the stage builder knows the operator sequences of LibTorch 1.13 and 2.x only; trace every "
                  "configuration you predict (`itertime calibrate ops`) instead");
}

namespace {

// The stage, or with gather_pair the bucketed distributed optimizer's two gather variants ({without opg,
// with opg}) sharing every piece up to the all-gathers.
std::vector<BuiltStage> build_stages(const LlamaSpec& model, int tp, int pp, int stage, int micro_batch, int seq_len,
                                     PrecisionName precision, const StageRecipe& requested, bool gather_pair) {
  check_stage_request(model, tp, pp, stage, micro_batch, seq_len, requested);
  StageRecipe recipe = requested;  // what the stage runs at its dp: no overlap at dp 1
  recipe.techniques = at_dp(requested.techniques, requested.dp);
  const auto stages = stage_layers(static_cast<int>(model.num_layers), pp);
  const StageLayers& layers = stages[static_cast<std::size_t>(stage)];
  builder::StageShape shape;
  shape.batch = micro_batch;
  shape.seq = seq_len / requested.cp;  // CP rank 0's tokens (all of them at cp 1)
  shape.kv_seq = seq_len;
  shape.cp = requested.cp;
  shape.hidden = model.hidden_size;
  shape.heads = model.num_heads / tp;
  shape.kv_heads = model.num_kv_heads / tp;
  shape.head_dim = model.head_dim;
  shape.ffn = model.intermediate_size / tp;
  shape.vocab = model.vocab_size;
  shape.tp = tp;
  const bool tensor_parallel = tp > 1;
  shape.local_vocab = tensor_parallel && recipe.techniques.vocab_parallel ? model.vocab_size / tp : model.vocab_size;
  shape.residual_seq = tensor_parallel && recipe.techniques.sequence_parallel ? shape.seq / tp : shape.seq;
  builder::StageBuilder stage_builder(precision_policy(precision), recipe, shape, layers, tensor_parallel);
  stage_builder.begin_step();
  stage_builder.forward();
  stage_builder.backward();
  const std::vector<builder::StageParameter> parameters = stage_builder.parameters();
  const int64_t local_params = builder::local_parameter_count(parameters);
  const bool distributed_optimizer = recipe.techniques.distributed_optimizer;
  const bool overlap = stage_builder.overlaps_reduction();
  if (gather_pair && !(distributed_optimizer && overlap)) {
    throw UserError("build_stage_ops_gather_pair: training recipe '" + recipe_text(recipe.techniques) + "' at dp " +
                    std::to_string(recipe.dp) + " has no bucketed distributed optimizer (dopt+ovl at dp > 1)");
  }
  std::vector<BuiltStage> built;
  if (distributed_optimizer && overlap) {
    // The buckets were reduce-scattered into the shard's gradient in the backward.
    stage_builder.shard_norm_gradients(parameters);
    stage_builder.optimizer({builder::StageParameter{{stage_builder.bucketed_shard_count()}, -1}});
    if (gather_pair) {
      builder::StageBuilder without = stage_builder;  // a copy of everything emitted so far
      without.bucketed_all_gather(parameters, /*overlapped=*/false);
      without.stage_comms(stage, pp, local_params, /*dp_all_reduce=*/false);
      built.push_back(without.finish(local_params));
      stage_builder.bucketed_all_gather(parameters, /*overlapped=*/true);
    } else {
      stage_builder.bucketed_all_gather(parameters, recipe.techniques.overlap_parameter_gather);
    }
  } else if (distributed_optimizer) {
    stage_builder.sp_gradients(parameters);
    const int64_t shard = builder::shard_count(local_params, recipe.dp);
    stage_builder.dp_reduce_scatter(parameters, local_params, recipe.dp);
    stage_builder.optimizer({builder::StageParameter{{shard}, -1}});
    stage_builder.dp_all_gather(parameters, shard, recipe.dp);
  } else {
    stage_builder.sp_gradients(parameters);
    if (!overlap) stage_builder.dp_buffer(parameters, local_params);  // overlap reduced the buckets in the backward
    stage_builder.optimizer(parameters);
  }
  stage_builder.stage_comms(stage, pp, local_params, /*dp_all_reduce=*/!distributed_optimizer && !overlap);
  built.push_back(stage_builder.finish(local_params));
  return built;
}

}  // namespace

BuiltStage build_stage_ops(const LlamaSpec& model, int tp, int pp, int stage, int micro_batch, int seq_len,
                           PrecisionName precision, const StageRecipe& recipe) {
  return std::move(build_stages(model, tp, pp, stage, micro_batch, seq_len, precision, recipe, false).front());
}

std::vector<BuiltStage> build_stage_ops_gather_pair(const LlamaSpec& model, int tp, int pp, int stage, int micro_batch,
                                                    int seq_len, PrecisionName precision, const StageRecipe& recipe) {
  return build_stages(model, tp, pp, stage, micro_batch, seq_len, precision, recipe, true);
}

}  // namespace itertime::predict
