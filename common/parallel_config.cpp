// parallel_config.cpp: (dp, tp, pp, cp, vp) layouts and their rules, rank layouts (parallel_config.hpp).
#include "common/parallel_config.hpp"

#include <sstream>

#include "common/errors.hpp"

namespace itertime {

std::string ParallelConfig::layout_text() const {
  std::ostringstream out;
  out << "dp" << dp << "-tp" << tp << "-pp" << pp;
  if (extended()) out << "-cp" << cp << "-vp" << vp;
  return out.str();
}

std::string ParallelConfig::to_string() const {
  std::ostringstream out;
  out << layout_text() << " mbs" << micro_batch << " gbs" << global_batch << " seq" << seq_len;
  return out.str();
}

std::string ParallelConfig::tuple_string() const {
  std::string out = "(" + std::to_string(dp) + "," + std::to_string(tp) + "," + std::to_string(pp);
  if (extended()) out += "," + std::to_string(cp) + "," + std::to_string(vp);
  return out + ")";
}

std::vector<std::string> ParallelConfig::violations(const LlamaSpec& model, int world_size) const {
  std::vector<std::string> broken;
  const auto positive = [&](int value, const char* name) {
    if (value <= 0) broken.push_back(std::string(name) + "=" + std::to_string(value) + " must be positive");
    return value > 0;
  };
  const bool ok = positive(dp, "dp") & positive(tp, "tp") & positive(pp, "pp") & positive(micro_batch, "micro_batch") &
                  positive(global_batch, "global_batch") & positive(seq_len, "seq_len") & positive(cp, "cp") & positive(vp, "vp");
  if (!ok) return broken;

  if (world_size > 0 && this->world_size() != world_size) {
    broken.push_back((cp == 1 ? "dp*tp*pp = " + std::to_string(dp) + "*" + std::to_string(tp) + "*" + std::to_string(pp)
                              : "dp*cp*tp*pp = " + std::to_string(dp) + "*" + std::to_string(cp) + "*" + std::to_string(tp) +
                                    "*" + std::to_string(pp)) +
                     " = " + std::to_string(this->world_size()) + " differs from the world size " + std::to_string(world_size));
  }
  if (cp > 1 && seq_len % (2 * cp) != 0) {
    broken.push_back("cp=" + std::to_string(cp) + " needs seq_len divisible by 2*cp = " + std::to_string(2 * cp) +
                     " (each context-parallel rank holds two of 2*cp sequence chunks), got seq_len=" + std::to_string(seq_len));
  }
  if (vp > 1 && pp == 1) {
    broken.push_back("vp=" + std::to_string(vp) + " (interleaved 1F1B) needs a pipeline, but pp is 1; use vp=1");
  }
  if (vp > 1 && pp > 1 && pp * vp > model.num_layers) {
    broken.push_back("pp*vp = " + std::to_string(pp * vp) + " model chunks exceed the " + std::to_string(model.num_layers) +
                     " layers (each chunk needs a layer)");
  }
  if (vp > 1 && global_batch % (dp * micro_batch) == 0 && num_micro_batches() % pp != 0) {
    broken.push_back("vp=" + std::to_string(vp) + " (interleaved 1F1B) needs the " + std::to_string(num_micro_batches()) +
                     " micro-batches to be a multiple of pp=" + std::to_string(pp) + ", as Megatron-LM requires");
  }
  if (model.num_heads % tp != 0) {
    broken.push_back("tp=" + std::to_string(tp) + " does not divide the " + std::to_string(model.num_heads) + " attention heads");
  }
  if (model.num_kv_heads % tp != 0) {
    broken.push_back("tp=" + std::to_string(tp) + " does not divide the " + std::to_string(model.num_kv_heads) + " KV heads");
  }
  if (model.intermediate_size % tp != 0) {
    broken.push_back("tp=" + std::to_string(tp) + " does not divide the FFN size " + std::to_string(model.intermediate_size));
  }
  if (pp > model.num_layers) {
    broken.push_back("pp=" + std::to_string(pp) + " exceeds the " + std::to_string(model.num_layers) + " layers");
  }
  if (global_batch % (dp * micro_batch) != 0) {
    broken.push_back("global_batch=" + std::to_string(global_batch) +
                     " is not divisible by dp*micro_batch = " + std::to_string(dp * micro_batch));
  }
  if (model.max_position_embeddings > 0 && seq_len > model.max_position_embeddings) {
    broken.push_back("seq_len=" + std::to_string(seq_len) +
                     " exceeds max_position_embeddings=" + std::to_string(model.max_position_embeddings));
  }
  return broken;
}

void ParallelConfig::require_valid(const LlamaSpec& model, int world_size) const {
  const auto broken = violations(model, world_size);
  if (broken.empty()) return;
  std::string message = "configuration " + to_string() + " is not legal for model " + model.name + ": ";
  for (std::size_t i = 0; i < broken.size(); ++i) message += (i ? "; " : "") + broken[i];
  throw UserError(message);
}

RankLayout::RankLayout(int dp, int tp, int pp, int cp) : dp_(dp), tp_(tp), pp_(pp), cp_(cp) {
  if (dp <= 0 || tp <= 0 || pp <= 0 || cp <= 0) {
    throw UserError("rank layout dp=" + std::to_string(dp) + " tp=" + std::to_string(tp) + " pp=" + std::to_string(pp) +
                    " cp=" + std::to_string(cp) + ": every degree must be positive");
  }
}

RankCoords RankLayout::coords(int rank) const {
  ITERTIME_CHECK(rank >= 0 && rank < world_size(), "rank " + std::to_string(rank) + " outside the layout");
  RankCoords c;
  c.tp_idx = rank % tp_;
  c.cp_idx = (rank / tp_) % cp_;
  c.dp_idx = (rank / (tp_ * cp_)) % dp_;
  c.pp_idx = rank / (tp_ * cp_ * dp_);
  return c;
}

int RankLayout::rank_of(const RankCoords& c) const {
  ITERTIME_CHECK(c.dp_idx >= 0 && c.dp_idx < dp_ && c.tp_idx >= 0 && c.tp_idx < tp_ && c.pp_idx >= 0 && c.pp_idx < pp_ &&
                     c.cp_idx >= 0 && c.cp_idx < cp_,
                 "coordinates outside the layout");
  return c.pp_idx * (dp_ * cp_ * tp_) + c.dp_idx * (cp_ * tp_) + c.cp_idx * tp_ + c.tp_idx;
}

std::vector<int> RankLayout::tp_group(int rank) const {
  RankCoords c = coords(rank);
  std::vector<int> group;
  for (c.tp_idx = 0; c.tp_idx < tp_; ++c.tp_idx) group.push_back(rank_of(c));
  return group;
}

std::vector<int> RankLayout::cp_group(int rank) const {
  RankCoords c = coords(rank);
  std::vector<int> group;
  for (c.cp_idx = 0; c.cp_idx < cp_; ++c.cp_idx) group.push_back(rank_of(c));
  return group;
}

std::vector<int> RankLayout::dp_group(int rank) const {
  RankCoords c = coords(rank);
  std::vector<int> group;
  for (c.dp_idx = 0; c.dp_idx < dp_; ++c.dp_idx) group.push_back(rank_of(c));
  return group;
}

std::vector<int> RankLayout::pp_group(int rank) const {
  RankCoords c = coords(rank);
  std::vector<int> group;
  for (c.pp_idx = 0; c.pp_idx < pp_; ++c.pp_idx) group.push_back(rank_of(c));
  return group;
}

std::vector<int> RankLayout::dp_cp_group(int rank) const {
  RankCoords c = coords(rank);
  std::vector<int> group;
  for (c.dp_idx = 0; c.dp_idx < dp_; ++c.dp_idx) {
    for (c.cp_idx = 0; c.cp_idx < cp_; ++c.cp_idx) group.push_back(rank_of(c));
  }
  return group;
}

std::vector<StageLayers> stage_layers(int num_layers, int pp) {
  if (pp <= 0 || pp > num_layers) {
    throw UserError("cannot split " + std::to_string(num_layers) + " layers over pp=" + std::to_string(pp) +
                    " stages: pp must be between 1 and the number of layers");
  }
  std::vector<StageLayers> stages(static_cast<std::size_t>(pp));
  const int base = num_layers / pp;
  const int extra = num_layers % pp;
  int next = 0;
  for (int s = 0; s < pp; ++s) {
    StageLayers& stage = stages[static_cast<std::size_t>(s)];
    stage.first_layer = next;
    stage.num_layers = base + (s < extra ? 1 : 0);
    stage.has_embedding = (s == 0);
    stage.has_head = (s == pp - 1);
    next += stage.num_layers;
  }
  return stages;
}

}  // namespace itertime
