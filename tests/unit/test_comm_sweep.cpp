// Unit tests of calibrate/comm_sweep: the size grammar (parse_bytes / format_bytes), the size ladder,
// the rank layouts of groups, the default group sizes and the point list (validation, order, unique
// keys, P2P only in pairs, no duplicate strided layout for the whole world, points below one element
// per rank dropped), with point totals counted by hand; and the buffers of a block's points
// (commbench/point_buffers): the points of a block share one page-aligned pair allocated once, in both timing
// modes, driven by a fake allocator that returns deliberately misaligned memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "commbench/comm_sweep.hpp"
#include "commbench/point_buffers.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {
namespace {

using Groups = std::vector<std::vector<int>>;

template <typename Body>
std::string user_error_of(Body&& body) {
  try {
    body();
  } catch (const UserError& error) {
    return error.what();
  }
  return "(no UserError)";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CommSweep, ParseBytes) {
  EXPECT_EQ(parse_bytes("8"), 8u);
  EXPECT_EQ(parse_bytes("0"), 0u);
  EXPECT_EQ(parse_bytes("64K"), 65536u);
  EXPECT_EQ(parse_bytes("64k"), 65536u);
  EXPECT_EQ(parse_bytes("128M"), 128u << 20);
  EXPECT_EQ(parse_bytes("1G"), std::size_t{1} << 30);
  EXPECT_EQ(parse_bytes("4g"), std::size_t{4} << 30);
  EXPECT_EQ(parse_bytes("1KB"), 1024u);
  EXPECT_EQ(parse_bytes("2mb"), 2u << 20);
  EXPECT_EQ(parse_bytes("8B"), 8u);
  EXPECT_EQ(parse_bytes("1000"), 1000u);
}

TEST(CommSweep, ParseBytesRefusesNamingTheText) {
  for (const char* bad : {"", "12Q", "-1", "1.5M", "K", "B", "KB", "1 K", " 8", "8KK", "0x10", "1e6", "9999999999999"}) {
    const std::string message = user_error_of([&] { parse_bytes(bad); });
    EXPECT_TRUE(contains(message, "'" + std::string(bad) + "'")) << "'" << bad << "': " << message;
  }
}

TEST(CommSweep, FormatBytes) {
  EXPECT_EQ(format_bytes(8), "8");
  EXPECT_EQ(format_bytes(0), "0");
  EXPECT_EQ(format_bytes(1000), "1000");
  EXPECT_EQ(format_bytes(1024), "1K");
  EXPECT_EQ(format_bytes(1536), "1536");
  EXPECT_EQ(format_bytes(65536), "64K");
  EXPECT_EQ(format_bytes(64u << 20), "64M");
  EXPECT_EQ(format_bytes((1u << 20) + 1024), "1025K");
  EXPECT_EQ(format_bytes(std::size_t{3} << 30), "3G");
  // format_bytes and parse_bytes are inverse on what format_bytes prints.
  for (std::size_t b :
       {std::size_t{1}, std::size_t{7}, std::size_t{4096}, std::size_t{3} << 20, std::size_t{5} << 30, std::size_t{1536}}) {
    EXPECT_EQ(parse_bytes(format_bytes(b)), b) << b;
  }
}

TEST(CommSweep, MessageSizesAreInclusiveGeometricLadders) {
  EXPECT_EQ(message_sizes(8, 65536, 8), (std::vector<std::size_t>{8, 64, 512, 4096, 32768}));
  EXPECT_EQ(message_sizes(8, 32768, 8), (std::vector<std::size_t>{8, 64, 512, 4096, 32768}));  // max included
  EXPECT_EQ(message_sizes(1, 16, 2), (std::vector<std::size_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(message_sizes(1, 15, 2), (std::vector<std::size_t>{1, 2, 4, 8}));
  EXPECT_EQ(message_sizes(8, 1024, 4), (std::vector<std::size_t>{8, 32, 128, 512}));
  EXPECT_EQ(message_sizes(4, 1024, 4), (std::vector<std::size_t>{4, 16, 64, 256, 1024}));
  EXPECT_EQ(message_sizes(100, 100, 2), (std::vector<std::size_t>{100}));
  EXPECT_EQ(message_sizes(8, 15, 2), (std::vector<std::size_t>{8}));
  // The defaults of `itertime calibrate comm`: 8 .. 16M by 4: 2^3, 2^5, ..., 2^23 (11 sizes).
  const auto defaults = message_sizes(8, 16u << 20, 4);
  ASSERT_EQ(defaults.size(), 11u);
  EXPECT_EQ(defaults.front(), 8u);
  EXPECT_EQ(defaults.back(), 8u << 20);
  // Non-integer factors give rounded, strictly increasing sizes.
  const auto fine = message_sizes(10, 100, 1.5);
  EXPECT_EQ(fine, (std::vector<std::size_t>{10, 15, 23, 34, 51, 76}));
}

TEST(CommSweep, MessageSizesRefuseInvalidLadders) {
  EXPECT_TRUE(contains(user_error_of([] { message_sizes(1024, 8, 2); }), "--min-bytes 1K exceeds --max-bytes 8"));
  EXPECT_TRUE(contains(user_error_of([] { message_sizes(8, 1024, 1.0); }), "--step-factor"));
  EXPECT_TRUE(contains(user_error_of([] { message_sizes(8, 1024, 0.5); }), "--step-factor"));
  EXPECT_TRUE(contains(user_error_of([] { message_sizes(8, 1024, -2); }), "--step-factor"));
  EXPECT_TRUE(contains(user_error_of([] { message_sizes(0, 1024, 2); }), "--min-bytes"));
}

TEST(CommSweep, LayoutGroupsOfEightRanks) {
  EXPECT_EQ(layout_groups(8, 2, GroupLayout::kConsecutive), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(layout_groups(8, 2, GroupLayout::kStrided), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(layout_groups(8, 4, GroupLayout::kConsecutive), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(layout_groups(8, 4, GroupLayout::kStrided), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(layout_groups(8, 8, GroupLayout::kConsecutive), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(layout_groups(8, 8, GroupLayout::kStrided), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(layout_groups(4, 2, GroupLayout::kStrided), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(layout_groups(6, 3, GroupLayout::kStrided), (Groups{{0, 2, 4}, {1, 3, 5}}));
}

TEST(CommSweep, LayoutGroupsPartitionTheWorld) {
  for (int world : {2, 4, 6, 8, 12, 16}) {
    for (int g = 1; g <= world; ++g) {
      if (world % g) continue;
      for (GroupLayout layout : {GroupLayout::kConsecutive, GroupLayout::kStrided}) {
        const Groups groups = layout_groups(world, g, layout);
        ASSERT_EQ(groups.size(), static_cast<std::size_t>(world / g));
        std::vector<int> seen;
        for (const auto& group : groups) {
          ASSERT_EQ(group.size(), static_cast<std::size_t>(g));
          EXPECT_TRUE(std::is_sorted(group.begin(), group.end()));
          seen.insert(seen.end(), group.begin(), group.end());
        }
        std::sort(seen.begin(), seen.end());
        std::vector<int> all(static_cast<std::size_t>(world));
        for (int r = 0; r < world; ++r) all[static_cast<std::size_t>(r)] = r;
        EXPECT_EQ(seen, all) << world << " " << g << " " << to_string(layout);
        // consecutive: neighbours differ by 1; strided: by world / g.
        const int step = layout == GroupLayout::kConsecutive ? 1 : world / g;
        for (const auto& group : groups) {
          for (std::size_t j = 1; j < group.size(); ++j) EXPECT_EQ(group[j] - group[j - 1], step);
        }
      }
    }
  }
  EXPECT_THROW(layout_groups(8, 3, GroupLayout::kConsecutive), InternalError);
}

TEST(CommSweep, NamesParseAndRefuse) {
  EXPECT_EQ(parse_group_layout("consecutive"), GroupLayout::kConsecutive);
  EXPECT_EQ(parse_group_layout("strided"), GroupLayout::kStrided);
  EXPECT_EQ(to_string(GroupLayout::kStrided), "strided");
  EXPECT_TRUE(contains(user_error_of([] { parse_group_layout("ring"); }), "'ring'"));
  EXPECT_EQ(parse_timing_mode("latency"), TimingMode::kLatency);
  EXPECT_EQ(parse_timing_mode("pipelined"), TimingMode::kPipelined);
  EXPECT_EQ(to_string(TimingMode::kPipelined), "pipelined");
  EXPECT_TRUE(contains(user_error_of([] { parse_timing_mode("busbw"); }), "'busbw'"));
}

TEST(CommSweep, DefaultGroupSizes) {
  EXPECT_EQ(default_group_sizes(2), (std::vector<int>{2}));
  EXPECT_EQ(default_group_sizes(4), (std::vector<int>{2, 4}));
  EXPECT_EQ(default_group_sizes(6), (std::vector<int>{2, 6}));
  EXPECT_EQ(default_group_sizes(8), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(default_group_sizes(12), (std::vector<int>{2, 4, 12}));
  EXPECT_EQ(default_group_sizes(3), (std::vector<int>{3}));
  EXPECT_EQ(default_group_sizes(1), (std::vector<int>{}));
}

SweepOptions small_sweep() {
  SweepOptions options;
  options.min_bytes = 8;
  options.max_bytes = 65536;
  options.step_factor = 8;
  return options;
}

TEST(CommSweep, PointTotalAtTwoRanksCountedByHand) {
  // 5 sizes (8 .. 32K by 8) x 7 collectives x 4 dtypes, one group size (2), consecutive only (the
  // strided layout of the whole world is the same group); even all_gather of fp32 at 8 bytes has one
  // element per rank: 140 points. This is the sweep the e2e test runs.
  const auto points = build_points(small_sweep(), 2);
  EXPECT_EQ(points.size(), 140u);
  for (const auto& p : points) {
    EXPECT_EQ(p.group_size, 2);
    EXPECT_EQ(p.layout, GroupLayout::kConsecutive);
    EXPECT_EQ(p.mode, TimingMode::kLatency);
  }
}

TEST(CommSweep, PointTotalAtFourRanksWithDefaultsCountedByHand) {
  // 11 sizes (8 .. 8M by 4), 4 dtypes.
  // g=2: consecutive and strided, 7 collectives: 2 * 7 * 4 * 11 = 616.
  // g=4: consecutive only, no P2P: 5 * 4 * 11 = 220, less fp32 all_gather, reduce_scatter and
  //      all_to_all at 8 bytes (8 / (4 * 4) = 0 elements per rank): 217.
  const auto points = build_points(SweepOptions{}, 4);
  EXPECT_EQ(points.size(), 616u + 217u);
  std::map<std::tuple<int, std::string>, int> per_block;
  for (const auto& p : points) ++per_block[{p.group_size, to_string(p.layout)}];
  EXPECT_EQ((per_block[{2, "consecutive"}]), 308);
  EXPECT_EQ((per_block[{2, "strided"}]), 308);
  EXPECT_EQ((per_block[{4, "consecutive"}]), 217);
  EXPECT_EQ(per_block.count({4, "strided"}), 0u);
}

TEST(CommSweep, PointsHaveUniqueKeysAndConsistentSizes) {
  for (int world : {2, 4, 6, 8}) {
    const auto points = build_points(SweepOptions{}, world);
    std::set<std::string> keys;
    for (const auto& p : points) {
      EXPECT_TRUE(keys.insert(p.key()).second) << "duplicate key " << p.key();
      EXPECT_GT(p.count, 0u) << p.key();
      EXPECT_EQ(p.bytes, labelled_bytes(p.collective, p.count, p.group_size, p.dtype)) << p.key();
      EXPECT_EQ(p.count, element_count(p.collective, p.bytes, p.group_size, p.dtype)) << p.key();
      if (is_point_to_point(p.collective)) {
        EXPECT_EQ(p.group_size, 2) << p.key();
      }
      if (p.group_size == world) {
        EXPECT_EQ(p.layout, GroupLayout::kConsecutive) << p.key();
      }
      EXPECT_EQ(world % p.group_size, 0);
    }
  }
}

TEST(CommSweep, KeyFormat) {
  PointSpec p{Collective::kAllReduce, DType::kFloat16, 4, GroupLayout::kConsecutive, 1048576, 524288, TimingMode::kLatency};
  EXPECT_EQ(p.key(), "all_reduce/fp16/g4/consecutive/latency/1048576");
  PointSpec q{Collective::kSendRecv, DType::kInt8, 2, GroupLayout::kStrided, 8, 8, TimingMode::kPipelined};
  EXPECT_EQ(q.key(), "sendrecv/int8/g2/strided/pipelined/8");
}

TEST(CommSweep, PointsAreOrderedByGroupLayoutCollectiveDtypeSize) {
  SweepOptions options = small_sweep();
  options.dtypes = {DType::kBFloat16, DType::kFloat32};  // order of the options, not of the enum
  options.collectives = {Collective::kSendRecv, Collective::kAllReduce};
  options.layouts = {GroupLayout::kStrided, GroupLayout::kConsecutive};
  options.group_sizes = {4, 2};
  const auto points = build_points(options, 8);
  auto position = [&](const PointSpec& p) {
    const auto g = std::find(options.group_sizes.begin(), options.group_sizes.end(), p.group_size) - options.group_sizes.begin();
    const auto l = std::find(options.layouts.begin(), options.layouts.end(), p.layout) - options.layouts.begin();
    const auto c = std::find(options.collectives.begin(), options.collectives.end(), p.collective) - options.collectives.begin();
    const auto d = std::find(options.dtypes.begin(), options.dtypes.end(), p.dtype) - options.dtypes.begin();
    return std::make_tuple(g, l, c, d, p.bytes);
  };
  ASSERT_FALSE(points.empty());
  for (std::size_t i = 1; i < points.size(); ++i) {
    EXPECT_LT(position(points[i - 1]), position(points[i])) << points[i - 1].key() << " before " << points[i].key();
  }
  EXPECT_EQ(points.front().key(), "all_reduce/bf16/g4/strided/latency/8");
  EXPECT_EQ(points.back().key(), "all_reduce/fp32/g2/consecutive/latency/32768");
  // g4: 2 layouts x all_reduce x 2 dtypes x 5 sizes; g2: 2 layouts x 2 collectives x 2 dtypes x 5 sizes.
  EXPECT_EQ(points.size(), 20u + 40u);
}

TEST(CommSweep, PointToPointOnlyInPairs) {
  SweepOptions options = small_sweep();
  options.collectives = {Collective::kSend, Collective::kSendRecv};
  options.group_sizes = {4};
  EXPECT_TRUE(build_points(options, 4).empty());
  options.group_sizes = {2, 4};
  const auto points = build_points(options, 4);
  EXPECT_EQ(points.size(), 2u /*layouts*/ * 2 * 4 * 5);
  for (const auto& p : points) EXPECT_EQ(p.group_size, 2);
}

TEST(CommSweep, StridedWholeWorldOnlyWhenAskedAlone) {
  SweepOptions options = small_sweep();
  options.collectives = {Collective::kAllReduce};
  options.dtypes = {DType::kFloat32};
  options.group_sizes = {4};
  EXPECT_EQ(build_points(options, 4).size(), 5u);  // consecutive only
  options.layouts = {GroupLayout::kStrided};
  const auto strided = build_points(options, 4);
  ASSERT_EQ(strided.size(), 5u);  // asked for strided alone: measured under that name
  EXPECT_EQ(strided.front().layout, GroupLayout::kStrided);
}

TEST(CommSweep, PointsBelowOneElementPerRankAreSkipped) {
  SweepOptions options;
  options.min_bytes = 8;
  options.max_bytes = 32;
  options.step_factor = 2;  // 8, 16, 32
  options.dtypes = {DType::kFloat32};
  options.collectives = {Collective::kAllGather, Collective::kAllReduce};
  options.group_sizes = {8};
  const auto points = build_points(options, 8);
  // all_gather fp32 in a group of 8 needs 32 bytes for one element per rank; all_reduce needs 4.
  std::vector<std::string> keys;
  for (const auto& p : points) keys.push_back(p.key());
  EXPECT_EQ(keys,
            (std::vector<std::string>{"all_gather/fp32/g8/consecutive/latency/32", "all_reduce/fp32/g8/consecutive/latency/8",
                                      "all_reduce/fp32/g8/consecutive/latency/16", "all_reduce/fp32/g8/consecutive/latency/32"}));
  // A sweep in which nothing fits is empty, not an error.
  options.max_bytes = 16;
  options.collectives = {Collective::kAllGather};
  EXPECT_TRUE(build_points(options, 8).empty());
}

TEST(CommSweep, SizesRoundedToTheSameElementCountGiveOnePoint) {
  SweepOptions options;
  options.min_bytes = 9;
  options.max_bytes = 12;
  options.step_factor = 1.1;  // 9, 10, 11, 12 bytes -> 2, 2, 2, 3 fp32 elements
  options.collectives = {Collective::kAllReduce};
  options.dtypes = {DType::kFloat32};
  options.group_sizes = {2};
  const auto points = build_points(options, 2);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].bytes, 8u);
  EXPECT_EQ(points[0].count, 2u);
  EXPECT_EQ(points[1].bytes, 12u);
  EXPECT_EQ(points[1].count, 3u);
}

TEST(CommSweep, BuildPointsRefusesBadOptions) {
  EXPECT_TRUE(contains(user_error_of([] { build_points(SweepOptions{}, 1); }), "at least 2 ranks"));
  EXPECT_TRUE(contains(user_error_of([] { build_points(SweepOptions{}, 0); }), "at least 2 ranks"));
  SweepOptions options;
  options.group_sizes = {3};
  EXPECT_TRUE(contains(user_error_of([&] { build_points(options, 4); }), "group size 3"));
  options.group_sizes = {2, 8};
  EXPECT_TRUE(contains(user_error_of([&] { build_points(options, 4); }), "group size 8"));
  options.group_sizes = {1};
  EXPECT_TRUE(contains(user_error_of([&] { build_points(options, 4); }), "group size 1"));
  options.group_sizes = {4};
  EXPECT_TRUE(contains(user_error_of([&] { build_points(options, 6); }), "divide the world size 6"));
  options = SweepOptions{};
  options.iters = 0;
  EXPECT_TRUE(contains(user_error_of([&] { build_points(options, 2); }), "--iters"));
  options = SweepOptions{};
  options.warmup_iters = -1;
  EXPECT_TRUE(contains(user_error_of([&] { build_points(options, 2); }), "--warmup"));
  options = SweepOptions{};
  options.dtypes = {DType::kBool};
  EXPECT_TRUE(contains(user_error_of([&] { build_points(options, 2); }), "bool"));
  options = SweepOptions{};
  options.collectives.clear();
  EXPECT_TRUE(contains(user_error_of([&] { build_points(options, 2); }), "empty"));
  options = SweepOptions{};
  options.min_bytes = 1024;
  options.max_bytes = 8;
  EXPECT_TRUE(contains(user_error_of([&] { build_points(options, 2); }), "--min-bytes"));
}

// Host memory that starts 16 bytes past a page boundary, as glibc's malloc places a large block (its
// header), so that page alignment has to come from BlockBuffers, not from luck.
class MisalignedBuffer final : public CommBuffer {
 public:
  explicit MisalignedBuffer(std::size_t bytes) : bytes_(bytes) {
    void* memory = nullptr;
    if (posix_memalign(&memory, kBufferAlignment, bytes + 16) != 0) throw std::bad_alloc();
    memory_.reset(static_cast<unsigned char*>(memory));
  }
  void* data() override { return memory_.get() + 16; }
  std::size_t bytes() const override { return bytes_; }

 private:
  struct Free {
    void operator()(unsigned char* memory) const { std::free(memory); }
  };
  std::unique_ptr<unsigned char, Free> memory_;
  std::size_t bytes_;
};

struct AllocationLog {
  std::vector<std::size_t> bytes;  // every allocate call, in order
  AllocateBuffer allocator() {
    return [this](std::size_t size) {
      bytes.push_back(size);
      return std::unique_ptr<CommBuffer>(std::make_unique<MisalignedBuffer>(size));
    };
  }
};

std::uintptr_t address_of(CommBuffer& buffer) { return reinterpret_cast<std::uintptr_t>(buffer.data()); }

// The sweep of docs/comm.md's comparison with osu_allreduce: all-reduce fp32, 8 B to 4 MiB by 2, a pair.
std::vector<PointSpec> osu_like_sweep(TimingMode mode) {
  SweepOptions options;
  options.collectives = {Collective::kAllReduce};
  options.dtypes = {DType::kFloat32};
  options.min_bytes = 8;
  options.max_bytes = std::size_t{4} << 20;
  options.step_factor = 2;
  options.mode = mode;
  return build_points(options, 2);
}

TEST(PointBuffers, BytesPerPointFollowTheCollective) {
  PointSpec point{Collective::kAllReduce, DType::kFloat32, 4, GroupLayout::kConsecutive, 4096, 1024, TimingMode::kPipelined};
  EXPECT_EQ(point_buffer_bytes(point).send, 4096u);
  EXPECT_EQ(point_buffer_bytes(point).recv, 4096u);
  point.collective = Collective::kAllGather;  // count per rank; the receive buffer holds all ranks'
  EXPECT_EQ(point_buffer_bytes(point).send, 4096u);
  EXPECT_EQ(point_buffer_bytes(point).recv, 4u * 4096u);
  point.collective = Collective::kReduceScatter;
  EXPECT_EQ(point_buffer_bytes(point).send, 4u * 4096u);
  EXPECT_EQ(point_buffer_bytes(point).recv, 4096u);
  point.collective = Collective::kBroadcast;  // in place in the receive buffer; the send buffer keeps one element
  EXPECT_EQ(point_buffer_bytes(point).send, 4u);
  EXPECT_EQ(point_buffer_bytes(point).recv, 4096u);
  EXPECT_EQ(largest_buffer_bytes({}).send, 0u);
}

TEST(PointBuffers, BytesToAlignment) {
  EXPECT_EQ(bytes_to_alignment(0, 4096), 0u);
  EXPECT_EQ(bytes_to_alignment(4096 * 7, 4096), 0u);
  EXPECT_EQ(bytes_to_alignment(4096 * 7 + 16, 4096), 4080u);
  EXPECT_EQ(bytes_to_alignment(4096 * 7 - 1, 4096), 1u);
}

TEST(PointBuffers, PipelinedPointsOfASweepShareOnePageAlignedPairAllocatedOnce) {
  const auto points = osu_like_sweep(TimingMode::kPipelined);
  ASSERT_EQ(points.size(), 20u);
  AllocationLog log;
  BlockBuffers buffers(points, log.allocator());
  // Two allocations, made up front, sized for the largest point plus room to align.
  const std::vector<std::size_t> expected = {(std::size_t{4} << 20) + kBufferAlignment - 1,
                                             (std::size_t{4} << 20) + kBufferAlignment - 1};
  EXPECT_EQ(log.bytes, expected);
  std::uintptr_t send_address = 0;
  std::uintptr_t recv_address = 0;
  for (const PointSpec& point : points) {
    PointBuffers pair = buffers.for_point(point);
    EXPECT_EQ(pair.send->bytes(), point.bytes) << point.key();
    EXPECT_EQ(pair.recv->bytes(), point.bytes) << point.key();
    EXPECT_EQ(address_of(*pair.send) % kBufferAlignment, 0u) << point.key();
    EXPECT_EQ(address_of(*pair.recv) % kBufferAlignment, 0u) << point.key();
    if (send_address == 0) {
      send_address = address_of(*pair.send);
      recv_address = address_of(*pair.recv);
    }
    EXPECT_EQ(address_of(*pair.send), send_address) << point.key();  // the same memory at every size
    EXPECT_EQ(address_of(*pair.recv), recv_address) << point.key();
    EXPECT_NE(address_of(*pair.send), address_of(*pair.recv)) << point.key();  // never in place
  }
  EXPECT_EQ(log.bytes.size(), 2u);  // no allocation per point
}

TEST(PointBuffers, PipelinedPairIsSizedForTheLargestSendAndReceiveOfTheBlock) {
  SweepOptions options;
  options.collectives = {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllToAll, Collective::kBroadcast};
  options.dtypes = {DType::kFloat32, DType::kInt8};
  options.group_sizes = {4};
  options.min_bytes = 64;
  options.max_bytes = 1 << 20;
  options.mode = TimingMode::kPipelined;
  const auto points = build_points(options, 4);
  const BufferBytes largest = largest_buffer_bytes(points);
  EXPECT_EQ(largest.send, std::size_t{1} << 20);  // reduce_scatter and all_to_all send the labelled size
  EXPECT_EQ(largest.recv, std::size_t{1} << 20);  // all_gather, all_to_all and broadcast receive it
  AllocationLog log;
  BlockBuffers buffers(points, log.allocator());
  for (const PointSpec& point : points) {
    PointBuffers pair = buffers.for_point(point);
    EXPECT_EQ(pair.send->bytes(), point_buffer_bytes(point).send) << point.key();
    EXPECT_EQ(pair.recv->bytes(), point_buffer_bytes(point).recv) << point.key();
  }
  EXPECT_EQ(log.bytes.size(), 2u);
  // A point larger than the pair is a bug of the caller, not a silent overrun.
  PointSpec larger = points.back();
  larger.count *= 2;
  EXPECT_THROW(buffers.for_point(larger), InternalError);
}

TEST(PointBuffers, ViewsWriteIntoTheSharedBufferAtItsAlignedStart) {
  const auto points = osu_like_sweep(TimingMode::kPipelined);
  AllocationLog log;
  BlockBuffers buffers(points, log.allocator());
  PointBuffers small = buffers.for_point(points.front());
  PointBuffers large = buffers.for_point(points.back());
  static_cast<unsigned char*>(large.recv->data())[3] = 42;  // what one point leaves is where the next reads
  EXPECT_EQ(static_cast<unsigned char*>(small.recv->data())[3], 42);
  EXPECT_THROW(BufferView(*large.recv, 8, large.recv->bytes()), InternalError);  // past the end
}

TEST(PointBuffers, LatencyPointsShareTheAlignedPairToo) {
  // The penalty of exact-size pairs (the receive buffer 16 bytes after the send buffer modulo a page) is not
  // what a training step pays: its TP all-reduces work in place. Latency points get the same pair.
  const auto points = osu_like_sweep(TimingMode::kLatency);
  AllocationLog log;
  BlockBuffers buffers(points, log.allocator());
  ASSERT_EQ(log.bytes.size(), 2u);  // up front, sized for the largest point
  EXPECT_EQ(log.bytes[0], (std::size_t{4} << 20) + kBufferAlignment - 1);
  for (const PointSpec& point : points) {
    PointBuffers pair = buffers.for_point(point);
    EXPECT_EQ(pair.send->bytes(), point.bytes) << point.key();
    EXPECT_EQ(address_of(*pair.send) % kBufferAlignment, 0u) << point.key();
    EXPECT_EQ(address_of(*pair.recv) % kBufferAlignment, 0u) << point.key();
  }
  EXPECT_EQ(log.bytes.size(), 2u);  // no allocation per point
}

}  // namespace
}  // namespace itertime::calibrate
