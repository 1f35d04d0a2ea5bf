// node_span.cpp: node_span_text (node_span.hpp).
#include "validate/node_span.hpp"

#include "predict/node_placement.hpp"

namespace itertime::validate {

std::string node_span_text(const ParallelConfig& config, int64_t ranks_per_node) {
  const predict::ConfigPlacement placed = predict::place_config(config, ranks_per_node);
  if (placed.nodes <= 1) return "1 node";
  std::string text = std::to_string(placed.nodes) + " nodes:";
  bool first = true;
  for (const predict::NamedPlacement& group : placed.groups) {
    const int64_t spanned = group.placement.nodes();
    text += std::string(first ? " " : ", ") + group.name + (spanned == 1 ? " in" : " across " + std::to_string(spanned));
    first = false;
  }
  return text;
}

}  // namespace itertime::validate
