// parallel_config.hpp: a (DP, TP, PP, CP, VP, micro-batch, global batch, sequence length) training
// layout, the rank layout of docs/method.md (DESIGN.md §5) and the split of layers over pipeline stages.
// Invariants:
//  - cp (context parallelism: the sequence split over cp ranks) and vp (virtual pipeline stages: model
//    chunks per pipeline rank, Megatron-LM's interleaved 1F1B) are 1 unless a layout asks for them; a
//    layout with both 1 prints as before ("(2,1,2)", "dp2-tp1-pp2"), any other with all five degrees
//    ("(2,1,2,1,2)", "dp2-tp1-pp2-cp1-vp2"), so (DP,TP,PP) jobs keep their keys and tables;
//  - rank = pp_idx * (dp * cp * tp) + dp_idx * (cp * tp) + cp_idx * tp + tp_idx: TP fastest, then CP,
//    then DP, then PP (Megatron-LM's order tp-cp-dp-pp), so TP groups are consecutive ranks; with cp 1
//    this is pp_idx * (dp * tp) + dp_idx * tp + tp_idx, the (DP,TP,PP) order of before;
//  - RankLayout's groups: tp, cp, dp and pp vary one index; dp_cp (Megatron's data-parallel group with
//    context parallelism, over which gradients are reduced) varies dp_idx and cp_idx together, its
//    dp*cp members in rank order (group rank dp_idx * cp + cp_idx);
//  - violations() names every rule broken, not only the first, each with what would be legal near it
//    (the legal tp of the model, the legal pp, cp at this sequence, vp at this pp, the nearest legal
//    global batch and micro-batches); tp's three divisibility rules are one phrase; require_valid()
//    throws them all in one UserError;
//  - stage_layers() gives each stage floor(L/pp) layers and the first L % pp stages one more.
#pragma once

#include <string>
#include <vector>

#include "common/model_spec.hpp"

namespace itertime {

struct ParallelConfig {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int micro_batch = 1;
  int global_batch = 1;
  int seq_len = 128;
  int cp = 1;  // context-parallel ranks the sequence is split over
  int vp = 1;  // virtual pipeline stages (model chunks) per pipeline rank: 1 non-interleaved, > 1 interleaved 1F1B

  int world_size() const { return dp * cp * tp * pp; }
  // The ranks gradients are reduced over: the DP group with context parallelism (Megatron-LM's), dp * cp.
  int reduction_ranks() const { return dp * cp; }
  bool extended() const { return cp != 1 || vp != 1; }  // a (DP,TP,PP,CP,VP) layout rather than (DP,TP,PP)
  // m = global_batch / (dp * micro_batch); valid only for a valid config.
  int num_micro_batches() const { return global_batch / (dp * micro_batch); }
  std::string layout_text() const;   // "dp2-tp1-pp2", or "dp2-tp1-pp2-cp1-vp2" when extended()
  std::string to_string() const;     // layout_text() + " mbs1 gbs8 seq128"
  std::string tuple_string() const;  // "(2,1,2)", or "(2,1,2,1,2)" (DP,TP,PP,CP,VP) when extended()

  // Every rule broken, each as one phrase. world_size <= 0 skips the world check.
  std::vector<std::string> violations(const LlamaSpec& model, int world_size) const;
  void require_valid(const LlamaSpec& model, int world_size) const;
};

struct RankCoords {
  int dp_idx = 0;
  int tp_idx = 0;
  int pp_idx = 0;
  int cp_idx = 0;
  bool operator==(const RankCoords& other) const {
    return dp_idx == other.dp_idx && tp_idx == other.tp_idx && pp_idx == other.pp_idx && cp_idx == other.cp_idx;
  }
};

class RankLayout {
 public:
  RankLayout(int dp, int tp, int pp, int cp = 1);
  int dp() const { return dp_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int cp() const { return cp_; }
  int world_size() const { return dp_ * cp_ * tp_ * pp_; }
  RankCoords coords(int rank) const;
  int rank_of(const RankCoords& coords) const;
  // The ranks of `rank`'s groups, in group-rank order (ascending index along that dimension).
  std::vector<int> tp_group(int rank) const;
  std::vector<int> cp_group(int rank) const;
  std::vector<int> dp_group(int rank) const;  // the dp ranks with rank's cp_idx (and tp_idx, pp_idx)
  std::vector<int> pp_group(int rank) const;
  // The dp*cp ranks with rank's tp_idx and pp_idx, in rank order (dp_idx major, cp_idx minor).
  std::vector<int> dp_cp_group(int rank) const;

 private:
  // The ranks that share every coordinate of `rank` but `index`, which runs over [0, size).
  std::vector<int> group_along(int rank, int RankCoords::*index, int size) const;
  int dp_, tp_, pp_, cp_;
};

struct StageLayers {
  int first_layer = 0;  // index of the stage's first decoder layer
  int num_layers = 0;
  bool has_embedding = false;  // first stage
  bool has_head = false;       // last stage: final norm, LM head, loss
};

std::vector<StageLayers> stage_layers(int num_layers, int pp);

}  // namespace itertime
