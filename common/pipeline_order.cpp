// pipeline_order.cpp: the pass orders of pipeline_order.hpp.
#include "common/pipeline_order.hpp"

#include <algorithm>
#include <cstddef>

#include "common/errors.hpp"

namespace itertime {

PipelineOrder::PipelineOrder(int pp, int rank, int m, int virtual_stages)
    : pp_(pp), v_(virtual_stages), total_(m * virtual_stages), warmup_(0) {
  ITERTIME_CHECK(pp >= 1 && rank >= 0 && rank < pp && m >= 1 && virtual_stages >= 1,
                 "pipeline order needs 0 <= rank < pp, m >= 1, v >= 1");
  if (v_ == 1) {
    warmup_ = std::min(pp - rank - 1, m);
  } else {
    ITERTIME_CHECK(m % pp == 0, "interleaved order needs m a multiple of pp");
    warmup_ = m == pp ? total_ : std::min((pp - rank - 1) * 2 + (v_ - 1) * pp, total_);
  }
}

PipelinePass PipelineOrder::numbered(PipelinePassKind kind, int k) const {
  if (v_ == 1) return PipelinePass{kind, k, 0};
  const int group = pp_ * v_;
  const int in_group = k % group;
  const int chunk = kind == PipelinePassKind::kForward ? in_group / pp_ : v_ - 1 - in_group / pp_;
  return PipelinePass{kind, (k / group) * pp_ + k % pp_, chunk};
}

PipelinePass PipelineOrder::at(int position) const {
  ITERTIME_CHECK(position >= 0 && position < size(), "pipeline order position out of range");
  // Warm-up forwards, then (forward, backward) pairs, then the cool-down backwards.
  const int steady_pairs = total_ - warmup_;
  if (position < warmup_) return numbered(PipelinePassKind::kForward, position);
  const int in_steady = position - warmup_;
  if (in_steady < 2 * steady_pairs) {
    return in_steady % 2 == 0 ? numbered(PipelinePassKind::kForward, warmup_ + in_steady / 2)
                              : numbered(PipelinePassKind::kBackward, in_steady / 2);
  }
  return numbered(PipelinePassKind::kBackward, steady_pairs + (in_steady - 2 * steady_pairs));
}

PipelineCursor::PipelineCursor(int pp, int rank, int m, int virtual_stages) : pp_(pp), v_(virtual_stages), size_(0), warmup_(0) {
  const PipelineOrder order(pp, rank, m, virtual_stages);  // the checks and the warm-up, one rule
  size_ = order.size();
  warmup_ = order.warmup_forwards();
  load();
}

namespace {

// The first `count` passes of the order (all of them when count >= its size).
std::vector<PipelinePass> first_passes(const PipelineOrder& order, int count) {
  const int n = std::min(count, order.size());
  std::vector<PipelinePass> passes;
  passes.reserve(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) passes.push_back(order.at(p));
  return passes;
}

}  // namespace

std::vector<PipelinePass> one_f_one_b_passes(int pp, int stage, int m) {
  ITERTIME_CHECK(pp >= 1 && stage >= 0 && stage < pp && m >= 1, "1F1B order needs 0 <= stage < pp and m >= 1");
  const PipelineOrder order(pp, stage, m, 1);
  return first_passes(order, order.size());
}

std::vector<PipelinePass> interleaved_passes(int pp, int rank, int m, int virtual_stages) {
  const PipelineOrder order(pp, rank, m, virtual_stages);
  return first_passes(order, order.size());
}

std::vector<PipelinePass> interleaved_passes_to_first_period(int pp, int rank, int m, int virtual_stages) {
  const PipelineOrder order(pp, rank, m, virtual_stages);
  // 1F1B's steady state is one pair long: the warm-up and the next two passes. Interleaved: the warm-up
  // and the first min(pp*v, pairs) pairs of the steady state.
  if (virtual_stages == 1) return first_passes(order, order.warmup_forwards() + 2);
  const int steady_pairs = m * virtual_stages - order.warmup_forwards();
  return first_passes(order, order.warmup_forwards() + 2 * std::min(pp * virtual_stages, steady_pairs));
}

}  // namespace itertime
