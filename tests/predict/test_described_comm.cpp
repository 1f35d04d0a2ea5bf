// Unit tests of predict/described_comm: NCCL-style collective times from a hardware description alone.
// Hand-derived cases (ring and NVLS all-reduce on one DGX H100 node, the 2-node ring with its latency
// terms, point-to-point inside and across nodes), placement arithmetic, algorithm choice switching with
// size and with nodes, refusals (CPU node, missing NVLink or NICs), monotonicity in bytes, all_gather /
// reduce_scatter symmetry; and a printed comparison with public component measurements (not a fit).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/errors.hpp"
#include "predict/device/described_comm.hpp"

namespace itertime::predict {
namespace {

HardwareSpec spec(const std::string& name) {
  return find_hardware_spec(name, std::string(ITERTIME_SOURCE_DIR) + "/data/hardware");
}

constexpr int64_t kGiB = int64_t(1) << 30;
constexpr int64_t kMiB = int64_t(1) << 20;

TEST(DescribedComm, PlaceGroupArithmetic) {
  // TP group of 8 on 8-GPU nodes: one node.
  EXPECT_EQ(place_group(8, 1, 8).ranks_per_node, 8);
  EXPECT_EQ(place_group(8, 1, 8).nodes(), 1);
  // DP group strided by tp = 8: one member per node.
  EXPECT_EQ(place_group(4, 8, 8).ranks_per_node, 1);
  EXPECT_EQ(place_group(4, 8, 8).nodes(), 4);
  // DP group strided by tp = 2: ranks 0, 2, 4, 6 share node 0.
  EXPECT_EQ(place_group(64, 2, 8).ranks_per_node, 4);
  EXPECT_EQ(place_group(64, 2, 8).nodes(), 16);
  // A group smaller than what fits: all on one node.
  EXPECT_EQ(place_group(2, 4, 8).ranks_per_node, 2);
  // Stride 16 on 8-GPU nodes: every member on its own node.
  EXPECT_EQ(place_group(32, 16, 8).ranks_per_node, 1);
  // Unaligned: at most 8/3 = 2 per node, and 5 is not a multiple of 2: 1.
  EXPECT_EQ(place_group(5, 3, 8).ranks_per_node, 1);
  EXPECT_EQ(place_group(6, 3, 8).ranks_per_node, 2);
  EXPECT_THROW(place_group(0, 1, 8), UserError);
  EXPECT_THROW(place_group(4, 0, 8), UserError);
  EXPECT_EQ((GroupPlacement{16, 8}).nodes(), 2);
}

TEST(DescribedComm, GenerationInference) {
  EXPECT_EQ(infer_nccl_generation(spec("a100-sxm-80gb")), NcclGeneration::kAmpere);
  EXPECT_EQ(infer_nccl_generation(spec("h100-sxm")), NcclGeneration::kHopper);
  EXPECT_EQ(infer_nccl_generation(spec("h200-sxm")), NcclGeneration::kHopper);
  EXPECT_EQ(infer_nccl_generation(spec("b200")), NcclGeneration::kBlackwell);
}

// One DGX H100, ring, Simple. NVLink as NCCL rates it: 450 GB/s x 20.6/25 = 370.8 GB/s; the ring search
// takes the fastest sm90 intra speed (60) and floor(370.8/60) = 6 channels: bus 360 GB/s. all_reduce
// algbw = 360 x 8/14 = 205.714 GB/s; latency = base 8.4 + 14 steps x 3.4 = 56.0 us.
TEST(DescribedComm, RingAllReduceOneNodeByHand) {
  const auto t =
      described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {8, 8}, kGiB, NcclAlgorithm::kRing, NcclProtocol::kSimple);
  ASSERT_TRUE(t);
  const double algbw_gbps = 360.0 * 8.0 / 14.0;
  EXPECT_NEAR(t->time_us, 56.0 + static_cast<double>(kGiB) / (1000.0 * algbw_gbps), 1e-6);
  // Latency alone: at 1 byte the bandwidth term is 1/205714 us.
  const auto tiny =
      described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {8, 8}, 1, NcclAlgorithm::kRing, NcclProtocol::kSimple);
  EXPECT_NEAR(tiny->time_us, 56.0, 1e-4);
  // LL: base 6.6 + 14 x 0.6 = 15.0 us, bandwidth min(llMaxBw 141, 360/2) = 141 GB/s bus.
  const auto ll =
      described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {8, 8}, 8, NcclAlgorithm::kRing, NcclProtocol::kLL);
  EXPECT_NEAR(ll->time_us, 15.0 + 8.0 / (1000.0 * 141.0 * 8.0 / 14.0), 1e-9);
  // LL128: 14.0 + 14 x 1.9 = 40.6 us; bus min(0.92 x 360, 12 channels (after dup) x 36.7) = 331.2.
  const auto ll128 =
      described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {8, 8}, kGiB, NcclAlgorithm::kRing, NcclProtocol::kLL128);
  EXPECT_NEAR(ll128->time_us, 40.6 + static_cast<double>(kGiB) / (1000.0 * 331.2 * 8.0 / 14.0), 1e-6);
}

// NVLS on one DGX H100: 8 channels, each GPU heads one (2x): 9 x speed <= 370.8 -> 40; NVLS bus per
// channel 40 x 0.85 x 7/8 x 2 = 59.5 (below bwInter 60): bus 476 GB/s; algbw 476 x 8/14 = 272; latency 25.
TEST(DescribedComm, NvlsAllReduceOneNodeByHand) {
  const auto t =
      described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {8, 8}, kGiB, NcclAlgorithm::kNvls, NcclProtocol::kSimple);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->time_us, 25.0 + static_cast<double>(kGiB) / (1000.0 * 272.0), 1e-6);
  // all_gather through NVLS: bus per channel 40 x 0.85 x 7/8 x 7/8 = 26.03, no n/(n-1) conversion.
  const auto ag =
      described_comm_us_with(spec("h100-sxm"), Collective::kAllGather, {8, 8}, kGiB, NcclAlgorithm::kNvls, NcclProtocol::kSimple);
  EXPECT_NEAR(ag->time_us, 25.0 + static_cast<double>(kGiB) / (1000.0 * 8 * 40.0 * 0.85 * 0.875 * 0.875), 1e-6);
  // No NVLS on an A100 (no NVLink SHARP), nor when disabled, nor across nodes (that is NVLS+tree).
  EXPECT_FALSE(described_comm_us_with(spec("a100-sxm-80gb"), Collective::kAllReduce, {8, 8}, kGiB, NcclAlgorithm::kNvls,
                                      NcclProtocol::kSimple));
  NcclTuning off;
  off.enable_nvls = false;
  EXPECT_FALSE(described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {8, 8}, kGiB, NcclAlgorithm::kNvls,
                                      NcclProtocol::kSimple, off));
  EXPECT_FALSE(described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {16, 8}, kGiB, NcclAlgorithm::kNvls,
                                      NcclProtocol::kSimple));
  EXPECT_FALSE(described_comm_us_with(spec("h100-sxm"), Collective::kBroadcast, {8, 8}, kGiB, NcclAlgorithm::kNvls,
                                      NcclProtocol::kSimple));
}

// Two DGX H100 nodes, 16 ranks, ring Simple: one channel per NIC (8), per-channel speed the fastest sm90
// inter speed a 50 GB/s NIC carries (48; NVLink carries 8 x 7/8 x 48 = 336 <= 370.8): bus 384 GB/s,
// algbw 384 x 16/30 = 204.8. Latency: 30 steps, 2 across nodes: 8.4 + 28 x max(3.4, 3 x 1.0) + 2 x 14.0
// = 131.6 us, x 1.4 (ring plateau, Simple all_reduce across nodes) = 184.24 us.
TEST(DescribedComm, RingAllReduceTwoNodesByHand) {
  const auto t = described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {16, 8}, kGiB, NcclAlgorithm::kRing,
                                        NcclProtocol::kSimple);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->time_us, 131.6 * 1.4 + static_cast<double>(kGiB) / (1000.0 * 204.8), 1e-6);
  // Below the plateau threshold (bytes / (8 channels x 16 ranks) < 64): no 1.4.
  const auto small = described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {16, 8}, 4096, NcclAlgorithm::kRing,
                                            NcclProtocol::kSimple);
  EXPECT_NEAR(small->time_us, 131.6 + 4096.0 / (1000.0 * 204.8), 1e-6);
  // One rank per node (4 nodes, strided DP group): every step crosses the network, at the tree's NET
  // latency (14.0 Simple), x 1.4 (4096 / (2 channels x 4 ranks) >= 64); 1 NIC -> 1 channel of 48,
  // duplicated into 2 of 24: bus 48.
  const auto strided =
      described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {4, 1}, 4096, NcclAlgorithm::kRing, NcclProtocol::kSimple);
  EXPECT_NEAR(strided->time_us, (8.4 + 6 * 14.0) * 1.4 + 4096.0 / (1000.0 * 48.0 * 4.0 / 6.0), 1e-6);
}

// Tree all_reduce across 2 nodes, Simple: bus min(0.92 x 384, 8 x 41.4) = 331.2, algbw half of it (x the
// size correction, here at 256 MiB: Simple row entry 22 -> 0.9, interpolated at log2(256Mi/64) = 22
// exactly). Latency 8.4 + 2 x ((8-1) x 4.0 + log2(2) x 14.0) = 92.4.
TEST(DescribedComm, TreeAllReduceTwoNodesByHand) {
  const auto t = described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {16, 8}, 256 * kMiB, NcclAlgorithm::kTree,
                                        NcclProtocol::kSimple);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->time_us, 92.4 + static_cast<double>(256 * kMiB) / (1000.0 * 331.2 * 0.5 * 0.9), 1e-6);
  NcclTuning flat;
  flat.tree_size_correction = false;
  const auto u = described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {16, 8}, 256 * kMiB, NcclAlgorithm::kTree,
                                        NcclProtocol::kSimple, flat);
  EXPECT_NEAR(u->time_us, 92.4 + static_cast<double>(256 * kMiB) / (1000.0 * 331.2 * 0.5), 1e-6);
  // No tree inside one node, nor for all_gather.
  EXPECT_FALSE(described_comm_us_with(spec("h100-sxm"), Collective::kAllReduce, {8, 8}, kGiB, NcclAlgorithm::kTree,
                                      NcclProtocol::kSimple));
  EXPECT_FALSE(described_comm_us_with(spec("h100-sxm"), Collective::kAllGather, {16, 8}, kGiB, NcclAlgorithm::kTree,
                                      NcclProtocol::kSimple));
}

TEST(DescribedComm, AlgorithmChoiceSwitchesWithSizeAndNodes) {
  const HardwareSpec h100 = spec("h100-sxm");
  // One node: LL ring for a few bytes, NVLS for large buffers.
  const auto small = described_comm_us(h100, Collective::kAllReduce, {8, 8}, 8);
  const auto large = described_comm_us(h100, Collective::kAllReduce, {8, 8}, kGiB);
  ASSERT_TRUE(small && large);
  EXPECT_EQ(small->algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(small->protocol, NcclProtocol::kLL);
  EXPECT_EQ(large->algorithm, NcclAlgorithm::kNvls);
  // Without NVLS, the large one-node all_reduce is a Simple ring.
  NcclTuning no_nvls;
  no_nvls.enable_nvls = false;
  const auto ring_large = described_comm_us(h100, Collective::kAllReduce, {8, 8}, kGiB, no_nvls);
  EXPECT_EQ(ring_large->algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(ring_large->protocol, NcclProtocol::kSimple);
  // Two nodes: NVLS+tree for the large buffer (bus 8 x min(59.5, 96, 57.7) = 461.6 GB/s).
  const auto two = described_comm_us(h100, Collective::kAllReduce, {16, 8}, kGiB);
  EXPECT_EQ(two->algorithm, NcclAlgorithm::kNvlsTree);
  // Across 16 nodes (one rank each), a mid-size all_reduce goes to the tree (log2 latency), a huge one to
  // the ring (the tree's algbw is ~0.46 of its bus, the ring's 16/30).
  const auto mid = described_comm_us(h100, Collective::kAllReduce, {16, 1}, 64 * 1024);
  const auto huge = described_comm_us(h100, Collective::kAllReduce, {16, 1}, 4 * kGiB);
  EXPECT_EQ(mid->algorithm, NcclAlgorithm::kTree);
  EXPECT_EQ(huge->algorithm, NcclAlgorithm::kRing);
  // A100: never NVLS.
  const auto a100 = described_comm_us(spec("a100-sxm-80gb"), Collective::kAllReduce, {8, 8}, kGiB);
  EXPECT_EQ(a100->algorithm, NcclAlgorithm::kRing);
}

TEST(DescribedComm, RefusesWhatTheDescriptionLacks) {
  const HardwareSpec cpu = spec("cpu-node-local");
  EXPECT_FALSE(described_comm_us(cpu, Collective::kAllReduce, {2, 2}, kMiB));
  EXPECT_FALSE(described_comm_us(cpu, Collective::kSend, {2, 1}, kMiB));
  // Trivial calls cost 0 on any description.
  EXPECT_EQ(described_comm_us(cpu, Collective::kAllReduce, {1, 1}, kMiB)->time_us, 0.0);
  EXPECT_EQ(described_comm_us(spec("h100-sxm"), Collective::kAllReduce, {8, 8}, 0)->time_us, 0.0);
  // A GPU description without NICs: fine inside a node, nullopt across nodes; without NVLink: the reverse.
  HardwareSpec no_nic = spec("h100-sxm");
  no_nic.nics_per_node.reset();
  no_nic.nic_bandwidth_bytes_per_s.reset();
  EXPECT_TRUE(described_comm_us(no_nic, Collective::kAllReduce, {8, 8}, kMiB));
  EXPECT_FALSE(described_comm_us(no_nic, Collective::kAllReduce, {16, 8}, kMiB));
  HardwareSpec no_nvlink = spec("h100-sxm");
  no_nvlink.nvlink_bandwidth_bytes_per_s.reset();
  EXPECT_FALSE(described_comm_us(no_nvlink, Collective::kAllReduce, {8, 8}, kMiB));
  EXPECT_TRUE(described_comm_us(no_nvlink, Collective::kAllReduce, {4, 1}, kMiB));
  // Impossible placements are the caller's mistake.
  EXPECT_THROW(described_comm_us(spec("h100-sxm"), Collective::kAllReduce, {12, 8}, kMiB), UserError);
  EXPECT_THROW(described_comm_us(spec("h100-sxm"), Collective::kAllReduce, {32, 16}, kMiB), UserError);
}

TEST(DescribedComm, MonotoneInBytes) {
  const HardwareSpec specs[] = {spec("h100-sxm"), spec("a100-sxm-80gb"), spec("b200")};
  const GroupPlacement placements[] = {{2, 2}, {8, 8}, {4, 4}, {16, 8}, {8, 1}, {64, 4}, {512, 8}};
  for (const auto& hw : specs) {
    for (Collective coll : all_collectives()) {
      for (const auto& p : placements) {
        double previous = 0;
        for (double b = 1; b < 16.0 * kGiB; b *= 1.07) {
          const auto t = described_comm_us(hw, coll, p, static_cast<int64_t>(b));
          ASSERT_TRUE(t) << hw.name << " " << to_string(coll);
          ASSERT_GE(t->time_us, previous - 1e-9) << hw.name << " " << to_string(coll) << " n=" << p.group_size
                                                 << " ppn=" << p.ranks_per_node << " bytes=" << b << " " << describe(*t);
          previous = t->time_us;
        }
      }
    }
  }
}

TEST(DescribedComm, AllGatherAndReduceScatterAreSymmetric) {
  const HardwareSpec h100 = spec("h100-sxm");
  for (const GroupPlacement p : {GroupPlacement{8, 8}, GroupPlacement{16, 8}, GroupPlacement{4, 1}}) {
    for (int64_t bytes : {int64_t(64), int64_t(1) << 16, kMiB, kGiB}) {
      const auto ag = described_comm_us(h100, Collective::kAllGather, p, bytes);
      const auto rs = described_comm_us(h100, Collective::kReduceScatter, p, bytes);
      ASSERT_TRUE(ag && rs);
      EXPECT_DOUBLE_EQ(ag->time_us, rs->time_us);
      EXPECT_EQ(ag->algorithm, rs->algorithm);
    }
  }
  // And an all_gather costs about half an all_reduce of the same buffer (ring: n-1 vs 2(n-1) steps).
  NcclTuning ring_only;
  ring_only.enable_nvls = false;
  const auto ag = described_comm_us(h100, Collective::kAllGather, {8, 8}, kGiB, ring_only);
  const auto ar = described_comm_us(h100, Collective::kAllReduce, {8, 8}, kGiB, ring_only);
  EXPECT_NEAR(ar->time_us / ag->time_us, 2.0, 0.01);
}

// Point to point, Simple: inside a node one NVLink ring hop (bus 360, latency 8.4 + 3.4); across nodes
// the sender's NIC (48 GB/s, latency 8.4 + 14.0).
TEST(DescribedComm, PointToPointIntraVersusInterNode) {
  const HardwareSpec h100 = spec("h100-sxm");
  const int64_t bytes = 64 * kMiB;
  const auto intra = described_comm_us(h100, Collective::kSend, {2, 2}, bytes);
  const auto inter = described_comm_us(h100, Collective::kSend, {2, 1}, bytes);
  ASSERT_TRUE(intra && inter);
  EXPECT_NEAR(intra->time_us, 11.8 + static_cast<double>(bytes) / (1000.0 * 360.0), 1e-6);
  EXPECT_NEAR(inter->time_us, 22.4 + static_cast<double>(bytes) / (1000.0 * 48.0), 1e-6);
  EXPECT_EQ(described_comm_us(h100, Collective::kSendRecv, {2, 1}, bytes)->time_us, inter->time_us);
  // A tiny send takes the LL protocol: 6.6 + 0.6 us inside a node.
  const auto tiny = described_comm_us(h100, Collective::kSend, {2, 2}, 8);
  EXPECT_EQ(tiny->protocol, NcclProtocol::kLL);
  EXPECT_NEAR(tiny->time_us, 7.2, 1e-3);
}

// The result carries how it was reached as values; describe() renders them only when a report asks.
TEST(DescribedComm, ResultCarriesItsTermsAndDescribesThem) {
  const HardwareSpec h100 = spec("h100-sxm");
  const auto best8 = described_comm_us(h100, Collective::kAllReduce, {8, 8}, kGiB);
  ASSERT_TRUE(best8);
  EXPECT_EQ(best8->bytes, kGiB);
  EXPECT_EQ(best8->placement.group_size, 8);
  EXPECT_EQ(best8->placement.ranks_per_node, 8);
  EXPECT_EQ(best8->generation, NcclGeneration::kHopper);
  EXPECT_NEAR(best8->time_us, best8->latency_us + static_cast<double>(kGiB) / best8->algorithmic_bandwidth_bytes_per_s * 1e6,
              1e-6 * best8->time_us);
  EXPECT_EQ(describe(*best8).rfind("nvls/Simple: ", 0), 0u) << describe(*best8);
  EXPECT_NE(describe(*best8).find("(1 node x 8 ranks, hopper)"), std::string::npos) << describe(*best8);
  // A send is timed as a two-rank group (here inside one node: its group has 8 ranks per node).
  const auto send = described_comm_us(h100, Collective::kSend, {16, 8}, 1 << 20);
  ASSERT_TRUE(send);
  EXPECT_EQ(send->placement.group_size, 2);
  EXPECT_NE(describe(*send).find("(1 node x 2 ranks"), std::string::npos) << describe(*send);
  const auto none = described_comm_us(h100, Collective::kAllReduce, {1, 1}, kGiB);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->time_us, 0.0);
  EXPECT_EQ(describe(*none), "no communication (one rank or no bytes)");
}

// The comparison with public component measurements (a check, not a fit): printed for the report.
TEST(DescribedComm, ComparisonWithMeasuredComponents) {
  const HardwareSpec h100 = spec("h100-sxm");
  NcclTuning ring_only;
  ring_only.enable_nvls = false;
  ring_only.enable_tree = false;
  const auto ring8 = described_comm_us(h100, Collective::kAllReduce, {8, 8}, kGiB, ring_only);
  const auto best8 = described_comm_us(h100, Collective::kAllReduce, {8, 8}, kGiB);
  const auto ring16 = described_comm_us(h100, Collective::kAllReduce, {16, 8}, kGiB, ring_only);
  const auto best16 = described_comm_us(h100, Collective::kAllReduce, {16, 8}, kGiB);
  const auto lat8 = described_comm_us(h100, Collective::kAllReduce, {8, 8}, 8);
  ASSERT_TRUE(ring8 && best8 && ring16 && best16 && lat8);
  std::printf("8x H100, all_reduce 1 GiB, ring only : busbw %.1f GB/s (measured ~370)  %s\n",
              ring8->bus_bandwidth_bytes_per_s / 1e9, describe(*ring8).c_str());
  std::printf("8x H100, all_reduce 1 GiB, best      : busbw %.1f GB/s (measured ~480 NVLS)  %s\n",
              best8->bus_bandwidth_bytes_per_s / 1e9, describe(*best8).c_str());
  std::printf("16x H100 (2 nodes), all_reduce 1 GiB, ring only: busbw %.1f GB/s = %.1f GB/s per NIC (measured ~46-48)  %s\n",
              ring16->bus_bandwidth_bytes_per_s / 1e9, ring16->bus_bandwidth_bytes_per_s / 1e9 / 8, describe(*ring16).c_str());
  std::printf("16x H100 (2 nodes), all_reduce 1 GiB, best     : busbw %.1f GB/s  %s\n", best16->bus_bandwidth_bytes_per_s / 1e9,
              describe(*best16).c_str());
  std::printf("8x H100, all_reduce 8 B: %.2f us (nccl-tests typically ~10-20 us)  %s\n", lat8->time_us, describe(*lat8).c_str());
  for (const char* name : {"a100-sxm-80gb", "h200-sxm", "b200"}) {
    const auto r = described_comm_us(spec(name), Collective::kAllReduce, {8, 8}, kGiB, ring_only);
    const auto b = described_comm_us(spec(name), Collective::kAllReduce, {8, 8}, kGiB);
    const auto x = described_comm_us(spec(name), Collective::kAllReduce, {16, 8}, kGiB);
    std::printf("%s: 8 GPUs ring %.1f GB/s, best %.1f GB/s (%s); 16 GPUs best %.1f GB/s (%s)\n", name,
                r->bus_bandwidth_bytes_per_s / 1e9, b->bus_bandwidth_bytes_per_s / 1e9, to_string(b->algorithm).c_str(),
                x->bus_bandwidth_bytes_per_s / 1e9, to_string(x->algorithm).c_str());
  }
  // Loose bands around the measurements: a broken formula lands far outside them.
  EXPECT_GT(ring8->bus_bandwidth_bytes_per_s, 330e9);
  EXPECT_LT(ring8->bus_bandwidth_bytes_per_s, 400e9);
  EXPECT_GT(best8->bus_bandwidth_bytes_per_s, 430e9);
  EXPECT_LT(best8->bus_bandwidth_bytes_per_s, 520e9);
  EXPECT_GT(ring16->bus_bandwidth_bytes_per_s / 8, 42e9);
  EXPECT_LT(ring16->bus_bandwidth_bytes_per_s / 8, 50e9);
  EXPECT_GT(lat8->time_us, 8.0);
  EXPECT_LT(lat8->time_us, 25.0);
}

}  // namespace
}  // namespace itertime::predict
