// query_options.hpp: what the queries (predict, plan, validate, import; query/*.hpp) and the verbs of both
// front ends share: option checks that turn text into typed values or one-line UserErrors, the `--from`
// input's reading and its account, the placement of a calibration's groups, and the one way a text file
// is written (never half-written under its real name).
// Invariants:
//  - A message names an option by its command-line spelling (`--nodes`); the Python front renames the
//    options it knows to its keywords at its boundary (python/keywords.hpp), so one text serves both.
//  - Nothing here prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/hardware_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/training_techniques.hpp"
#include "formats/user_run.hpp"

namespace itertime::query {

// --nodes N on a GPU description: the layout's ranks must fill exactly N nodes of gpus_per_node (0: unchecked).
void check_nodes(int nodes, int64_t ranks, const std::optional<HardwareSpec>& hardware);

// --ranks-per-node on a calibration (given < 0: not given): R >= 1 as given; else the calibration's own ranks
// per node when its comm calibration spanned nodes (calibration_ranks_per_node > 0), else 0 (every rank on
// one node). With a described device (`described`) it is refused: a description places ranks on its own
// GPUs per node (--nodes checks them).
int64_t ranks_per_node_option(int64_t given, int64_t calibration_ranks_per_node, bool described);

// "placement: 4 nodes x 2 ranks; tp inside a node, dp across 4 nodes" (predict/node_placement.hpp), and
// `json_text` (one JSON object) with "placement": {ranks_per_node, nodes, text, groups {name: {nodes,
// ranks_per_node}}, inter_node_from_intra} added.
std::string placement_line(const ParallelConfig& config, int64_t ranks_per_node);
std::string with_placement_json(const std::string& json_text, const ParallelConfig& config, int64_t ranks_per_node,
                                bool inter_node_from_intra);

// --device-memory-gib when given, else a GPU description's memory (a CPU node's is shared by its ranks: 0, none).
double device_memory_bytes(double gib, const std::optional<HardwareSpec>& hardware);

// --recipe / --recipes and --precision / --precisions help: each token in the words of Megatron-LM's options.
extern const char* const kRecipeTokensHelp;
extern const char* const kPrecisionsHelp;

// A recipe as the CLI takes it: "plain" or recipe_text's form ("sp+vp+rc-full"); a UserError naming the option.
TrainingTechniques parse_recipe_option(const std::string& text, const std::string& option);

// --from FILE (--from-format) or --megatron-args '...': the user's own configuration (formats/), or none.
struct FromOptions {
  std::string file;             // --from
  std::string format = "auto";  // --from-format
  std::string megatron_args;    // --megatron-args
};
std::optional<formats::UserRun> read_from(const FromOptions& from);

// What was read, for the output: "from FILE (FORMAT, framework F)", then the lines read, assumed, not
// understood and overridden (each "  label: a, b, c"; none when empty). JSON: the same as one object.
std::vector<std::string> user_run_lines(const formats::UserRun& run, const std::vector<std::string>& overridden);
std::string user_run_json_text(const formats::UserRun& run, const std::vector<std::string>& overridden);
// `json_text` (one JSON object) with "input": user_run_json_text added.
std::string with_input_json(const std::string& json_text, const formats::UserRun& run,
                            const std::vector<std::string>& overridden);

// `path` must not exist unless `force`; refused before anything is written.
void refuse_existing(const std::string& path, bool force, const std::string& option);

// Written to PATH.tmp and renamed: never a half-written file under the real name.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace itertime::query
