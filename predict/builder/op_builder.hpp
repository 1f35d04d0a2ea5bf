// op_builder.hpp: the operator sequence of one pipeline stage, built from the model, the precision
// policy and the recipe (attention kernel, LibTorch dialect) alone (no LibTorch), as calibrate/op_tracer.hpp
// would record it for calibrate/llama_model.cpp trained by calibrate/ops_calibration.cpp's trace_stage:
// the forward of one micro-batch under the policy's autocast (and the last stage's loss * 0.25), its
// backward, with sequence parallelism the TP sum of the norms' gradients (phase sp_grads), the DP
// gradient-buffer phase (flatten, div_, unflatten) and one AdamW step, plus the communication operations
// trace_stage appends, for the recipe's training techniques. With the distributed optimizer (ZeRO-1, at
// StageRecipe::dp, as DP rank 0 runs it): the gradients flattened into a buffer padded to dp shards of
// ceil(local_params / dp), divided, reduce-scattered (dp_buffer); AdamW on the one flat shard, the shards
// all-gathered and copied back into the parameters (optimizer). With overlapped gradient reduction (ovl,
// at StageRecipe::dp > 1; calibrate/gradient_buckets.hpp): the flat gradient buffer zeroed at the step's
// start (dp_buffer), each backward's AccumulateGrad adding into it (add_), and each bucket, as its last
// gradient is added, narrowed, divided (dp_buffer) and all-reduced (comm in phase backward); no blocking
// DP phase. With both (dopt+ovl at dp > 1, trainer.cpp's make_bucketed_shard as DP rank 0 runs it): the
// buckets padded to multiples of dp (the buffer zeroed at the step's start, dp_buffer), each completed
// bucket divided (dp_buffer) and reduce-scattered into rank 0's slice of the shard's gradient (narrow and
// a dp_reduce_scatter of one rank's slice, phase backward); with SP the shard's norm elements summed over
// TP (sp_grads); AdamW on the shard; each bucket's slice all-gathered (dp_all_gather of one rank's slice)
// and the parameters copied from the padded buffer (optimizer). With context parallelism (StageRecipe::cp
// > 1) the stage as CP rank 0 runs it: seq_len / cp tokens, the rotary tables index_select-ed at the
// global positions, each layer's keys and values all-gathered (cp_all_gather, forward; with full
// recompute again in the backward) and their gradients reduce-scattered (cp_reduce_scatter, backward),
// one rank's part each, and the causal mask built from the global positions; StageRecipe::dp is then the
// reduction size dp*cp. The pieces: op_builder_stage.hpp; the records it emits: predict/model/stage_ops.hpp.
// Invariants:
//  - Every BuiltOp's signature is byte-identical to TracedOp::signature() of the traced call with the same
//    shapes: both are rendered by common/op_signature.hpp, the builder's value arguments as c10 prints
//    IValues (predict/builder/aten_emulation.hpp); input_dtypes / output_dtype / flops / bytes are those TracedOp
//    gives (and /ops/signatures stores).
//  - The AdamW step follows common/training_recipe.hpp, as the traced and trained stages do.
//  - ops are aggregated per (phase, signature) with their counts, in order of first appearance, as the
//    /ops/sequences rows of a traced stage; comms are aggregated per (phase, kind, dtype, bytes) as /ops/comms.
//  - local_params equals the traced stage's parameter count (TP-sharded projections, replicated norms,
//    embedding and LM head).
//  - The stage is built for at_dp(recipe.techniques, recipe.dp), as trace_stage traces it: ovl at dp 1 is
//    the plain stage, and dopt+ovl at dp 1 the plain distributed optimizer's.
//  - cp == 1 builds exactly the calls of before context parallelism; cp > 1 needs seq_len % (2*cp) == 0
//    and (seq_len/cp) % tp == 0 with SP (UserError otherwise).
//  - Pure: no I/O, no global mutable state; throws UserError for a layout the model does not admit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/attention.hpp"
#include "common/model_spec.hpp"
#include "common/phase.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "predict/model/stage_ops.hpp"

namespace itertime::predict {

// Which LibTorch's dispatcher and autograd engine the sequence follows: they decompose some calls
// differently (tests/torch/test_op_builder.cpp checks each against real traces on its own LibTorch).
enum class TorchDialect {
  kTorch1,  // LibTorch 1.13 (Debian 12)
  kTorch2,  // LibTorch 2.x, verified on 2.6 (Debian 13); other 2.x releases are assumed to match it
};
// "1.13.1" -> kTorch1, "2.6.0+cpu" -> kTorch2; "" (files from before the version was stored) -> kTorch1.
// Throws UserError for a version it has no dialect for.
TorchDialect torch_dialect(const std::string& libtorch_version);

// What decides the sequence besides the model, layout and precision. A kSdpa stage needs kTorch2.
// techniques: sequence parallelism, recompute, the vocabulary-parallel head, the distributed optimizer and
// overlapped gradient reduction (its buckets of gradient_bucket_bytes) are built, as trace_stage traces
// them, together too (the trainer's bucketed shard).
// dp: the reduction size (>= 1): the DP degree, with context parallelism dp*cp (the trainer's DP·CP group);
// only the distributed optimizer's stage (its shard sizes) and overlapped reduction's (dropped at 1,
// common/training_techniques.hpp's at_dp) depend on it. cp: the context-parallel degree (seq_len % (2*cp)
// == 0), the stage built as CP rank 0 runs it.
struct StageRecipe {
  AttentionKernel attention = AttentionKernel::kEager;
  TorchDialect dialect = TorchDialect::kTorch1;
  TrainingTechniques techniques = {};
  int dp = 1;
  int cp = 1;  // context-parallel degree: the stage as CP rank 0 runs it (dp above is then the dp*cp reduction ranks)
};

BuiltStage build_stage_ops(const LlamaSpec& model, int tp, int pp, int stage, int micro_batch, int seq_len,
                           PrecisionName precision, const StageRecipe& recipe = {});

// A bucketed distributed-optimizer stage (dopt+ovl at its dp > 1) with and without opg: {without, with}.
// The two differ only in the update's last piece (the all-gathers' order and the copy back), so the rest
// is built once: each equals build_stage_ops of its recipe. Needs recipe.techniques at recipe.dp to hold
// dopt and ovl (UserError otherwise); opg in the recipe is ignored.
std::vector<BuiltStage> build_stage_ops_gather_pair(const LlamaSpec& model, int tp, int pp, int stage, int micro_batch,
                                                    int seq_len, PrecisionName precision, const StageRecipe& recipe);

}  // namespace itertime::predict
