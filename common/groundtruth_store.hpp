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
// Imported ground truth (`itertime import`, issue 34): a configuration measured by a user's own training
// run, read from its log, has a /groundtruth/imports row of the same key beside its configs row, written
// in the same commit (append_imported_groundtruth): the log's name and SHA-256, its format, the model's
// sizes and the framework's switches the log states (the configs row holds only the model's name). A
// configs row without an imports row is itertime's own measurement. The imports table is an addition
// within schema 6: files without it read as having none, and older itertimes ignore it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/h5store.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"

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

// One imported configuration: where its measurement came from and what the log said of it.
struct GroundTruthImportRow {
  char key[96];
  char log_name[200];   // the log file as given to import
  char log_sha256[72];  // SHA-256 of its bytes, 64 hex digits
  char format[24];      // megatron-log | nemo-log | torchtitan-log
  char framework[16];   // the framework that trained (predict/framework/framework_types.hpp): megatron-te
  int64_t hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, head_dim, vocab_size;
  int64_t tie_word_embeddings;                // 0 | 1
  char fp8_recipe[12];                        // delayed | current (with precision fp8)
  int64_t tp_comm_overlap, fp8_param_gather;  // 0 | 1
  int64_t intervals_total, intervals_warmup;  // timing lines read, and dropped as warm-up
  int64_t first_steady_line, last_line;       // the log's lines of the first steady and the last timing line
  char imported_utc[24];
};

inline constexpr const char* kGroundTruthTable = "/groundtruth/configs";
inline constexpr const char* kGroundTruthRanks = "/groundtruth/ranks";
inline constexpr const char* kGroundTruthSamples = "/groundtruth/samples_us";
inline constexpr const char* kGroundTruthRounds = "/groundtruth/rounds";
inline constexpr const char* kGroundTruthImports = "/groundtruth/imports";
// The configs row's `backend` of an imported configuration (its measurement ran on the user's cluster).
inline constexpr const char* kImportedBackend = "log";

// A configs row with what names the configuration filled in (key, model, the layout, the micro-batch
// count, precision, recipe text) and every measured field left zero: the start of a measured row
// (calibrate groundtruth) and of an imported one (formats/log_import) alike.
GroundTruthRow configuration_row(const std::string& key, const std::string& model, const ParallelConfig& layout,
                                 PrecisionName precision, const TrainingTechniques& techniques);

void append_groundtruth(h5::Store& store, GroundTruthRow row, const std::vector<double>& samples_us,
                        const std::vector<GroundTruthRankRow>& ranks, const std::vector<GroundTruthRoundRow>& rounds);
// An imported configuration: its imports row and its configs row (with its samples, no rank or round
// rows), in one commit. A UserError, with nothing written, for a file of an older schema or a key
// already present (the same log imported twice).
void append_imported_groundtruth(h5::Store& store, const GroundTruthImportRow& imported, const GroundTruthRow& row,
                                 const std::vector<double>& samples_us);
// The /groundtruth/imports rows (none when the table is absent).
std::vector<GroundTruthImportRow> read_groundtruth_imports(h5::Store& store);
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

// The rows' HDF5 types (h5store.hpp: found by argument-dependent lookup).
h5::RowType row_type_of(h5::RowTag<GroundTruthRow>);
h5::RowType row_type_of(h5::RowTag<GroundTruthRankRow>);
h5::RowType row_type_of(h5::RowTag<GroundTruthImportRow>);
h5::RowType row_type_of(h5::RowTag<GroundTruthRoundRow>);

}  // namespace itertime::store
