// query_options.cpp: the queries' shared option checks (query_options.hpp).
#include "query/query_options.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "formats/megatron_args.hpp"
#include "formats/user_input.hpp"
#include "predict/node_placement.hpp"

namespace itertime::query {

void check_nodes(int nodes, int64_t ranks, const std::optional<HardwareSpec>& hardware) {
  if (nodes == 0) return;
  if (nodes < 0) throw UserError("--nodes " + std::to_string(nodes) + ": give a positive node count");
  if (!hardware || !hardware->gpus_per_node) throw UserError("--nodes needs --hardware with a GPU description (GPUs per node)");
  const int64_t per_node = *hardware->gpus_per_node;
  if (ranks != int64_t{nodes} * per_node) {
    throw UserError("--nodes " + std::to_string(nodes) + ": " + std::to_string(nodes) + " nodes of " + hardware->name + " hold " +
                    std::to_string(int64_t{nodes} * per_node) + " GPUs, the layout has " + std::to_string(ranks) + " ranks");
  }
}

int64_t ranks_per_node_option(int64_t given, int64_t calibration_ranks_per_node, bool described) {
  if (given >= 0 && described) {
    throw UserError("--ranks-per-node " + std::to_string(given) +
                    ": for a calibration; a hardware description places ranks on its own GPUs per node (see --nodes)");
  }
  if (given == 0) throw UserError("--ranks-per-node 0: give a positive count of ranks per node");
  if (given > 0) return given;
  return calibration_ranks_per_node > 0 ? calibration_ranks_per_node : 0;
}

std::string placement_line(const ParallelConfig& config, int64_t ranks_per_node) {
  return "placement: " + predict::describe(predict::place_config(config, ranks_per_node));
}

std::string with_placement_json(const std::string& json_text, const ParallelConfig& config, int64_t ranks_per_node,
                                bool inter_node_from_intra) {
  const predict::ConfigPlacement placement = predict::place_config(config, ranks_per_node);
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  for (const predict::NamedPlacement& group : placement.groups) {
    groups[group.name] = {{"nodes", group.placement.nodes()}, {"ranks_per_node", group.placement.ranks_per_node}};
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::parse(json_text);
  out["placement"] = {{"ranks_per_node", placement.ranks_per_node},
                      {"nodes", placement.nodes},
                      {"text", predict::describe(placement)},
                      {"groups", groups},
                      {"inter_node_from_intra", inter_node_from_intra}};
  return out.dump(2);
}

double device_memory_bytes(double gib, const std::optional<HardwareSpec>& hardware) {
  if (gib > 0) return gib * static_cast<double>(1ull << 30);
  if (hardware && hardware->kind == DeviceKind::kGpu) return static_cast<double>(hardware->memory_bytes);
  return 0;
}

const char* const kRecipeTokensHelp =
    "tokens joined by '+' in any order, in Megatron-LM's words: sp = --sequence-parallel; vocab (also vp) = the "
    "vocabulary-parallel embedding and output layer (Megatron-LM's wherever tp > 1; not --vp, the virtual pipeline); "
    "dopt = --use-distributed-optimizer; rc-sel / rc-full = --recompute-granularity selective / full; ovl = "
    "--overlap-grad-reduce (ovl-<size>: its bucket, e.g. ovl-4M); opg = --overlap-param-gather (with dopt and ovl)";
const char* const kPrecisionsHelp =
    "fp32, tf32, bf16, fp16, amp-bf16 (Megatron-LM's --bf16: fp32 main weights, bf16 math), amp-fp16 (--fp16) or fp8 "
    "(--bf16 --fp8-format hybrid: Transformer Engine fp8 GEMMs; --framework megatron-te on a GPU with an fp8 peak)";

TrainingTechniques parse_recipe_option(const std::string& text, const std::string& option) {
  if (text == "plain") return {};
  try {
    return parse_recipe_text(text);
  } catch (const UserError& error) {
    throw UserError(option + " " + text + ": " + error.what());
  }
}

std::optional<formats::UserRun> read_from(const FromOptions& from) {
  if (!from.file.empty() && !from.megatron_args.empty()) throw UserError("--from and --megatron-args: give one");
  if (from.format != "auto" && from.file.empty()) throw UserError("--from-format " + from.format + " needs --from FILE");
  if (!from.megatron_args.empty()) {
    formats::UserRun run = formats::user_run_from_megatron(formats::megatron_arguments_from_command_line(from.megatron_args));
    run.format = "megatron-args";
    return run;
  }
  if (from.file.empty()) return std::nullopt;
  return formats::read_user_run(from.file, formats::parse_input_format(from.format));
}

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

std::vector<std::string> user_run_lines(const formats::UserRun& run, const std::vector<std::string>& overridden) {
  std::vector<std::string> out;
  out.push_back("from " + run.source + " (" + run.format + ", framework " + predict::framework::to_string(run.framework) + ")");
  const auto add = [&out](const char* label, const std::vector<std::string>& items) {
    if (!items.empty()) out.push_back(std::string("  ") + label + ": " + joined(items));
  };
  add("read", run.read);
  add("assumed", run.assumed);
  add("not understood (not used)", run.not_understood);
  add("overridden by flags", overridden);
  return out;
}

std::string user_run_json_text(const formats::UserRun& run, const std::vector<std::string>& overridden) {
  nlohmann::ordered_json out = {
      {"source", run.source},    {"format", run.format},   {"framework", predict::framework::to_string(run.framework)},
      {"read", run.read},        {"assumed", run.assumed}, {"not_understood", run.not_understood},
      {"overridden", overridden}};
  return out.dump(2);
}

std::string with_input_json(const std::string& json_text, const formats::UserRun& run,
                            const std::vector<std::string>& overridden) {
  nlohmann::ordered_json out = nlohmann::ordered_json::parse(json_text);
  out["input"] = nlohmann::ordered_json::parse(user_run_json_text(run, overridden));
  return out.dump(2);
}

void refuse_existing(const std::string& path, bool force, const std::string& option) {
  std::error_code error;
  if (!force && std::filesystem::exists(path, error))
    throw UserError(option + " " + path + ": file exists; pass --force to overwrite it");
}

void write_text_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!(out << text) || !out.flush()) throw UserError(path + ": cannot be written; check the folder and permissions");
  }
  std::filesystem::rename(temporary, path);
}

}  // namespace itertime::query
