// input_file.hpp: the text of a file a user names (a job, a model config, a hardware description), read
// whole before it is parsed. Header-only.
// Invariants: a missing path, a directory or a file that cannot be read is a UserError of one line,
// "PATH: " followed by the reader's own words for that case (which say what to pass instead); the
// text is returned as the file holds it.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/errors.hpp"

namespace itertime {

// What each refusal says after "PATH: ".
struct InputFileWords {
  std::string missing;     // e.g. "no such job file; see jobs/ for examples"
  std::string directory;   // e.g. "is a directory; pass a job .json file"
  std::string unreadable;  // e.g. "cannot be read"
};

inline std::string read_input_file(const std::string& path, const InputFileWords& words) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) throw UserError(path + ": " + words.missing);
  if (std::filesystem::is_directory(path, error)) throw UserError(path + ": " + words.directory);
  std::ifstream in(path);
  if (!in) throw UserError(path + ": " + words.unreadable);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace itertime
