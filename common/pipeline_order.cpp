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

std::vector<PipelinePass> interleaved_passes(int pp, int rank, int m, int virtual_stages) {
  const int v = virtual_stages;
  ITERTIME_CHECK(pp >= 1 && rank >= 0 && rank < pp && m >= 1 && v >= 1, "interleaved order needs 0 <= rank < pp, m >= 1, v >= 1");
  if (v == 1) return one_f_one_b_passes(pp, rank, m);
  ITERTIME_CHECK(m % pp == 0, "interleaved order needs m a multiple of pp");
  const int total = m * v;
  const int group = pp * v;
  const int warmup = m == pp ? total : std::min((pp - rank - 1) * 2 + (v - 1) * pp, total);
  const auto pass = [&](PipelinePassKind kind, int k) {
    const int in_group = k % group;
    const int chunk = kind == PipelinePassKind::kForward ? in_group / pp : v - 1 - in_group / pp;
    return PipelinePass{kind, (k / group) * pp + k % pp, chunk};
  };
  std::vector<PipelinePass> order;
  order.reserve(static_cast<std::size_t>(2 * total));
  for (int k = 0; k < warmup; ++k) order.push_back(pass(PipelinePassKind::kForward, k));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(pass(PipelinePassKind::kForward, warmup + k));
    order.push_back(pass(PipelinePassKind::kBackward, k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(pass(PipelinePassKind::kBackward, k));
  return order;
}

}  // namespace itertime
