// comm_sweep.cpp: the comm sweep grammar: sizes, groups and points to measure (comm_sweep.hpp).
#include "commbench/comm_sweep.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "common/byte_size.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {

std::size_t parse_bytes(std::string_view text) {
  const std::optional<int64_t> bytes = parse_byte_size(text);
  if (!bytes) {
    throw UserError("size '" + std::string(text) +
                    "' is not a byte count: use an integer with an optional K, M or G suffix (e.g. 8, 64K, 128M)");
  }
  return static_cast<std::size_t>(*bytes);
}

std::string format_bytes(std::size_t bytes) { return format_byte_size(static_cast<int64_t>(bytes)); }

std::vector<std::size_t> message_sizes(std::size_t min_bytes, std::size_t max_bytes, double step_factor) {
  if (min_bytes == 0) throw UserError("--min-bytes must be at least 1");
  if (min_bytes > max_bytes) {
    throw UserError("--min-bytes " + format_bytes(min_bytes) + " exceeds --max-bytes " + format_bytes(max_bytes));
  }
  if (!(step_factor > 1.0)) throw UserError("--step-factor must be greater than 1, got " + std::to_string(step_factor));
  std::vector<std::size_t> sizes;
  double size = static_cast<double>(min_bytes);
  while (size <= static_cast<double>(max_bytes) + 0.5) {
    const auto rounded = static_cast<std::size_t>(size + 0.5);
    if (sizes.empty() || rounded != sizes.back()) sizes.push_back(rounded);
    size *= step_factor;
  }
  return sizes;
}

std::vector<int> default_group_sizes(int world_size) {
  std::vector<int> sizes;
  for (int g = 2; g < world_size; g *= 2) {
    if (world_size % g == 0) sizes.push_back(g);
  }
  if (world_size >= 2) sizes.push_back(world_size);
  return sizes;
}

std::string PointSpec::key() const {
  return to_string(collective) + "/" + itertime::to_string(dtype) + "/g" + std::to_string(group_size) + "/" + to_string(layout) +
         "/" + to_string(mode) + "/" + std::to_string(bytes);
}

std::vector<PointSpec> build_points(const SweepOptions& options, int world_size) {
  if (world_size < 2) {
    throw UserError("communication calibration needs at least 2 ranks, got " + std::to_string(world_size) +
                    "; launch with mpirun -np N (N >= 2)");
  }
  if (options.iters < 1) throw UserError("--iters must be at least 1");
  if (options.warmup_iters < 0) throw UserError("--warmup must not be negative");
  if (options.collectives.empty() || options.dtypes.empty() || options.layouts.empty()) {
    throw UserError("the sweep is empty: give at least one collective, dtype and layout");
  }
  const std::vector<int> group_sizes = options.group_sizes.empty() ? default_group_sizes(world_size) : options.group_sizes;
  for (int g : group_sizes) {
    if (g < 2 || world_size % g != 0) {
      throw UserError("group size " + std::to_string(g) + " must be at least 2 and divide the world size " +
                      std::to_string(world_size));
    }
  }
  for (DType dtype : options.dtypes) {
    if (dtype == DType::kBool) throw UserError("dtype bool cannot be summed; use fp32, fp16, bf16, int8, ...");
  }
  const std::vector<std::size_t> sizes = message_sizes(options.min_bytes, options.max_bytes, options.step_factor);

  std::vector<PointSpec> points;
  std::set<std::string> keys;
  for (int g : group_sizes) {
    for (GroupLayout layout : options.layouts) {
      if (g == world_size && layout == GroupLayout::kStrided &&
          std::find(options.layouts.begin(), options.layouts.end(), GroupLayout::kConsecutive) != options.layouts.end()) {
        continue;  // the same single group as `consecutive`
      }
      for (Collective collective : options.collectives) {
        if (is_point_to_point(collective) && g != 2) continue;
        for (DType dtype : options.dtypes) {
          for (std::size_t size : sizes) {
            const std::size_t count = element_count(collective, size, g, dtype);
            if (count == 0) continue;  // smaller than one element per rank
            PointSpec point{collective, dtype, g, layout, labelled_bytes(collective, count, g, dtype), count, options.mode};
            if (keys.insert(point.key()).second) points.push_back(point);
          }
        }
      }
    }
  }
  return points;
}

}  // namespace itertime::calibrate
