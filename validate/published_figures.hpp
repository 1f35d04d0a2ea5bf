// published_figures.hpp: public, measured training figures with their stated layouts (data/published/*.json,
// docs/framework.md "End-to-end check on published figures"), read for `itertime score-published`, which
// predicts each row with the framework model (predict/framework/) and reports the error.
// Invariants:
//  - Every row holds what its source states and nothing guessed: the model's sizes, the GPUs and their
//    description (data/hardware/<name>), the whole layout (dp, tp, pp, cp, vp, micro-batch, global batch,
//    sequence length), the precision, the techniques, and the measured figure exactly as published with
//    its unit; a conversion to seconds per iteration is done here (measured_seconds_per_iteration), with
//    the source's own FLOP formula where the figure is a FLOP rate, never by hand in the file.
//  - parse_published_figures is pure (text in, rows out). Every mistake is one UserError naming the file,
//    the row (its id and index) and the field: unknown or missing fields, wrong types, non-positive sizes,
//    a layout whose ranks are not the row's GPUs, a global batch not divisible by dp x micro-batch, heads
//    not divisible by tp, an unknown unit, a FLOP rate without a known formula, duplicate row ids.
//  - Torch-, MPI- and CUDA-free; no prediction is made here (launcher/cmd_published.cpp does that).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/parallel_config.hpp"
#include "predict/framework/framework_types.hpp"

namespace itertime::validate {

// How a source states its measurement.
enum class MeasuredUnit {
  kTflopsPerGpu,          // "TFLOP/s per GPU": achieved FLOP rate per GPU, counted by the source's formula
  kSecondsPerIteration,   // "s per iteration"
  kTokensPerSecond,       // "tokens/s": the whole job's training throughput
  kTokensPerSecondPerGpu  // "tokens/s per GPU"
};
std::string to_string(MeasuredUnit unit);  // the file's text of the unit

// The FLOP counts sources divide by to report a FLOP rate (docs/framework.md gives each with its source).
enum class FlopFormula {
  kNone,
  // Narayanan et al. 2021 (arXiv 2104.04473), section 5.1: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per
  // iteration, counting the full activation recomputation (4 passes of the forward's GEMM FLOPs).
  kNarayanan2021,
};
std::string to_string(FlopFormula formula);  // "narayanan2021", or "" for none

// Where the GPUs' nodes differ from their description's reference node (data/hardware): the compute NICs.
struct FabricOverride {
  std::optional<int> nics_per_node;
  std::optional<double> nic_bandwidth_bytes_per_s;  // per NIC, per direction
  std::string source;
};

struct PublishedRow {
  std::string id;             // unique within its file, e.g. "1.7B"
  std::string where;          // the table, row, figure or log line in the source
  std::string hardware;       // a data/hardware description's name
  bool amd_host_cpu = false;  // the nodes' host CPUs (NCCL's per-step network overhead differs)
  FabricOverride fabric;
  int gpus = 0;
  predict::framework::TransformerShape shape;
  ParallelConfig config;
  predict::framework::FrameworkRecipe recipe;
  double measured_value = 0;  // as published, in `unit`
  MeasuredUnit unit = MeasuredUnit::kSecondsPerIteration;
  FlopFormula formula = FlopFormula::kNone;  // with kTflopsPerGpu only
  std::string notes;
};

struct PublishedSource {
  std::string path;  // the file read (or the name given to the parser)
  std::string id;    // e.g. "narayanan2021-table1"
  std::string title;
  std::string reference;  // URLs, commits
  std::string framework;  // what ran: e.g. "Megatron-LM 2021 (commit 6985e58)"
  std::string notes;
  std::vector<PublishedRow> rows;
};

// Parses one file's text; `source_name` (its path) names it in errors.
PublishedSource parse_published_figures(const std::string& json_text, const std::string& source_name);
// Reads and parses a file (UserError for a missing, unreadable or malformed one).
PublishedSource load_published_figures(const std::string& path);

// The source's FLOP count of one iteration of `row` (its formula; 0 with kNone).
double formula_flops_per_iteration(FlopFormula formula, const PublishedRow& row);
// The measured figure as seconds per iteration: a FLOP rate through the formula, tokens through the
// global batch x sequence length.
double measured_seconds_per_iteration(const PublishedRow& row);

// The folder of shipped files: <source dir>/data/published.
std::string published_figures_dir();

}  // namespace itertime::validate
