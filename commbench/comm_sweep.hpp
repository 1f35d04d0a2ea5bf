// comm_sweep.hpp: what `itertime calibrate comm` measures: the sweep grammar (nccl-tests style sizes
// with K/M/G suffixes), the rank layouts of groups, and the ordered list of points.
// Invariants:
//  - parse_bytes accepts common/byte_size.hpp's grammar (an integer with an optional K, M or G suffix,
//    powers of 1024, case-insensitive, an optional trailing B); anything else is a UserError naming the text.
//  - message_sizes(min, max, factor) = min, min*f, min*f^2, ... while <= max (factor > 1); with
//    factor 1 it is invalid. min <= max is required.
//  - A layout splits the world into world/g disjoint groups of g ranks; all groups run at once, so every
//    point is measured under full occupancy. consecutive: {k*g .. k*g+g-1} (how TP groups sit);
//    strided: {k, k + world/g, k + 2*world/g, ...} (how DP and PP groups sit). For g == world both are
//    the same group and only `consecutive` is measured.
//  - The point list is deterministic for given options and world size (every rank builds the same), and
//    each point has a unique key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "commbench/comm_collectives.hpp"
#include "common/dtype.hpp"
#include "common/rank_groups.hpp"

namespace itertime::calibrate {

std::size_t parse_bytes(std::string_view text);
std::string format_bytes(std::size_t bytes);  // 8, 1K, 64M, 3G when exact, else bytes
std::vector<std::size_t> message_sizes(std::size_t min_bytes, std::size_t max_bytes, double step_factor);

// Layouts and timing modes are common/collective.hpp's (shared with the comm model).
using itertime::GroupLayout;
using itertime::parse_group_layout;
using itertime::parse_timing_mode;
using itertime::TimingMode;

// The groups of `layout` with `group_size` ranks each; group_size must divide world_size
// (common/rank_groups.hpp, which the comm model uses to place the measured groups on nodes).
using itertime::layout_groups;
// Group sizes measured by default: 2, 4, 8, ... up to the world, and the world itself, each dividing it.
std::vector<int> default_group_sizes(int world_size);

struct SweepOptions {
  std::vector<Collective> collectives = all_collectives();
  std::vector<DType> dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8};
  std::vector<int> group_sizes;  // empty: default_group_sizes(world)
  std::vector<GroupLayout> layouts = {GroupLayout::kConsecutive, GroupLayout::kStrided};
  std::size_t min_bytes = 8;
  std::size_t max_bytes = 16u << 20;
  double step_factor = 4.0;
  int warmup_iters = 5;
  int iters = 20;
  TimingMode mode = TimingMode::kLatency;
};

struct PointSpec {
  Collective collective;
  DType dtype;
  int group_size;
  GroupLayout layout;
  std::size_t bytes;  // labelled size (nccl-tests convention), already rounded to whole elements
  std::size_t count;  // elements per call
  TimingMode mode;
  std::string key() const;  // unique: "all_reduce/fp16/g4/consecutive/latency/1048576"
};

// Validates the options against the world (UserError naming the bad value) and lists the points in
// measuring order: by group size, layout, collective, dtype, then size.
std::vector<PointSpec> build_points(const SweepOptions& options, int world_size);

}  // namespace itertime::calibrate
