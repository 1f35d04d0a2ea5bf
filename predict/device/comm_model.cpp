// comm_model.cpp: fitting and evaluating the comm model of comm_model.hpp.
// Invariants: every table has at least one point, ascending distinct sizes, time_us non-decreasing and
// us_per_byte > 0 (checked after fitting); predictions are finite and >= 0.
#include "predict/device/comm_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <sstream>

#include "common/calibration_records.hpp"
#include "common/errors.hpp"
#include "common/stats.hpp"

namespace itertime::predict {
namespace {

// Pool-adjacent-violators: the least-squares non-decreasing fit (unit weights).
std::vector<double> monotone_fit(const std::vector<double>& values) {
  std::vector<double> block_mean;
  std::vector<std::size_t> block_size;
  for (double v : values) {
    block_mean.push_back(v);
    block_size.push_back(1);
    while (block_mean.size() > 1 && block_mean[block_mean.size() - 2] > block_mean.back()) {
      const std::size_t n1 = block_size[block_size.size() - 2];
      const std::size_t n2 = block_size.back();
      const double merged =
          (block_mean[block_mean.size() - 2] * static_cast<double>(n1) + block_mean.back() * static_cast<double>(n2)) /
          static_cast<double>(n1 + n2);
      block_mean.pop_back();
      block_size.pop_back();
      block_mean.back() = merged;
      block_size.back() = n1 + n2;
    }
  }
  std::vector<double> out;
  out.reserve(values.size());
  for (std::size_t b = 0; b < block_mean.size(); ++b) out.insert(out.end(), block_size[b], block_mean[b]);
  return out;
}

// Least squares time = alpha + bytes * us_per_byte on the largest sizes of `table`, in relative terms
// (each residual divided by its measured time, weights 1/t^2), so that the smallest fitted size counts
// as much as the largest; exact on exact data.
void fit_alpha_beta(CommTable& table) {
  const std::size_t n = table.bytes.size();
  const std::size_t k = n <= 3 ? n : std::max<std::size_t>(3, (n + 1) / 2);
  const std::size_t first = n - k;
  double sw = 0.0, mean_x = 0.0, mean_t = 0.0;
  for (std::size_t i = first; i < n; ++i) {
    const double w = 1.0 / (table.measured_time_us[i] * table.measured_time_us[i]);
    sw += w;
    mean_x += w * static_cast<double>(table.bytes[i]);
    mean_t += w * table.measured_time_us[i];
  }
  mean_x /= sw;
  mean_t /= sw;
  double sxx = 0.0, sxt = 0.0;
  for (std::size_t i = first; i < n; ++i) {
    const double w = 1.0 / (table.measured_time_us[i] * table.measured_time_us[i]);
    const double dx = static_cast<double>(table.bytes[i]) - mean_x;
    sxx += w * dx * dx;
    sxt += w * dx * (table.measured_time_us[i] - mean_t);
  }
  double beta = sxx > 0.0 ? sxt / sxx : 0.0;
  double alpha = mean_t - beta * mean_x;
  if (!(beta > 0.0) || !std::isfinite(beta)) {
    // One size, or times that do not grow at the top: a pure bandwidth line through the largest point.
    beta = table.measured_time_us.back() / static_cast<double>(table.bytes.back());
    alpha = 0.0;
  }
  table.alpha_us = alpha;
  table.us_per_byte = beta;
  table.fit_points = static_cast<int64_t>(k);
  double ape_sum = 0.0;
  for (std::size_t i = first; i < n; ++i) {
    ape_sum += stats::ape_pct(alpha + beta * static_cast<double>(table.bytes[i]), table.measured_time_us[i]);
  }
  table.fit_mape_pct = ape_sum / static_cast<double>(k);
}

std::vector<DType> dtype_candidates(DType requested, std::vector<int>& tier) {
  // tier 0: requested; 1: same element size; 2: any other (nearest element size first).
  std::vector<std::pair<int, DType>> ranked;
  for (DType d : all_dtypes()) {
    if (d == requested) continue;
    const bool same = dtype_bytes(d) == dtype_bytes(requested);
    ranked.push_back({same ? 0
                           : 1 + static_cast<int>(std::llabs(static_cast<long long>(dtype_bytes(d)) -
                                                             static_cast<long long>(dtype_bytes(requested)))),
                      d});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<DType> candidates = {requested};
  tier = {0};
  for (const auto& [rank, d] : ranked) {
    candidates.push_back(d);
    tier.push_back(rank == 0 ? 1 : 2);
  }
  return candidates;
}

std::string format_us(double value_us) {
  std::ostringstream out;
  out << value_us;
  return out.str();
}

}  // namespace

bool CommKey::operator<(const CommKey& other) const {
  if (collective != other.collective) return itertime::to_string(collective) < itertime::to_string(other.collective);
  if (dtype != other.dtype) return itertime::to_string(dtype) < itertime::to_string(other.dtype);
  if (group_size != other.group_size) return group_size < other.group_size;
  if (layout != other.layout) return itertime::to_string(layout) < itertime::to_string(other.layout);
  if (nodes != other.nodes) return nodes < other.nodes;
  return per_node() < other.per_node();
}

bool CommKey::operator==(const CommKey& other) const {
  return collective == other.collective && dtype == other.dtype && group_size == other.group_size && layout == other.layout &&
         nodes == other.nodes && per_node() == other.per_node();
}

std::string CommKey::to_string() const {
  std::string name = itertime::to_string(collective) + "/" + itertime::to_string(dtype) + "/g" + std::to_string(group_size) +
                     "/" + itertime::to_string(layout);
  if (nodes > 1) name += "/" + std::to_string(nodes) + "x" + std::to_string(per_node());
  return name;
}

double CommTable::max_measured_time_us() const {
  return measured_time_us.empty() ? 0.0 : *std::max_element(measured_time_us.begin(), measured_time_us.end());
}

CommModel::CommModel(const std::vector<store::CommRecord>& records, const std::vector<int>& node_of_rank)
    : node_of_rank_(node_of_rank) {
  std::map<CommKey, std::map<int64_t, std::vector<double>>> points;
  std::map<std::pair<int64_t, GroupLayout>, LayoutPlacement> placements;  // per (group size, layout)
  for (const store::CommRecord& row : records) {
    const double time_us = row.time_us_median;
    if (row.mode != TimingMode::kLatency || row.check_errors != 0 || row.bytes <= 0 || row.group_size < 1 ||
        !std::isfinite(time_us) || time_us <= 0.0) {
      ++rows_ignored_;
      continue;
    }
    auto placed = placements.find({row.group_size, row.layout});
    if (placed == placements.end()) {
      placed =
          placements
              .emplace(std::make_pair(row.group_size, row.layout), layout_placement(node_of_rank_, row.group_size, row.layout))
              .first;
    }
    const LayoutPlacement& placement = placed->second;
    CommKey key{row.collective, row.dtype, row.group_size, row.layout};
    key.nodes = placement.nodes;
    key.ranks_per_node = placement.ranks_per_node;
    points[key][row.bytes].push_back(time_us);
    ++rows_used_;
  }
  for (const auto& [key, by_size] : points) {
    CommTable table;
    for (const auto& [bytes, times_us] : by_size) {
      table.bytes.push_back(bytes);
      table.measured_time_us.push_back(stats::median(times_us));
    }
    table.time_us = monotone_fit(table.measured_time_us);
    fit_alpha_beta(table);
    ITERTIME_CHECK(!table.bytes.empty() && table.us_per_byte > 0.0 && std::isfinite(table.alpha_us),
                   "comm fit of " + key.to_string() + " is degenerate");
    tables_.emplace(key, std::move(table));
  }
  across_nodes_ = any_spans_nodes(tables_);
}

double evaluate_table_us(const CommTable& table, int64_t bytes, bool& extrapolated) {
  ITERTIME_CHECK(!table.bytes.empty() && table.bytes.size() == table.time_us.size(), "empty or ragged comm table");
  extrapolated = false;
  if (bytes < table.bytes.front()) {
    extrapolated = true;
    return table.time_us.front();
  }
  if (bytes > table.bytes.back()) {
    extrapolated = true;
    const double fitted_us = table.alpha_us + static_cast<double>(bytes) * table.us_per_byte;
    return std::max({fitted_us, table.time_us.back(), table.max_measured_time_us()});
  }
  const auto upper = std::lower_bound(table.bytes.begin(), table.bytes.end(), bytes);
  const auto i = static_cast<std::size_t>(upper - table.bytes.begin());
  if (*upper == bytes) return table.time_us[i];
  const double x0 = static_cast<double>(table.bytes[i - 1]);
  const double x1 = static_cast<double>(table.bytes[i]);
  const double w = (static_cast<double>(bytes) - x0) / (x1 - x0);
  return table.time_us[i - 1] + w * (table.time_us[i] - table.time_us[i - 1]);
}

namespace {

// One search over the tables `accept` admits for a collective: per dtype tier, the exact count first,
// then the nearest measured count >= 2 (ties: the larger) scaled by ring steps and bus factor. `count_of`
// reads a table's count (its group size, or its node count for tables across nodes).
struct TableSearch {
  Collective collective;
  DType dtype;
  int64_t count;
  int64_t bytes;
  std::function<bool(const CommKey&)> accept;
  std::function<int64_t(const CommKey&)> count_of;
  std::string count_name;  // "group size" | "node count"
  // Link sharing (comm_model.hpp): the job's ranks per node over the calibration's, applied to the
  // bandwidth part of tables across nodes; 1: as calibrated.
  double link_share = 1.0;
  std::string link_share_text;  // "; link shared by R flows per node, not R_cal"
};

// The time of search's collective from the table found for it: `key` measured at source_count ranks
// (or nodes) in dtype `candidate`, reached in the search's pass of dtype tier `tier` (0: the dtype asked).
CommPrediction prediction_from_table(const CommKey& key, const CommTable& table, const TableSearch& search, int64_t source_count,
                                     int tier, DType candidate) {
  const Collective collective = search.collective;
  const int64_t count = search.count;
  const int64_t bytes = search.bytes;
  CommPrediction prediction;
  bool outside = false;
  const double table_us = evaluate_table_us(table, bytes, outside);
  prediction.extrapolated = outside;
  prediction.source = key.to_string() + (outside ? (bytes < table.bytes.front() ? ": below the measured sizes "
                                                                                  "(smallest size's time)"
                                                                                : ": above the measured sizes "
                                                                                  "(alpha-beta fit)")
                                                 : ": interpolated");
  prediction.time_us = table_us;
  const double share = key.spans_nodes() ? search.link_share : 1.0;
  if (source_count != count || share != 1.0) {
    const double bandwidth_us = std::clamp(static_cast<double>(bytes) * table.us_per_byte, 0.0, table_us);
    const double latency_us = table_us - bandwidth_us;
    prediction.time_us = latency_us * latency_steps(collective, count) / latency_steps(collective, source_count) +
                         bandwidth_us * busbw_factor(collective, count) / busbw_factor(collective, source_count) * share;
    prediction.extrapolated = true;
    if (source_count != count) {
      prediction.source += "; scaled from " + search.count_name + " " + std::to_string(source_count) + " to " +
                           std::to_string(count) + " (ring steps and bus factor)";
    }
    if (share != 1.0) prediction.source += search.link_share_text;
  }
  if (tier != 0) {
    prediction.dtype_fallback = true;
    prediction.source += "; dtype fallback " + to_string(search.dtype) + " -> " + to_string(candidate) +
                         (tier == 1 ? " (same element size)" : " (time as a function of bytes)");
  }
  ITERTIME_CHECK(std::isfinite(prediction.time_us) && prediction.time_us >= 0.0,
                 "comm prediction " + format_us(prediction.time_us) + " us from " + key.to_string());
  return prediction;
}

std::optional<CommPrediction> search_tables(const std::map<CommKey, CommTable>& tables, const TableSearch& search) {
  const Collective collective = search.collective;
  const int64_t count = search.count;
  std::vector<int> tier;
  const std::vector<DType> dtypes = dtype_candidates(search.dtype, tier);
  // The tables of (collective, dtype): one run of the map, which orders keys by them first (a prediction
  // looks tables up for every collective of its stage: no scan of every table).
  using Iterator = std::map<CommKey, CommTable>::const_iterator;
  const auto run_of = [&](DType candidate) {
    CommKey first;
    first.collective = collective;
    first.dtype = candidate;
    first.group_size = std::numeric_limits<int64_t>::min();
    const Iterator begin = tables.lower_bound(first);
    Iterator end = begin;
    while (end != tables.end() && end->first.collective == collective && end->first.dtype == candidate) ++end;
    return std::make_pair(begin, end);
  };
  const auto admitted = [&](const CommKey& key, DType candidate) {
    return key.collective == collective && key.dtype == candidate && search.accept(key);
  };
  // Nearest measured count >= 2 for (collective, dtype) among the admitted tables; 0 when none.
  const auto nearest_count = [&](DType candidate) -> int64_t {
    int64_t best = 0;
    const auto [begin, end] = run_of(candidate);
    for (Iterator it = begin; it != end; ++it) {
      const CommKey& key = it->first;
      const int64_t n = search.count_of(key);
      if (!admitted(key, candidate) || n < 2) continue;
      const int64_t distance = std::llabs(n - count);
      const int64_t best_distance = std::llabs(best - count);
      if (best == 0 || distance < best_distance || (distance == best_distance && n > best)) best = n;
    }
    return best;
  };
  // Preference: (tier 0, exact), (tier 1, exact), (tier 0, scaled), (tier 1, scaled), (tier 2, exact),
  // (tier 2, scaled).
  const std::vector<std::pair<int, bool>> passes = {{0, false}, {1, false}, {0, true}, {1, true}, {2, false}, {2, true}};
  for (const auto& [wanted_tier, scaled] : passes) {
    for (std::size_t c = 0; c < dtypes.size(); ++c) {
      if (tier[c] != wanted_tier) continue;
      const DType candidate = dtypes[c];
      const int64_t source_count = scaled ? nearest_count(candidate) : count;
      if (source_count == 0) continue;
      const auto [begin, end] = run_of(candidate);
      const auto found = std::find_if(begin, end, [&](const auto& entry) {
        return admitted(entry.first, candidate) && search.count_of(entry.first) == source_count;
      });
      if (found == end) continue;
      return prediction_from_table(found->first, found->second, search, source_count, wanted_tier, candidate);
    }
  }
  return std::nullopt;
}

int64_t group_size_of(const CommKey& key) { return key.group_size; }
int64_t nodes_of(const CommKey& key) { return key.nodes; }

// The sum of parts of a hierarchical collective (rule 5), or nullopt when one is missing.
std::optional<CommPrediction> compose(const std::vector<std::pair<std::string, std::optional<CommPrediction>>>& parts,
                                      const GroupPlacement& placement) {
  CommPrediction out;
  out.hierarchical = true;
  out.extrapolated = true;
  out.source = "hierarchical over " + to_string(placement) + ":";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& [what, part] = parts[i];
    if (!part) return std::nullopt;
    out.time_us += part->time_us;
    out.dtype_fallback = out.dtype_fallback || part->dtype_fallback;
    out.source += std::string(i ? " +" : "") + " " + what + " [" + part->source + "]";
  }
  return out;
}

}  // namespace

bool CommModel::any_spans_nodes(const std::map<CommKey, CommTable>& tables) {
  return std::any_of(tables.begin(), tables.end(), [](const auto& entry) { return entry.first.spans_nodes(); });
}

std::optional<CommPrediction> CommModel::find_us(Collective collective, DType dtype, int64_t group_size, GroupLayout layout,
                                                 int64_t bytes) const {
  return find_us(collective, dtype, GroupPlacement{group_size, std::max<int64_t>(1, group_size)}, layout, bytes);
}

// Long because the five placement rules (docs/comm.md) are read in their order and share two searches
// (inside a node, across nodes) that close over the placement, the layout and the link share.
std::optional<CommPrediction> CommModel::find_us(Collective collective, DType dtype, GroupPlacement placement, GroupLayout layout,
                                                 int64_t bytes, int64_t job_ranks_per_node) const {
  const int64_t group_size = placement.group_size;
  if (group_size <= 1 || bytes <= 0) {
    CommPrediction prediction;
    prediction.source = "no communication (group size " + std::to_string(group_size) + ", " + std::to_string(bytes) + " bytes)";
    return prediction;
  }
  ITERTIME_CHECK(placement.ranks_per_node >= 1 && group_size % placement.ranks_per_node == 0,
                 "comm placement " + std::to_string(placement.ranks_per_node) + " ranks per node for a group of " +
                     std::to_string(group_size));
  const int64_t m = placement.ranks_per_node;
  const int64_t n = placement.nodes();
  const bool across = measured_across_nodes();
  const int64_t calibrated_ranks_per_node = calibration_ranks_per_node();
  double link_share = 1.0;
  std::string link_share_text;
  if (job_ranks_per_node > 0 && calibrated_ranks_per_node > 0 && job_ranks_per_node != calibrated_ranks_per_node) {
    link_share = static_cast<double>(job_ranks_per_node) / static_cast<double>(calibrated_ranks_per_node);
    link_share_text = "; its link shared by " + std::to_string(job_ranks_per_node) + " flows per node, not " +
                      std::to_string(calibrated_ranks_per_node) + " (bandwidth part x" + format_us(link_share) + ")";
  }

  // Rule 2 (and the one-node part of rule 5): one-node tables of the layout, then (when the calibration
  // spanned nodes) of any layout; scaled by group size.
  const auto inside = [&](Collective c, int64_t g, int64_t b) -> std::optional<CommPrediction> {
    TableSearch search{c,
                       dtype,
                       g,
                       b,
                       [&](const CommKey& key) { return !key.spans_nodes() && key.layout == layout; },
                       group_size_of,
                       "group size",
                       1.0,
                       {}};
    std::optional<CommPrediction> found = search_tables(tables_, search);
    if (found || !across) return found;
    search.accept = [](const CommKey& key) { return !key.spans_nodes(); };
    found = search_tables(tables_, search);
    if (found) {
      found->extrapolated = true;
      found->source += "; no one-node " + to_string(layout) + " table: another layout's";
    }
    return found;
  };
  // Rule 4 (and the across-nodes part of rule 5): one rank per node, the layout's tables then any
  // layout's, scaled by node count.
  const auto across_nodes = [&](Collective c, int64_t nodes, int64_t b) -> std::optional<CommPrediction> {
    TableSearch search{c,
                       dtype,
                       nodes,
                       b,
                       [&](const CommKey& key) { return key.spans_nodes() && key.per_node() == 1 && key.layout == layout; },
                       nodes_of,
                       "node count",
                       link_share,
                       link_share_text};
    std::optional<CommPrediction> found = search_tables(tables_, search);
    if (found) return found;
    search.accept = [](const CommKey& key) { return key.spans_nodes() && key.per_node() == 1; };
    return search_tables(tables_, search);
  };

  if (n <= 1) return inside(collective, group_size, bytes);
  // Rule 1: exactly this placement.
  TableSearch exact{collective,
                    dtype,
                    group_size,
                    bytes,
                    [&](const CommKey& key) { return key.layout == layout && key.nodes == n && key.per_node() == m; },
                    group_size_of,
                    "group size",
                    link_share,
                    link_share_text};
  if (std::optional<CommPrediction> found = search_tables(tables_, exact)) return found;
  // Rule 3: nothing measured across nodes.
  if (!across) {
    std::optional<CommPrediction> found = inside(collective, group_size, bytes);
    if (found) {
      found->inter_node_from_intra = true;
      found->extrapolated = true;
      found->source +=
          "; the calibration measured no group across nodes: one-node figures for a group over " + to_string(placement);
    }
    return found;
  }
  std::optional<CommPrediction> found;
  if (m == 1) {  // Rule 4.
    found = across_nodes(collective, n, bytes);
    if (found) found->extrapolated = true;
    return found;
  }
  // Rule 5: hierarchical.
  const int64_t node_bytes = std::max<int64_t>(1, bytes / m);
  const std::string at = " at " + std::to_string(node_bytes) + " B";
  switch (collective) {
    case Collective::kAllReduce: {
      const std::optional<CommPrediction> scatter = inside(Collective::kReduceScatter, m, bytes);
      const std::optional<CommPrediction> gather = inside(Collective::kAllGather, m, bytes);
      if (scatter && gather) {
        return compose({{"reduce_scatter inside", scatter},
                        {"all_reduce across" + at, across_nodes(Collective::kAllReduce, n, node_bytes)},
                        {"all_gather inside", gather}},
                       placement);
      }
      return compose({{"all_reduce inside", inside(Collective::kAllReduce, m, bytes)},
                      {"all_reduce across" + at, across_nodes(Collective::kAllReduce, n, node_bytes)}},
                     placement);
    }
    case Collective::kAllGather:
      return compose({{"all_gather across" + at, across_nodes(Collective::kAllGather, n, node_bytes)},
                      {"all_gather inside", inside(Collective::kAllGather, m, bytes)}},
                     placement);
    case Collective::kReduceScatter:
      return compose({{"reduce_scatter inside", inside(Collective::kReduceScatter, m, bytes)},
                      {"reduce_scatter across" + at, across_nodes(Collective::kReduceScatter, n, node_bytes)}},
                     placement);
    default: return std::nullopt;
  }
}

std::string CommModel::missing_reason(Collective collective, GroupLayout layout) const {
  std::string measured;
  for (const auto& [key, table] : tables_) {
    if (key.collective != collective) continue;
    measured += (measured.empty() ? "" : ", ") + key.to_string();
  }
  const std::string name = to_string(collective);
  return "no usable /comm measurements for " + name + " with layout '" + to_string(layout) + "' (" +
         (measured.empty() ? "none of " + name + " at all" : "measured: " + measured) +
         "); calibrate it with `itertime calibrate comm`, or ask for a measured layout";
}

CommPrediction CommModel::predict_us(Collective collective, DType dtype, int64_t group_size, GroupLayout layout,
                                     int64_t bytes) const {
  std::optional<CommPrediction> found = find_us(collective, dtype, group_size, layout, bytes);
  if (!found) throw UserError(missing_reason(collective, layout));
  return *found;
}

CommPrediction CommModel::predict_us(Collective collective, DType dtype, GroupPlacement placement, GroupLayout layout,
                                     int64_t bytes) const {
  std::optional<CommPrediction> found = find_us(collective, dtype, placement, layout, bytes);
  if (!found) throw UserError(missing_reason(collective, placement, layout));
  return *found;
}

std::string CommModel::missing_reason(Collective collective, GroupPlacement placement, GroupLayout layout) const {
  if (placement.nodes() <= 1 && !measured_across_nodes()) return missing_reason(collective, layout);
  std::string measured;
  for (const auto& [key, table] : tables_) {
    if (key.collective != collective) continue;
    measured += (measured.empty() ? "" : ", ") + key.to_string();
  }
  const std::string name = to_string(collective);
  return "no usable /comm measurements for " + name + " over " + to_string(placement) +
         (placement.nodes() <= 1 ? " (inside one node)" : "") + " with layout '" + to_string(layout) + "' (" +
         (measured.empty() ? "none of " + name + " at all" : "measured: " + measured) +
         (placement.ranks_per_node > 1 && collective != Collective::kAllReduce && collective != Collective::kAllGather &&
                  collective != Collective::kReduceScatter
              ? "; only all_reduce, all_gather and reduce_scatter compose inside and across nodes"
              : "") +
         "); calibrate it " + (placement.nodes() <= 1 ? "with groups inside a node" : "across nodes") +
         " with `itertime calibrate comm`";
}

std::vector<CommFitResidual> CommModel::residuals() const {
  std::vector<CommFitResidual> out;
  out.reserve(tables_.size());
  for (const auto& [key, table] : tables_) {
    CommFitResidual r;
    r.key = key;
    r.alpha_us = table.alpha_us;
    r.bandwidth_GBps = 1.0 / table.us_per_byte * 1e6 / 1e9;
    r.mape_pct = table.fit_mape_pct;
    r.fit_points = table.fit_points;
    r.measured_points = static_cast<int64_t>(table.bytes.size());
    out.push_back(r);
  }
  return out;
}

}  // namespace itertime::predict
