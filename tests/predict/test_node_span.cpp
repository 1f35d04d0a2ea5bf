// Tests of validate::node_span_text (on predict::place_config): hand-placed layouts on nodes of 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include "validate/node_span.hpp"

namespace itertime::validate {
namespace {

ParallelConfig layout(int dp, int tp, int pp, int cp = 1) {
  ParallelConfig c{dp, tp, pp};
  c.cp = cp;
  return c;
}

TEST(NodeSpan, OneNodeWhenTheLayoutFitsOrNoNodesAreKnown) {
  EXPECT_EQ(node_span_text(layout(2, 2, 1), 0), "1 node");
  EXPECT_EQ(node_span_text(layout(2, 2, 1), 4), "1 node");
  EXPECT_EQ(node_span_text(layout(2, 1, 1), 2), "1 node");  // ranks 0 and 1: node0
}

TEST(NodeSpan, TensorParallelInsideDataParallelAcross) {
  // Ranks 0-1 on node0 (tp group {0,1}), 2-3 on node1; dp groups {0,2}, {1,3} cross.
  EXPECT_EQ(node_span_text(layout(2, 2, 1), 2), "2 nodes: tp in, dp across 2");
  // tp2 pp2: pipeline neighbours 2 ranks apart, on the other node.
  EXPECT_EQ(node_span_text(layout(1, 2, 2), 2), "2 nodes: tp in, pp across 2");
  // dp2 pp2: dp {0,1} on node0; pp neighbours {0,2} across.
  EXPECT_EQ(node_span_text(layout(2, 1, 2), 2), "2 nodes: dp in, pp across 2");
}

TEST(NodeSpan, OneRankPerNodeSpreadsEveryGroup) {
  EXPECT_EQ(node_span_text(layout(4, 1, 1), 1), "4 nodes: dp across 4");
  EXPECT_EQ(node_span_text(layout(4, 1, 1), 2), "2 nodes: dp across 2");
  EXPECT_EQ(node_span_text(layout(2, 2, 1), 1), "4 nodes: tp across 2, dp across 2");
  // With cp the DP reduction group is dp*cp ranks, tp apart: 2 of them on each of 2 nodes.
  EXPECT_EQ(node_span_text(layout(2, 2, 2, 2), 4), "4 nodes: tp in, cp in, dp*cp across 2, pp across 2");
}

}  // namespace
}  // namespace itertime::validate
