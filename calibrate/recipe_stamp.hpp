// recipe_stamp.hpp: what a calibration file says about how its operators and ground truth were run,
// beyond the job's configurations: the attention kernel and the LibTorch version (whose dispatcher
// decides the operator sequence, predict/builder/op_builder.hpp). Torch-free interface.
// Invariants:
//  - /meta "attention" holds a resolved kernel (eager | sdpa), "libtorch_version" the version string
//    of the LibTorch that ran (e.g. "2.6.0"); both are written by `calibrate ops` and `calibrate
//    groundtruth` before their first row.
//  - A file keeps one recipe: adding to a file stamped with another attention kernel or another LibTorch
//    major.minor is a UserError naming both (the rows would not be comparable), and the file is untouched.
//  - Files written before these attributes existed read as eager on LibTorch 1.13 (what ran then).
#pragma once

#include <string>

#include "common/attention.hpp"
#include "common/h5store.hpp"
#include "common/store_meta.hpp"

namespace itertime::calibrate {

inline constexpr const char* kAttentionAttribute = store::meta_key::kAttention;
inline constexpr const char* kTorchVersionAttribute = store::meta_key::kLibtorchVersion;

// The LibTorch version this build runs ("1.13.1"), or "" without LibTorch.
std::string torch_version();

// calibrate/torch_compat.hpp's resolve_attention for torch-free includers: auto becomes sdpa where this
// LibTorch has it (>= 2.0), else eager; sdpa without it is a UserError.
AttentionKernel resolve_attention_kernel(AttentionKernel requested);

// Checks, then writes, the stamp (see the invariants). Call on the rank that holds the store.
void stamp_recipe(h5::Store& store, AttentionKernel resolved_attention);

}  // namespace itertime::calibrate
