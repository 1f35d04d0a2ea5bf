// data_folder.hpp: the folders of the descriptions the project ships (data/hardware, data/kernels,
// data/training): which folder a command reads, the file of one device in it, and how a file from the
// built-in folder is shown to a user. Header-only.
// Invariants: an environment variable that is set and not empty wins over the built-in folder; a path
// is shown as "data/<folder>/<file>" only when its folder is the built-in one (the same directory, not
// the same spelling), else as given; nothing here reads a file's contents.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace itertime {

// The folder named by `environment_variable` when it is set and not empty, else `built_in`.
inline std::string data_folder(const char* environment_variable, const std::string& built_in) {
  const char* override_folder = std::getenv(environment_variable);
  if (override_folder != nullptr && *override_folder != '\0') return override_folder;
  return built_in;
}

// The file describing the device `name` in `folder`: <folder>/<name>.json.
inline std::string device_file(const std::string& folder, const std::string& name) {
  return (std::filesystem::path(folder) / (name + ".json")).string();
}

// `path` as "<shown_folder>/<file name>" when it lies in `built_in`, else `path` unchanged.
inline std::string shown_data_path(const std::string& path, const std::string& built_in, const std::string& shown_folder) {
  const std::filesystem::path file(path);
  std::error_code error;
  if (std::filesystem::equivalent(file.parent_path(), built_in, error)) return shown_folder + "/" + file.filename().string();
  return path;
}

}  // namespace itertime
