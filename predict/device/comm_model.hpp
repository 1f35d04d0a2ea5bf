// comm_model.hpp: collective and point-to-point times fitted from the /comm table (its typed records,
// common/calibration_records.hpp).
// Invariants:
//  - Only rows with mode "latency" (barrier-separated calls, what a training step sees) and
//    check_errors == 0 are used; rows with a non-positive size or time are ignored too.
//  - One table per key (collective, dtype, group size, layout, placement): the measured sizes (nccl-tests sizes,
//    see commbench/comm_collectives.hpp) ascending and distinct (duplicates merged by their median), the
//    measured median times, and a monotone non-decreasing copy of them (pool-adjacent-violators; equal
//    to the measurements whenever those are already non-decreasing).
//  - Inside the measured range: piecewise-linear interpolation of the monotone times, exact at measured
//    sizes. Below it: the smallest size's time. Above it: alpha_us + bytes * us_per_byte, fitted by
//    least squares of the relative residuals on the largest max(3, ceil(n/2)) sizes (all of them when
//    n <= 3), never below the largest measured time. A fit whose slope is not positive falls back to
//    the line through the origin and the largest point.
//  - Placement: a table's rows are placed on the calibration's nodes (/meta comm_node_of_rank) as
//    common/rank_groups.hpp layout_placement() places the layout's groups: m ranks of a group on each of
//    n nodes (a one-node calibration: m = g, n = 1 everywhere; 2 nodes x 2 ranks: consecutive g2 (2,1),
//    strided g2 (1,2), g4 (2,2)). A key names it as "all_reduce/bf16/g4/strided/2x2" (n nodes x m
//    ranks) when n > 1 and as before ("all_reduce/bf16/g8/consecutive") on one node; a model saved
//    before placements were keyed loads as one node.
//  - find_us() at a placement (m ranks on each of n nodes, g = m*n), in this order:
//    1. a table of exactly that placement (and layout);
//    2. n = 1: the one-node tables (n = 1) of the layout, scaled by group size as below (today's rule);
//       when the calibration spanned nodes, one-node tables of another layout stand in for a layout
//       with none (its groups could not all sit inside a node there);
//    3. n > 1 and the calibration measured no group across nodes: the one-node figures of a group of g,
//       said in `source` and flagged (inter_node_from_intra); never silently;
//    4. m = 1 (one rank per node): the tables with one rank per node (the layout's, then any layout's),
//       the nearest node count n0 scaled to n by ring steps and bus factor as for group sizes (a 2-node
//       calibration predicts 4 and 8 nodes);
//    5. m > 1 and n > 1: hierarchical, inside each node then across nodes (NCCL's and Megatron's
//       two-level collectives), parts from rules 2 (inside, m ranks) and 4 (across, n ranks, bytes/m):
//       all_reduce(B) = reduce_scatter inside(B) + all_reduce across(B/m) + all_gather inside(B) (an
//       all_reduce inside at B when either inside part is missing); all_gather(B) = all_gather across
//       (B/m) + all_gather inside(B); reduce_scatter(B) = reduce_scatter inside(B) + reduce_scatter across
//       (B/m) (B: nccl-tests size of the whole group's buffer, B/m what each node's share moves across).
//       send / sendrecv (two ranks) never get here; broadcast and all_to_all have no composition (nullopt).
//    Everything but rule 1 is `extrapolated`.
//  - Link sharing: every group of a layout runs at once (the sweep's rule, and training's: all DP groups
//    reduce together), so a node's link is shared by as many flows as the node has ranks communicating
//    across it: a table across nodes was measured with the calibration's ranks per node R_cal sharing each
//    link (one flow per rank: each rank of a group across nodes, and each rank of a hierarchical group's
//    across step, has its own ring through the link). Asked with the job's ranks per node R
//    (job_ranks_per_node > 0), a time from a table across nodes has its bandwidth part (split as below)
//    scaled by R / R_cal, said in `source`; its latency part is not. R unknown (0) or equal: no scaling.
//  - Unmeasured group size n: the nearest measured group size n0 >= 2 (ties: the larger) of the same
//    collective, dtype and layout; its time at `bytes` is split into bandwidth part
//    min(t0, bytes * us_per_byte) and latency part (the rest); the latency part scales with the ring
//    step count, the bandwidth part with the bus factor (latency_steps and busbw_factor of
//    common/collective.hpp, the definitions the comm sweep uses).
//  - Unmeasured dtype: another dtype of the same element size, then any measured dtype (time is a
//    function of bytes); preference order: same dtype exact group, same-size dtype exact group, same
//    dtype scaled group, same-size dtype scaled group, any dtype exact group, any dtype scaled group.
//    The prediction says so (dtype_fallback, source).
//  - group_size <= 1 or bytes <= 0 costs 0. Times in microseconds, sizes in bytes.
//  - The state is plain data (maps, vectors, enums); the fitted model's archive (predict/model/
//    fitted_model_archive.hpp) writes a key's terms as their /comm names (the format of before the enums)
//    and restores the state through the restoring constructor: a round trip gives identical predictions.
//    Keys order as their names do, so tables list in the same order as ever.
//  - find_us() answers "no table" with nullopt (missing_reason() says why, in words); predict_us()
//    throws that reason as a UserError.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/collective.hpp"
#include "common/dtype.hpp"
#include "common/rank_groups.hpp"

namespace itertime::store {
struct CommRecord;
}

namespace itertime::predict {

struct CommKey {
  Collective collective = Collective::kAllReduce;
  DType dtype = DType::kFloat32;
  int64_t group_size = 0;
  GroupLayout layout = GroupLayout::kConsecutive;
  // Where the groups sat: `nodes` nodes, ranks_per_node of a group on each (0: group_size, one node).
  int64_t nodes = 1;
  int64_t ranks_per_node = 0;

  int64_t per_node() const { return ranks_per_node > 0 ? ranks_per_node : group_size; }
  bool spans_nodes() const { return nodes > 1; }
  // by names: collective, dtype, group size, layout, then nodes and ranks per node (one node first)
  bool operator<(const CommKey& other) const;
  bool operator==(const CommKey& other) const;
  std::string to_string() const;  // "all_reduce/bf16/g8/consecutive"; across nodes "all_reduce/bf16/g4/strided/2x2"
};

struct CommTable {
  std::vector<int64_t> bytes;            // ascending, distinct
  std::vector<double> measured_time_us;  // median time per size (median of duplicate rows)
  std::vector<double> time_us;           // monotone non-decreasing version of measured_time_us
  double alpha_us = 0.0;                 // latency of the upper-size fit
  double us_per_byte = 0.0;              // 1 / bandwidth of the upper-size fit (> 0)
  int64_t fit_points = 0;                // sizes the fit used (the largest ones)
  double fit_mape_pct = 0.0;             // the fit's MAPE over those sizes

  double max_measured_time_us() const;
};

struct CommPrediction {
  double time_us = 0.0;
  bool extrapolated = false;    // outside the measured sizes, or scaled from another group size
  std::string source;           // what the time came from, in words
  bool dtype_fallback = false;  // the requested dtype was not measured; another dtype's table was used
  // The group spans nodes but the calibration measured no group across nodes: one-node figures stand in.
  bool inter_node_from_intra = false;
  bool hierarchical = false;  // composed from inside-node and across-node parts (rule 5)
};

struct CommFitResidual {
  CommKey key;
  double alpha_us = 0.0;
  double bandwidth_GBps = 0.0;  // algorithmic bandwidth of the fit, 1e9 bytes per second
  double mape_pct = 0.0;        // fit's mean absolute percentage error over its fit points
  int64_t fit_points = 0;
  int64_t measured_points = 0;
};

class CommModel {
 public:
  CommModel() = default;  // empty: every non-trivial prediction finds no table
  // node_of_rank: the calibration's node index per world rank (/meta comm_node_of_rank); empty: one node.
  // A row whose group size does not divide that world is a UserError (a damaged file).
  explicit CommModel(const std::vector<store::CommRecord>& records, const std::vector<int>& node_of_rank = {});
  // Restores a saved model's state (tables(), rows_used(), rows_ignored(), node_of_rank()), as the archive wrote it.
  CommModel(std::map<CommKey, CommTable> tables, int64_t rows_used, int64_t rows_ignored, std::vector<int> node_of_rank = {})
      : tables_(std::move(tables)),
        rows_used_(rows_used),
        rows_ignored_(rows_ignored),
        node_of_rank_(std::move(node_of_rank)),
        across_nodes_(any_spans_nodes(tables_)) {}

  // The time of one call over a group of `group_size` ranks on one node, or nullopt when no measured
  // table can stand in for it.
  std::optional<CommPrediction> find_us(Collective collective, DType dtype, int64_t group_size, GroupLayout layout,
                                        int64_t bytes) const;
  // The same for a group placed on nodes (see the invariants' rules), in a job of job_ranks_per_node ranks
  // per node (link sharing; 0: as calibrated).
  std::optional<CommPrediction> find_us(Collective collective, DType dtype, GroupPlacement placement, GroupLayout layout,
                                        int64_t bytes, int64_t job_ranks_per_node = 0) const;
  // Why find_us() finds nothing for `collective` at `layout`, naming what was measured.
  std::string missing_reason(Collective collective, GroupLayout layout) const;
  // The same for a group placed on nodes (names the placement).
  std::string missing_reason(Collective collective, GroupPlacement placement, GroupLayout layout) const;
  // find_us(), or a UserError with missing_reason().
  CommPrediction predict_us(Collective collective, DType dtype, int64_t group_size, GroupLayout layout, int64_t bytes) const;
  CommPrediction predict_us(Collective collective, DType dtype, GroupPlacement placement, GroupLayout layout,
                            int64_t bytes) const;
  // Whether any table's groups spanned nodes (the calibration measured across nodes).
  bool measured_across_nodes() const { return across_nodes_; }
  // The calibration's node index per world rank (empty: one node, or a model saved before it was kept).
  const std::vector<int>& node_of_rank() const { return node_of_rank_; }
  // Its ranks per node (common/rank_groups.hpp ranks_per_node_of): 0 when it ran on one node.
  int64_t calibration_ranks_per_node() const { return ranks_per_node_of(node_of_rank_); }
  std::vector<CommFitResidual> residuals() const;

  bool empty() const { return tables_.empty(); }
  const std::map<CommKey, CommTable>& tables() const { return tables_; }
  int64_t rows_used() const { return rows_used_; }
  int64_t rows_ignored() const { return rows_ignored_; }  // other modes, failed checks, bad values

 private:
  std::map<CommKey, CommTable> tables_;
  int64_t rows_used_ = 0;
  int64_t rows_ignored_ = 0;
  std::vector<int> node_of_rank_;
  bool across_nodes_ = false;  // any table's groups spanned nodes (set with the tables: a lookup asks it each time)
  static bool any_spans_nodes(const std::map<CommKey, CommTable>& tables);
};

// Evaluates one table at `bytes` (> 0): interpolation, clamp below, fit above. Sets `extrapolated`
// when `bytes` lies outside the measured sizes.
double evaluate_table_us(const CommTable& table, int64_t bytes, bool& extrapolated);

}  // namespace itertime::predict
