// predict_options.cpp: the prediction verbs' shared option checks (predict_options.hpp).
#include "launcher/predict_options.hpp"

#include <filesystem>
#include <fstream>

#include "common/errors.hpp"

namespace itertime::launcher {

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

double device_memory_bytes(double gib, const std::optional<HardwareSpec>& hardware) {
  if (gib > 0) return gib * static_cast<double>(1ull << 30);
  if (hardware && hardware->kind == DeviceKind::kGpu) return static_cast<double>(hardware->memory_bytes);
  return 0;
}

TrainingTechniques parse_recipe_option(const std::string& text, const std::string& option) {
  if (text == "plain") return {};
  try {
    return parse_recipe_text(text);
  } catch (const UserError& error) {
    throw UserError(option + " " + text + ": " + error.what());
  }
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

}  // namespace itertime::launcher
