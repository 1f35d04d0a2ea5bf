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

namespace {

std::string joined_values(const std::vector<int>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out;
}

// "1..32" when `values` is every integer from its first to its last and has more than 3 of them, else the list.
std::string value_range(const std::vector<int>& values) {
  if (values.size() > 3 && values.back() - values.front() + 1 == static_cast<int>(values.size())) {
    return std::to_string(values.front()) + ".." + std::to_string(values.back());
  }
  return joined_values(values);
}

// The multiples of `step` nearest `value` (below, if positive, and above), e.g. "6 or 8".
std::string nearest_multiples(int value, int step) {
  const int below = value / step * step;
  const int above = below + step;
  return below > 0 ? std::to_string(below) + " or " + std::to_string(above) : std::to_string(above);
}

std::vector<int> divisors(int value) {
  std::vector<int> out;
  for (int d = 1; d <= value; ++d)
    if (value % d == 0) out.push_back(d);
  return out;
}

}  // namespace

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
    std::string rule = (cp == 1 ? "dp*tp*pp = " + std::to_string(dp) + "*" + std::to_string(tp) + "*" + std::to_string(pp)
                                : "dp*cp*tp*pp = " + std::to_string(dp) + "*" + std::to_string(cp) + "*" + std::to_string(tp) +
                                      "*" + std::to_string(pp)) +
                       " = " + std::to_string(this->world_size()) + " differs from the world size " + std::to_string(world_size);
    const int others = cp * tp * pp;
    if (world_size % others == 0) rule += " (dp=" + std::to_string(world_size / others) + " fills it)";
    broken.push_back(rule);
  }
  if (cp > 1 && seq_len % (2 * cp) != 0) {
    std::vector<int> legal_cp;
    for (int c = 1; 2 * c <= seq_len; ++c)
      if (c == 1 || seq_len % (2 * c) == 0) legal_cp.push_back(c);
    broken.push_back("cp=" + std::to_string(cp) + " needs seq_len divisible by 2*cp = " + std::to_string(2 * cp) +
                     " (each context-parallel rank holds two of 2*cp sequence chunks), got seq_len=" + std::to_string(seq_len) +
                     ": legal cp at seq_len " + std::to_string(seq_len) + ": " + joined_values(legal_cp) +
                     "; nearest seq_len for cp=" + std::to_string(cp) + ": " + nearest_multiples(seq_len, 2 * cp));
  }
  if (vp > 1 && pp == 1) {
    broken.push_back("vp=" + std::to_string(vp) + " (interleaved 1F1B) needs a pipeline, but pp is 1; use vp=1");
  }
  if (vp > 1 && pp > 1 && pp <= model.num_layers && pp * vp > model.num_layers) {
    std::vector<int> legal_vp;
    for (int v = 1; pp * v <= model.num_layers; ++v) legal_vp.push_back(v);
    broken.push_back("pp*vp = " + std::to_string(pp * vp) + " model chunks exceed the " + std::to_string(model.num_layers) +
                     " layers (each chunk needs a layer): legal vp at pp=" + std::to_string(pp) + ": " + value_range(legal_vp));
  }
  if (vp > 1 && global_batch % (dp * micro_batch) == 0 && num_micro_batches() % pp != 0) {
    broken.push_back(
        "vp=" + std::to_string(vp) + " (interleaved 1F1B) needs the " + std::to_string(num_micro_batches()) +
        " micro-batches to be a multiple of pp=" + std::to_string(pp) +
        ", as Megatron-LM requires: nearest legal global_batch: " + nearest_multiples(global_batch, dp * micro_batch * pp));
  }
  // tp must divide the heads, the KV heads and the FFN size: one phrase naming those it does not, and the
  // degrees that divide all three.
  std::vector<std::string> undivided;
  if (model.num_heads % tp != 0) undivided.push_back("the " + std::to_string(model.num_heads) + " attention heads");
  if (model.num_kv_heads % tp != 0) undivided.push_back("the " + std::to_string(model.num_kv_heads) + " KV heads");
  if (model.intermediate_size % tp != 0) undivided.push_back("the FFN size " + std::to_string(model.intermediate_size));
  if (!undivided.empty()) {
    std::string rule = "tp=" + std::to_string(tp) + " must divide ";
    for (std::size_t i = 0; i < undivided.size(); ++i) {
      rule += (i == 0 ? "" : i + 1 == undivided.size() ? " and " : ", ") + undivided[i];
    }
    broken.push_back(rule + ": legal tp: " + joined_values(model.legal_tp_degrees()));
  }
  if (pp > model.num_layers) {
    broken.push_back("pp=" + std::to_string(pp) + " exceeds the " + std::to_string(model.num_layers) +
                     " layers: legal pp: " + value_range(model.legal_pp_degrees()));
  }
  if (global_batch % (dp * micro_batch) != 0) {
    std::string rule = "global_batch=" + std::to_string(global_batch) +
                       " is not divisible by dp*micro_batch = " + std::to_string(dp * micro_batch) +
                       ": nearest legal global_batch: " + nearest_multiples(global_batch, dp * micro_batch);
    if (global_batch % dp == 0) {
      rule +=
          ", or a micro_batch dividing " + std::to_string(global_batch / dp) + ": " + joined_values(divisors(global_batch / dp));
    }
    broken.push_back(rule);
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

std::vector<int> RankLayout::group_along(int rank, int RankCoords::*index, int size) const {
  RankCoords c = coords(rank);
  std::vector<int> group;
  for (c.*index = 0; c.*index < size; ++(c.*index)) group.push_back(rank_of(c));
  return group;
}

std::vector<int> RankLayout::tp_group(int rank) const { return group_along(rank, &RankCoords::tp_idx, tp_); }
std::vector<int> RankLayout::cp_group(int rank) const { return group_along(rank, &RankCoords::cp_idx, cp_); }
std::vector<int> RankLayout::dp_group(int rank) const { return group_along(rank, &RankCoords::dp_idx, dp_); }
std::vector<int> RankLayout::pp_group(int rank) const { return group_along(rank, &RankCoords::pp_idx, pp_); }

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
