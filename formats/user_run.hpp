// user_run.hpp: what every user format becomes at the boundary (issue 34): a training run as itertime's
// typed values, whatever it was written in (a Megatron-LM command line or arguments file, a NeMo 2 /
// Megatron-Bridge configuration dump, a torchtitan TOML, the arguments block of a training log).
// Invariants:
//  - A UserRun holds typed values only (text stays in the readers); the rest of itertime predicts, plans
//    and validates it as it would the same configuration given by itertime's own flags: one prediction
//    path whatever the input (DESIGN.md section 11).
//  - Nothing a user wrote is dropped silently: every option or key the reader did not use is listed in
//    `not_understood` verbatim (name and value), and every value the reader had to assume (a default of
//    the framework, a vocabulary size the format does not state) in `assumed`, with the reason.
//  - `model` is a complete LlamaSpec (its `name` says where it came from); `config` passes
//    ParallelConfig::require_valid for it, or the reader raised a UserError naming the option and file.
#pragma once

#include <string>
#include <vector>

#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "predict/framework/framework_types.hpp"

namespace itertime::formats {

struct UserRun {
  std::string source;  // the file read, or "command line"
  std::string format;  // "megatron-args", "megatron-log", "nemo-config", "torchtitan-toml", ...
  LlamaSpec model;
  ParallelConfig config;
  // The framework that trains it: Megatron-LM / NeMo / Megatron-Bridge runs are kMegatronTe; a
  // torchtitan run is predicted with the closest model itertime has, said in `assumed`.
  predict::framework::Framework framework = predict::framework::Framework::kMegatronTe;
  predict::framework::FrameworkRecipe recipe;  // precision, techniques, fp8 recipe, TP overlap, fp8 parameters
  std::vector<std::string> not_understood;     // "--foo 3", "model.bar: 1": given, not used
  std::vector<std::string> assumed;            // "vocabulary 128256 (LLaMA 3's; the arguments give none)"
  // What was read and used, each as written ("--num-layers 32", "model.num_layers: 32"), for the output.
  std::vector<std::string> read;
  // Whether the source fixes the data-parallel size (a world size, or dp itself) and the global batch.
  // Without dp, config.dp is 1 and config is checked only once with_data_parallel() sets it (the CLI's
  // --gpus or --dp); without a global batch it is the framework's default, micro-batch x dp.
  bool data_parallel_given = true;
  bool global_batch_given = true;
  // Without a global batch: the batch per data-parallel rank it follows (global = this x dp); 0: micro_batch.
  int batch_per_dp_rank = 0;
};

// `run` with data-parallel size `dp` (and the default global batch when the source gave none), checked
// with ParallelConfig::require_valid; `why` names where dp came from in the errors ("--gpus 16").
UserRun with_data_parallel(UserRun run, int dp, const std::string& why);

}  // namespace itertime::formats
