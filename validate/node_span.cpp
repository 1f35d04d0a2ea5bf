// node_span.cpp: node_span_text (node_span.hpp).
#include "validate/node_span.hpp"

#include "predict/device/described_comm.hpp"

namespace itertime::validate {

std::string node_span_text(const ParallelConfig& config, int64_t ranks_per_node) {
  const int64_t world = config.world_size();
  if (ranks_per_node <= 0 || ranks_per_node >= world) return "1 node";
  const int64_t nodes = (world + ranks_per_node - 1) / ranks_per_node;
  std::string text = std::to_string(nodes) + " nodes:";
  const struct {
    const char* name;
    int64_t degree, stride;
  } groups[] = {{"tp", config.tp, 1},
                {"cp", config.cp, config.tp},
                {"dp", config.dp, int64_t{config.tp} * config.cp},
                {"pp", config.pp, int64_t{config.tp} * config.cp * config.dp}};
  bool first = true;
  for (const auto& group : groups) {
    if (group.degree <= 1) continue;
    const int64_t spanned = predict::place_group(group.degree, group.stride, ranks_per_node).nodes();
    text += std::string(first ? " " : ", ") + group.name + (spanned == 1 ? " in" : " across " + std::to_string(spanned));
    first = false;
  }
  return text;
}

}  // namespace itertime::validate
