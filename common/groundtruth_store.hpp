// groundtruth_store.hpp: the /groundtruth tables (schema in docs/schema.md).
// Invariants: one GroundTruthRow per configuration of a job (status ok, skipped, failed or oom, with the
// reason), appended last, after its samples (/groundtruth/samples_us, one per timed iteration: the
// wall time of the slowest rank, every round's in the order they ran), its per-rank breakdown rows
// (/groundtruth/ranks) and its measurement rounds (/groundtruth/rounds, one per round it was measured
// in, with that round's sample count, median and outside load); the row's offsets point at them. A
// configuration is present when its row is. The tables are append-only: a configuration measured again
// (`calibrate groundtruth --resume --retry-failed` on a `failed` row) gets a second row, and the newest row
// of a key wins: read_groundtruth_rows returns that one only (read_every_groundtruth_row returns all). A row's `recipe` is
// recipe_text() of the configuration's training techniques ("" = plain; common/training_techniques.hpp); the key ends in it
// unless plain. A row's cp and vp are the configuration's context-parallel degree and virtual pipeline stages per pipeline rank
// (common/parallel_config.hpp), each at least 1; the key shows them unless both are 1. Older files are read with the row type of
// their version (read_groundtruth_rows): schema 5 has no `cp` and `vp`, schema 4 neither those nor `recipe`; their rows come back
// with cp = vp = 1 and, from schema 4, an empty recipe (plain), which is what those versions measured. Ground truth is added only
// to files of the current schema (append_groundtruth and existing_groundtruth_keys: UserError otherwise).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/h5store.hpp"

namespace itertime::store {

struct GroundTruthRow {
  char key[96];
  char model[48];
  int64_t dp, tp, pp;
  int64_t cp, vp;  // context-parallel degree, virtual pipeline stages per pipeline rank; 1 = none (schema 6)
  int64_t micro_batch, global_batch, seq_len, num_micro_batches;
  char precision[12];
  char recipe[48];  // recipe_text of the training techniques; "" = plain (schema 5)
  char backend[8];
  char status[12];   // ok | skipped | failed
  char reason[200];  // why skipped, failed or out of memory (oom); empty when ok
  int64_t warmup_iters, timed_iters;
  double time_us_min, time_us_median, time_us_mean, time_us_p90, time_us_max, time_cv;
  double tokens_per_s;  // global batch tokens / median iteration time
  double loss_first, loss_last;
  int64_t samples_offset, samples_count, ranks_offset, ranks_count;
  char measured_utc[24];
  // Interleaved rounds (common/measurement_rounds.hpp): how many were run and counted, the counted
  // rounds' spread (mean |round median - time_us_median| / time_us_median, in %; NaN below 2 counted
  // rounds), and why the configuration stayed disturbed ("" when steady).
  int64_t rounds_run, rounds_counted;
  double round_spread_pct;
  char disturbance[96];
  int64_t rounds_offset, rounds_count;
};

// One measurement round of one configuration.
struct GroundTruthRoundRow {
  char key[96];
  int64_t round;     // the round of the run it was measured in (0-based)
  int64_t position;  // its place in that round's order (0-based)
  int64_t samples;   // timed steps in this round (its stretch of /groundtruth/samples_us)
  double time_us_median;
  double outside_load_cores;  // CPU time of other processes during its timed steps, in cores (Linux /proc)
  double steal_cores;         // hypervisor steal time during them, in cores
  char verdict[12];           // counted | load | outlier (common/measurement_rounds.hpp)
};

// One rank of one configuration; times are medians over the timed iterations, in microseconds.
struct GroundTruthRankRow {
  char key[96];
  int64_t rank, dp_idx, tp_idx, pp_idx;
  double forward_us, backward_us, tp_comm_us, pp_comm_us, dp_comm_us, optimizer_us, total_us;
  int64_t peak_rss_bytes;        // CPU: the process's peak resident set during the configuration (VmHWM)
  int64_t peak_tensor_bytes;     // peak of the tensor bytes the rank's training allocated (calibrate/tensor_memory.hpp)
  int64_t peak_allocated_bytes;  // the allocator's total allocated at its largest meanwhile (CUDA: the device's)
  int64_t peak_reserved_bytes;   // the allocator's total reserved at its largest (CUDA caching allocator; CPU: 0)
  int64_t local_params;
};

inline constexpr const char* kGroundTruthTable = "/groundtruth/configs";
inline constexpr const char* kGroundTruthRanks = "/groundtruth/ranks";
inline constexpr const char* kGroundTruthSamples = "/groundtruth/samples_us";
inline constexpr const char* kGroundTruthRounds = "/groundtruth/rounds";

void append_groundtruth(h5::Store& store, GroundTruthRow row, const std::vector<double>& samples_us,
                        const std::vector<GroundTruthRankRow>& ranks, const std::vector<GroundTruthRoundRow>& rounds);
// The /groundtruth/configs rows (none when the table is absent), from a file of this schema or an
// older one still opened (schema 4 and 5 rows read with cp = vp = 1; schema 4's with recipe ""): the
// newest row of each key, in file order (what fit, predict, validate and inspect read).
std::vector<GroundTruthRow> read_groundtruth_rows(h5::Store& store);
// Every row, superseded ones included, in file order (for checks of the file itself).
std::vector<GroundTruthRow> read_every_groundtruth_row(h5::Store& store);
// The newest row of each key of `rows`, in their order (the rule read_groundtruth_rows applies).
std::vector<GroundTruthRow> newest_groundtruth_rows(const std::vector<GroundTruthRow>& rows);
// Keys present; trims samples and rank rows written after the last complete configuration. For writers:
// refuses a file of an older schema, as append_groundtruth does.
std::set<std::string> existing_groundtruth_keys(h5::Store& store);

}  // namespace itertime::store

namespace itertime::h5 {
template <>
struct RowTraits<store::GroundTruthRow> {
  static RowType row_type();
};
template <>
struct RowTraits<store::GroundTruthRankRow> {
  static RowType row_type();
};
template <>
struct RowTraits<store::GroundTruthRoundRow> {
  static RowType row_type();
};
}  // namespace itertime::h5
