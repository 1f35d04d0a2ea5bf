// ops_store.hpp: the /ops tables (schema in docs/schema.md): operator signatures, their profiled times
// per occupancy (how many ranks were busy at once), and per pipeline-stage trace the operator sequence
// (signature ids with counts, per phase) and its communication operations.
// Invariants: a signature's id is its row index in /ops/signatures and never changes; a stage trace is
// present when its /ops/stages row is (written after its sequence and comm rows, whose offsets it
// holds); timings are keyed by (signature_id, active_ranks, backend). A stage key carries the training
// recipe (common/training_techniques.hpp) only when one is on, and the DP degree only with the
// distributed optimizer (whose shards it sizes), so plain keys never change. Keys past 127 characters are
// truncated by the column (h5::set_string), so two long keys could collide.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <algorithm>
#include <string>

#include "common/h5store.hpp"
#include "common/training_techniques.hpp"

namespace itertime::store {

struct OpSignatureRow {
  int64_t id;
  char name[48];          // aten::mm
  char signature[512];    // canonical text: name.overload(args)->output dtype (truncated past 511 chars)
  char input_dtypes[64];  // comma-separated dtypes of the tensor inputs
  char output_dtype[8];
  double flops;  // matrix products 2*M*N*K; others: elements of the largest input
  double bytes;  // tensor inputs + an output as large as the largest input
};

// The text a signature / dtype list has once stored (truncated past the field's capacity): the form
// every lookup by text must use, so that a long signature maps to one id across resumed runs.
inline std::string stored_signature(const std::string& signature) {
  return signature.substr(0, std::min(signature.size(), sizeof(OpSignatureRow::signature) - 1));
}
inline std::string stored_input_dtypes(const std::string& dtypes) {
  return dtypes.substr(0, std::min(dtypes.size(), sizeof(OpSignatureRow::input_dtypes) - 1));
}

struct OpTimingRow {
  int64_t signature_id;
  int64_t active_ranks;  // ranks profiling at the same time (the occupancy of the job predicted)
  char backend[8];
  double time_us_median;  // median over ranks of each rank's median
  double time_us_min;
  double time_us_max_rank;  // the slowest rank's median
  double time_cv;           // rank 0's samples
  int64_t repeats;
  int64_t ok;  // 0 when the operator could not be replayed in isolation (time fields are then 0)
};

// A signature timed again by `calibrate drift` (the profiles at an occupancy that the speed reference
// says drifted from the ground truth's state): the fields of OpTimingRow after the pass number.
struct OpRetimingRow {
  int64_t pass;  // 1.. (pass 0 is /ops/timings)
  int64_t signature_id;
  int64_t active_ranks;
  char backend[8];
  double time_us_median;
  double time_us_min;
  double time_us_max_rank;
  double time_cv;
  int64_t repeats;
  int64_t ok;
};

struct OpSequenceRow {
  char stage_key[128];
  char phase[12];  // forward | backward | optimizer | dp_buffer
  int64_t signature_id;
  int64_t count;  // calls per micro-batch (forward/backward) or per iteration (optimizer, dp_buffer)
};

struct OpCommRow {
  char stage_key[128];
  char phase[12];
  char kind[20];  // common/collective.hpp CommKind: tp_all_reduce | ... | dp_reduce_scatter | dp_all_gather
  char dtype[8];
  int64_t bytes;
  int64_t count;  // calls per micro-batch (or per iteration for dp_all_reduce)
};

struct OpStageRow {
  char stage_key[128];  // model/tp2/pp2/s1/mbs1/seq64/amp-bf16/aware[/recipe[/dpN]] (stage_key())
  char model[48];
  int64_t tp, pp, stage, micro_batch, seq_len;
  char precision[12];
  char variant[8];  // aware | blind (traced as fp32 with no casts, for the ablation)
  int64_t local_params;
  int64_t num_layers;
  int64_t sequence_offset, sequence_count, comm_offset, comm_count;
};

inline constexpr const char* kOpSignatures = "/ops/signatures";
inline constexpr const char* kOpTimings = "/ops/timings";
inline constexpr const char* kOpRetimings = "/ops/retimings";
inline constexpr const char* kOpSequences = "/ops/sequences";
inline constexpr const char* kOpComms = "/ops/comms";
inline constexpr const char* kOpStages = "/ops/stages";

// "model/tp2/pp2/s1/mbs1/seq64/amp-bf16/aware", then "/" + recipe_text(techniques) when any technique is
// on ("/sp+rc-full"), then "/dp" + dp with the distributed optimizer ("/dopt/dp4": its shards, and so its
// stage, depend on dp): plain keys are those of files written before the techniques existed. dp is
// ignored without the distributed optimizer and required (>= 1, else InternalError) with it. With context
// parallelism (cp > 1) "/cp" + cp ends the key: a CP stage holds seq_len / cp tokens of each sequence and
// gathers the rest's keys and values.
std::string stage_key(const std::string& model, int tp, int pp, int stage, int micro_batch, int seq_len,
                      const std::string& precision, const std::string& variant, const TrainingTechniques& techniques = {},
                      int dp = 0, int cp = 1);

// Appends a stage trace: sequence rows, comm rows, then the stage row (offsets filled in here).
void append_stage(h5::Store& store, OpStageRow stage, const std::vector<OpSequenceRow>& sequence,
                  const std::vector<OpCommRow>& comms);
// Stage keys present; trims sequence/comm rows written after the last complete stage.
std::set<std::string> existing_stage_keys(h5::Store& store);

// The rows' HDF5 types (h5store.hpp: found by argument-dependent lookup).
h5::RowType row_type_of(h5::RowTag<OpSignatureRow>);
h5::RowType row_type_of(h5::RowTag<OpTimingRow>);
h5::RowType row_type_of(h5::RowTag<OpRetimingRow>);
h5::RowType row_type_of(h5::RowTag<OpSequenceRow>);
h5::RowType row_type_of(h5::RowTag<OpCommRow>);
h5::RowType row_type_of(h5::RowTag<OpStageRow>);

}  // namespace itertime::store
