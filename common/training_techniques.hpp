// training_techniques.hpp: the options of Megatron-LM's training techniques that change what a step runs
// (issue 16), what each does in calibrate/trainer.hpp and docs/method.md, and their one text form.
// Invariants:
//  - Torch-free; all off by default (plain TP, PP and DP as before); the trainer, job files, ground
//    truth, the memory model, the tracer, the stage builder and the predictor know every combination.
//  - Overlapped reduction needs dp > 1: at dp 1 there is nothing to reduce and the trainer trains plainly,
//    so at_dp() drops it there; stages are traced, built and predicted with at_dp(techniques, dp).
//  - recipe_text() is the canonical text of a set of techniques, the one job keys, stage keys, HDF5 rows
//    and reports use: "" when every technique is off, else the tokens of the techniques that are on, in
//    this fixed order, joined by '+': sp, vp, dopt, rc-sel | rc-full, ovl (ovl-<size> when the bucket is
//    not the default 25M; sizes as K/M/G multiples of 1024 when exact, else bytes), opg.
//  - Overlapped parameter gather (opg, Megatron-LM's overlap_param_gather) needs the distributed optimizer
//    and overlapped reduction (its all-gathers are the bucketed optimizer's): parse_recipe_text refuses it
//    alone, and at_dp() drops it with ovl at dp 1.
//  - parse_recipe_text() takes the tokens in any order ("dopt+sp" is "sp+dopt"), each technique at most
//    once (sp+sp, rc-sel+rc-full, ovl+ovl-4M are refused) and each token in its canonical form (ovl, not
//    ovl-25M), but for the vocabulary-parallel head: `vocab` is accepted beside `vp` (issue 34: `vp` in
//    --recipe was taken for the virtual pipeline of --vp), and recipe_text() keeps writing `vp`, the
//    form job files, HDF5 keys and stored rows hold; so parse_recipe_text(recipe_text(t)) == t for every t, and recipe_text() of
//    what it parses is the canonical text whatever the order given. Any other text is a UserError naming it, on one line (control
//    characters in the text, a line break above all, are quoted escaped).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace itertime {

// Activation recompute: kSelective recomputes each attention core (the scores, softmax and product with V:
// what holds [batch, heads, seq, seq]) in the backward instead of keeping its activations; kFull keeps
// only each decoder layer's input and recomputes the whole layer, its TP communication included.
enum class Recompute { kNone, kSelective, kFull };

inline constexpr int64_t kDefaultGradientBucketBytes = int64_t{25} << 20;

struct TrainingTechniques {
  bool sequence_parallel = false;      // Megatron SP: sequence shards outside the TP regions
  bool vocab_parallel = false;         // vocabulary-parallel embedding, LM head and cross-entropy
  bool distributed_optimizer = false;  // ZeRO-1: optimizer state and update sharded over DP
  Recompute recompute = Recompute::kNone;
  bool overlap_gradient_reduction = false;  // DP all-reduce in buckets started during the backward
  int64_t gradient_bucket_bytes = kDefaultGradientBucketBytes;
  // The distributed optimizer's per-bucket parameter all-gathers started after the update and waited for
  // bucket by bucket in the next step's first forward (Megatron-LM's overlap_param_gather); needs
  // distributed_optimizer and overlap_gradient_reduction.
  bool overlap_parameter_gather = false;

  bool any() const {
    return sequence_parallel || vocab_parallel || distributed_optimizer || recompute != Recompute::kNone ||
           overlap_gradient_reduction || overlap_parameter_gather;
  }
  // Equal when they run the same step (the bucket size only matters with overlap).
  bool operator==(const TrainingTechniques& other) const;
  bool operator!=(const TrainingTechniques& other) const { return !(*this == other); }
};

// "none" | "selective" | "full", and back (UserError naming the text otherwise).
std::string to_string(Recompute recompute);
Recompute parse_recompute(std::string_view text);

// The canonical text above ("" for plain training) and its inverse.
std::string recipe_text(const TrainingTechniques& techniques);
TrainingTechniques parse_recipe_text(std::string_view text);
// For people: recipe_text(), or "plain" when every technique is off.
std::string recipe_label(const TrainingTechniques& techniques);

// What a configuration at data-parallel degree `dp` really runs (see above).
TrainingTechniques at_dp(TrainingTechniques techniques, int dp);

}  // namespace itertime
