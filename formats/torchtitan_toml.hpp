// torchtitan_toml.hpp: a torchtitan job TOML read into a UserRun (issue 34).
// Invariants:
//  - Keys as torchtitan's JobConfig names them (torchtitan/config/job_config.py; the llama3 train_configs
//    TOML, at pytorch/torchtitan 238fa995): [model] name "llama3" with flavor 8B / 70B / 405B (the
//    sizes of torchtitan/models/llama3/__init__.py: LLaMA 3.1's, vocabulary 128256, untied);
//    [training] local_batch_size (or the older batch_size), global_batch_size (-1: local x dp),
//    seq_len, mixed_precision_param; [parallelism] data_parallel_replicate_degree,
//    data_parallel_shard_degree (-1: the rest of the world, so dp is the caller's: --gpus),
//    tensor_parallel_degree, pipeline_parallel_degree, context_parallel_degree,
//    enable_async_tensor_parallel, pipeline_parallel_schedule, pipeline_parallel_microbatch_size;
//    [activation_checkpoint] mode; float8 through [model] converters and [quantize.linear.float8] (or
//    the older [float8]).
//  - torchtitan trains with FSDP2 (parameters, gradients and optimizer state sharded over the
//    data-parallel ranks, ZeRO-3), which itertime has no model of. It is predicted as the closest model
//    there is, Megatron-Core + Transformer Engine with the distributed optimizer (ZeRO-1), overlapped
//    gradient reduce-scatter and parameter all-gather (dopt+ovl+opg): FSDP2's second all-gather in the
//    backward and its smaller memory are not modelled. TP is sequence-parallel (torchtitan's plan shards
//    the norms along the sequence), async TP is --tp-comm-overlap, float8 is fp8 with tensorwise
//    (current) scaling. Each of these is said in `assumed`.
//  - Every key not used is listed in not_understood with its dotted name; malformed TOML, a value of
//    the wrong type, an unknown flavor or schedule is a UserError naming file and line.
#pragma once

#include <string>

#include "formats/user_run.hpp"

namespace itertime::formats {

UserRun read_torchtitan_toml_text(const std::string& toml_text, const std::string& source);

}  // namespace itertime::formats
