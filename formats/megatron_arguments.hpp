// megatron_arguments.hpp: Megatron-LM's arguments as one typed-at-the-edge value, whichever way they
// came: a command line or arguments file (megatron_args.hpp) or the arguments block a Megatron-LM
// training log prints at start (megatron_log.hpp). One mapping turns them into a UserRun.
// Invariants:
//  - Keys are argparse destination names, as megatron/training/arguments.py defines them and as the
//    log's block prints them: `--num-layers` is num_layers, `--tensor-model-parallel-size` is
//    tensor_model_parallel_size, `--bf16` is bf16.
//  - Values are text, normalized: a flag given is "true"; a log's Python True / False are "true" /
//    "false"; a log's None is not stored (unset); lists keep their text.
//  - line_of gives where each key was read (1-based line of the file or log; 0 for a command line), so
//    an error names file and line.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "formats/user_run.hpp"

namespace itertime::formats {

struct MegatronArguments {
  std::string source;  // file name, or "command line"
  std::map<std::string, std::string> values;
  std::map<std::string, int> line_of;
  // Added for the other formats that map onto these keys (nemo_config.hpp): how a key is named where it
  // was read ("model.num_layers"); absent: "--" + the key with '-' for '_'.
  std::map<std::string, std::string> shown_as;
  // Words of a command line that are neither an option nor its value, verbatim (listed as not understood).
  std::vector<std::string> stray;
  // Keys a configuration states twice under different names, as "key: value (why)": the second of two
  // that agree, a tokenizer's vocabulary beside the model's (issue 44: listed as read, not dropped).
  std::vector<std::string> also_read;
  // The world size when the source states it (a torchrun line's --nproc-per-node x --nnodes, a log's
  // world_size): 0 when unknown; the key world_size, when present, wins.
  int world_size = 0;
};

// How `key` is shown to a person: shown_as, else "--" + key with '-' for '_'.
std::string shown_name(const MegatronArguments& arguments, const std::string& key);
// "FILE:LINE: " (or "FILE: " without a line) for the key's errors.
std::string where_read(const MegatronArguments& arguments, const std::string& key);

// The run those arguments launch: the model from its sizes (num_layers, hidden_size, ffn_hidden_size,
// num_attention_heads, group_query_attention / num_query_groups, seq_length, the vocabulary); the layout
// (tensor/pipeline/context parallel sizes; num_layers_per_virtual_pipeline_stage, num_virtual_stages_per_
// pipeline_rank or a log's virtual_pipeline_model_parallel_size, which must agree; micro/global batch;
// data parallel = world / (tp*pp*cp) when world_size or a log's data_parallel_size is known, else left to
// the caller: data_parallel_given false); precision (bf16, fp16, fp8 (--fp8-format) / fp8_recipe);
// techniques (sequence_parallel, use_distributed_optimizer, overlap_grad_reduce, overlap_param_gather,
// recompute_granularity / recompute_method); tp_comm_overlap, fp8_param_gather. A missing size or a
// contradiction is a UserError naming the argument (and its file and line), on one line; every key not
// used is listed in not_understood, but a false flag (a log's option not given).
UserRun user_run_from_megatron(const MegatronArguments& arguments);

}  // namespace itertime::formats
