// node_link_report.hpp: the judgement of measured node-pair links (/comm/node_links): which pairs are
// slow, and the one node they share when one does; and the report `calibrate comm` and `inspect` print.
// Invariants (pure; no I/O):
//  - The reference of a figure is the median over nodes of each node's best link (its highest bandwidth,
//    its lowest latency), not the median over pairs: a slow node makes most pairs slow when there are
//    few nodes (with 3 nodes, 2 of the 3 pairs), yet every healthy node still has one healthy link.
//  - A pair is flagged when its bandwidth is below kSlowBandwidthFraction of the reference bandwidth, or
//    its latency above kSlowLatencyFactor times the reference latency. With 2 nodes the one pair is its
//    own reference: nothing is flagged.
//  - slow_node names the node when every flagged pair includes it and no other node is in all of them
//    (one flagged pair has two such nodes: it is a slow link, not a node); empty otherwise.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace itertime {

inline constexpr double kSlowBandwidthFraction = 0.80;
inline constexpr double kSlowLatencyFactor = 1.25;

struct LinkFigures {
  std::string host_a;
  std::string host_b;
  double latency_us = 0.0;
  double bandwidth_GBps = 0.0;  // 1e9 bytes per second
};

struct LinkFlag {
  std::size_t link = 0;  // index into the judged links
  bool slow_bandwidth = false;
  bool slow_latency = false;
};

struct LinkJudgement {
  double reference_latency_us = 0.0;
  double reference_bandwidth_GBps = 0.0;
  std::vector<LinkFlag> flagged;  // in the links' order
  std::string slow_node;          // see the invariants
};

LinkJudgement judge_links(const std::vector<LinkFigures>& links);

// The report: a table `node pair  latency(us)  bandwidth(Gbit/s)` with a mark on each flagged pair, the
// reference line, and the verdict (`slow: node1 (its 2 links at 0.20 Gbit/s against a median 0.98)`, a
// `slow link:` line per flagged pair when no one node explains them, or that no pair is slow). Each line
// without its newline; `prefix` starts every line.
std::vector<std::string> link_report_lines(const std::vector<LinkFigures>& links, const LinkJudgement& judgement,
                                           const std::string& prefix);

}  // namespace itertime
