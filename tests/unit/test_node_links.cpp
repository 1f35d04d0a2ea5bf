// test_node_links.cpp: the node-pair links' pure parts: the slow-pair and slow-node judgement and its
// report (common/node_link_report.hpp), and /comm/node_links rows through HDF5 (common/node_links_store.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/h5store.hpp"
#include "common/node_link_report.hpp"
#include "common/node_links_store.hpp"
#include "temp_dir.hpp"

namespace itertime {
namespace {

// Gbit/s to the stored GB/s.
double gbit(double gbit_per_s) { return gbit_per_s / 8.0; }

// Every pair of `hosts`, at `latency_us` and `bandwidth_gbit`, except the pairs that include `slow`
// (when given), at `slow_gbit`.
std::vector<LinkFigures> all_pairs(const std::vector<std::string>& hosts, double latency_us, double bandwidth_gbit,
                                   const std::string& slow = "", double slow_gbit = 0.0) {
  std::vector<LinkFigures> links;
  for (std::size_t a = 0; a < hosts.size(); ++a) {
    for (std::size_t b = a + 1; b < hosts.size(); ++b) {
      const bool is_slow = hosts[a] == slow || hosts[b] == slow;
      links.push_back({hosts[a], hosts[b], latency_us, gbit(is_slow ? slow_gbit : bandwidth_gbit)});
    }
  }
  return links;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

TEST(NodeLinkJudgement, NoLinksNoReference) {
  const LinkJudgement judgement = judge_links({});
  EXPECT_TRUE(judgement.flagged.empty());
  EXPECT_TRUE(judgement.slow_node.empty());
}

TEST(NodeLinkJudgement, TwoNodesOnePairIsItsOwnReference) {
  const std::vector<LinkFigures> links{{"node0", "node1", 100.0, gbit(0.2)}};
  const LinkJudgement judgement = judge_links(links);
  EXPECT_DOUBLE_EQ(judgement.reference_bandwidth_GBps, gbit(0.2));
  EXPECT_DOUBLE_EQ(judgement.reference_latency_us, 100.0);
  EXPECT_TRUE(judgement.flagged.empty());
  const std::string report = joined(link_report_lines(links, judgement, "  "));
  EXPECT_NE(report.find("node0-node1"), std::string::npos) << report;
  EXPECT_NE(report.find("one pair: nothing to compare it with"), std::string::npos) << report;
}

TEST(NodeLinkJudgement, HealthyClusterFlagsNothing) {
  std::vector<LinkFigures> links = all_pairs({"n0", "n1", "n2", "n3"}, 100.0, 1.0);
  links[2].bandwidth_GBps = gbit(0.85);  // within 80 %
  links[4].latency_us = 120.0;           // within 125 %
  const LinkJudgement judgement = judge_links(links);
  EXPECT_TRUE(judgement.flagged.empty());
  EXPECT_NE(joined(link_report_lines(links, judgement, "")).find("no slow pair"), std::string::npos);
}

// With 3 nodes a slow node makes 2 of the 3 pairs slow: the median pair is a slow one, yet the slow node
// is still found (the reference is the median node's best link).
TEST(NodeLinkJudgement, SlowNodeOfThreeIsNamed) {
  const std::vector<LinkFigures> links = all_pairs({"node0", "node1", "node2"}, 100.0, 0.98, "node1", 0.2);
  const LinkJudgement judgement = judge_links(links);
  EXPECT_DOUBLE_EQ(judgement.reference_bandwidth_GBps, gbit(0.98));
  ASSERT_EQ(judgement.flagged.size(), 2u);
  EXPECT_EQ(judgement.flagged[0].link, 0u);  // node0-node1
  EXPECT_EQ(judgement.flagged[1].link, 2u);  // node1-node2
  EXPECT_TRUE(judgement.flagged[0].slow_bandwidth);
  EXPECT_FALSE(judgement.flagged[0].slow_latency);
  EXPECT_EQ(judgement.slow_node, "node1");
  const std::string report = joined(link_report_lines(links, judgement, "  "));
  EXPECT_NE(report.find("slow: node1 (its 2 links at 0.20 Gbit/s against a median 0.98)"), std::string::npos) << report;
  EXPECT_EQ(report.find("node0-node2 SLOW"), std::string::npos) << report;
}

TEST(NodeLinkJudgement, SlowNodeOfEightIsNamed) {
  const std::vector<LinkFigures> links = all_pairs({"a", "b", "c", "d", "e", "f", "g", "h"}, 5.0, 100.0, "e", 25.0);
  const LinkJudgement judgement = judge_links(links);
  EXPECT_EQ(judgement.flagged.size(), 7u);
  EXPECT_EQ(judgement.slow_node, "e");
}

TEST(NodeLinkJudgement, OneSlowLinkIsALinkNotANode) {
  std::vector<LinkFigures> links = all_pairs({"node0", "node1", "node2"}, 100.0, 1.0);
  links[1].bandwidth_GBps = gbit(0.5);  // node0-node2
  const LinkJudgement judgement = judge_links(links);
  ASSERT_EQ(judgement.flagged.size(), 1u);
  EXPECT_EQ(judgement.flagged[0].link, 1u);
  EXPECT_TRUE(judgement.slow_node.empty());
  const std::string report = joined(link_report_lines(links, judgement, ""));
  EXPECT_NE(report.find("slow link: node0-node2 (at 0.50 Gbit/s against a median 1.00)"), std::string::npos) << report;
}

TEST(NodeLinkJudgement, SlowLatencyFlagsAndNamesTheNode) {
  std::vector<LinkFigures> links = all_pairs({"n0", "n1", "n2", "n3"}, 100.0, 1.0);
  for (LinkFigures& link : links) {
    if (link.host_a == "n3" || link.host_b == "n3") link.latency_us = 130.0;  // above 125 %
  }
  const LinkJudgement judgement = judge_links(links);
  ASSERT_EQ(judgement.flagged.size(), 3u);
  for (const LinkFlag& flag : judgement.flagged) {
    EXPECT_TRUE(flag.slow_latency);
    EXPECT_FALSE(flag.slow_bandwidth);
  }
  EXPECT_EQ(judgement.slow_node, "n3");
  const std::string report = joined(link_report_lines(links, judgement, ""));
  EXPECT_NE(report.find("slow: n3 (its 3 links at 130 us against a median 100 us)"), std::string::npos) << report;
}

TEST(NodeLinkJudgement, SlowPairsWithNoCommonNodeAreEachNamed) {
  std::vector<LinkFigures> links = all_pairs({"n0", "n1", "n2", "n3"}, 100.0, 1.0);
  links[0].bandwidth_GBps = gbit(0.3);  // n0-n1
  links[5].bandwidth_GBps = gbit(0.3);  // n2-n3
  const LinkJudgement judgement = judge_links(links);
  EXPECT_EQ(judgement.flagged.size(), 2u);
  EXPECT_TRUE(judgement.slow_node.empty());
  const std::string report = joined(link_report_lines(links, judgement, ""));
  EXPECT_NE(report.find("slow link: n0-n1"), std::string::npos) << report;
  EXPECT_NE(report.find("slow link: n2-n3"), std::string::npos) << report;
}

TEST(NodeLinksStore, KeyIgnoresTheOrderOfTheHosts) {
  EXPECT_EQ(store::node_link_key("node1", "node0"), store::node_link_key("node0", "node1"));
  EXPECT_NE(store::node_link_key("node0", "node1"), store::node_link_key("node0", "node2"));
}

TEST(NodeLinksStore, RowsRoundTripThroughHdf5) {
  itertime::testing::TempDir dir;
  const std::string path = dir.file("links.h5");
  store::NodeLinkRow row{};
  h5::set_string(row.host_a, "node0");
  h5::set_string(row.host_b, "node1");
  row.node_a = 0;
  row.node_b = 1;
  row.latency_us = 101.5;
  row.bandwidth_GBps = 0.1225;
  row.samples = 1000;
  h5::set_string(row.measured_utc, "2026-12-03T18:00:00Z");
  {
    h5::Store store = h5::Store::create(path, /*force=*/false, {});
    EXPECT_TRUE(store::read_node_links(store).empty()) << "no table: no rows";
    store::append_node_link(store, row);
    store::NodeLinkRow second = row;
    h5::set_string(second.host_b, "node2");
    second.node_b = 2;
    store::append_node_link(store, second);
  }
  h5::Store store = h5::Store::open(path, /*writable=*/false);
  const std::vector<store::NodeLinkRow> rows = store::read_node_links(store);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(h5::get_string(rows[0].host_a), "node0");
  EXPECT_EQ(h5::get_string(rows[0].host_b), "node1");
  EXPECT_EQ(rows[0].node_a, 0);
  EXPECT_EQ(rows[0].node_b, 1);
  EXPECT_DOUBLE_EQ(rows[0].latency_us, 101.5);
  EXPECT_DOUBLE_EQ(rows[0].bandwidth_GBps, 0.1225);
  EXPECT_EQ(rows[0].samples, 1000);
  EXPECT_EQ(h5::get_string(rows[0].measured_utc), "2026-12-03T18:00:00Z");
  EXPECT_EQ(store::node_link_key(rows[1]), "node0|node2");
  // The table sits beside the sweep's, under /comm, with the documented fields.
  bool listed = false;
  for (const h5::DatasetInfo& info : store.list_datasets()) {
    if (info.path != store::kNodeLinksTable) continue;
    listed = true;
    EXPECT_EQ(info.rows, 2u);
    EXPECT_EQ(info.fields, (std::vector<std::string>{"host_a", "host_b", "node_a", "node_b", "latency_us", "bandwidth_GBps",
                                                     "samples", "measured_utc"}));
  }
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace itertime
