// pipeline_order.cpp: the pass orders of pipeline_order.hpp.
#include "common/pipeline_order.hpp"

#include <algorithm>
#include <cstddef>

#include "common/errors.hpp"

namespace itertime {

std::vector<PipelinePass> one_f_one_b_passes(int pp, int stage, int m) {
  ITERTIME_CHECK(pp >= 1 && stage >= 0 && stage < pp && m >= 1, "1F1B order needs 0 <= stage < pp and m >= 1");
  const int warmup = std::min(pp - stage - 1, m);
  const int remaining = m - warmup;
  std::vector<PipelinePass> order;
  order.reserve(static_cast<std::size_t>(2 * m));
  int next_forward = 0;
  int next_backward = 0;
  for (int i = 0; i < warmup; ++i) order.push_back({PipelinePassKind::kForward, next_forward++, 0});
  for (int i = 0; i < remaining; ++i) {
    order.push_back({PipelinePassKind::kForward, next_forward++, 0});
    order.push_back({PipelinePassKind::kBackward, next_backward++, 0});
  }
  for (int i = 0; i < warmup; ++i) order.push_back({PipelinePassKind::kBackward, next_backward++, 0});
  return order;
}

namespace {

// The interleaved order (v > 1), stopped after the warm-up and `steady_pairs` (forward, backward) pairs
// of the steady state when `whole` is false.
std::vector<PipelinePass> interleaved_order(int pp, int rank, int m, int v, bool whole) {
  ITERTIME_CHECK(m % pp == 0, "interleaved order needs m a multiple of pp");
  const int total = m * v;
  const int group = pp * v;
  const int warmup = m == pp ? total : std::min((pp - rank - 1) * 2 + (v - 1) * pp, total);
  const int steady_pairs = whole ? total - warmup : std::min(total - warmup, group);
  const auto pass = [&](PipelinePassKind kind, int k) {
    const int in_group = k % group;
    const int chunk = kind == PipelinePassKind::kForward ? in_group / pp : v - 1 - in_group / pp;
    return PipelinePass{kind, (k / group) * pp + k % pp, chunk};
  };
  std::vector<PipelinePass> order;
  order.reserve(static_cast<std::size_t>(whole ? 2 * total : warmup + 2 * steady_pairs));
  for (int k = 0; k < warmup; ++k) order.push_back(pass(PipelinePassKind::kForward, k));
  for (int k = 0; k < steady_pairs; ++k) {
    order.push_back(pass(PipelinePassKind::kForward, warmup + k));
    order.push_back(pass(PipelinePassKind::kBackward, k));
  }
  if (whole) {
    for (int k = total - warmup; k < total; ++k) order.push_back(pass(PipelinePassKind::kBackward, k));
  }
  return order;
}

void check_interleaved(int pp, int rank, int m, int v) {
  ITERTIME_CHECK(pp >= 1 && rank >= 0 && rank < pp && m >= 1 && v >= 1, "interleaved order needs 0 <= rank < pp, m >= 1, v >= 1");
}

}  // namespace

std::vector<PipelinePass> interleaved_passes(int pp, int rank, int m, int virtual_stages) {
  check_interleaved(pp, rank, m, virtual_stages);
  if (virtual_stages == 1) return one_f_one_b_passes(pp, rank, m);
  return interleaved_order(pp, rank, m, virtual_stages, /*whole=*/true);
}

std::vector<PipelinePass> interleaved_passes_to_first_period(int pp, int rank, int m, int virtual_stages) {
  check_interleaved(pp, rank, m, virtual_stages);
  if (virtual_stages == 1) {
    // 1F1B's steady state is one pair long: warm-up plus one (forward, backward) pair.
    std::vector<PipelinePass> order = one_f_one_b_passes(pp, rank, m);
    const std::size_t warmup = static_cast<std::size_t>(std::min(pp - rank - 1, m));
    order.resize(std::min(order.size(), warmup + 2));
    return order;
  }
  return interleaved_order(pp, rank, m, virtual_stages, /*whole=*/false);
}

}  // namespace itertime
