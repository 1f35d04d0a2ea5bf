// user_input.cpp: --from FILE's format and reader (user_input.hpp).
#include "formats/user_input.hpp"

#include <sstream>

#include "common/enum_names.hpp"
#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "formats/megatron_args.hpp"
#include "formats/megatron_log.hpp"
#include "formats/nemo_config.hpp"
#include "formats/torchtitan_toml.hpp"

namespace itertime::formats {

constexpr EnumName<InputFormat> kInputFormatNames[] = {{InputFormat::kAuto, "auto"},
                                                       {InputFormat::kMegatronArgs, "megatron-args"},
                                                       {InputFormat::kNemo, "nemo"},
                                                       {InputFormat::kTorchtitan, "torchtitan"}};
static_assert(enum_names_one_to_one(kInputFormatNames));

InputFormat parse_input_format(std::string_view text) {
  if (const auto format = value_named(kInputFormatNames, text)) return *format;
  throw UserError("--from-format " + std::string(text) + ": not a format itertime reads (megatron-args, nemo, torchtitan)");
}

std::string to_string(InputFormat format) { return name_of(kInputFormatNames, format, "input format"); }

namespace {

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

InputFormat detect_format(const std::string& path, const std::string& text) {
  if (ends_with(path, ".yaml") || ends_with(path, ".yml")) return InputFormat::kNemo;
  if (ends_with(path, ".toml")) return InputFormat::kTorchtitan;
  if (ends_with(path, ".sh") || ends_with(path, ".args") || ends_with(path, ".txt")) return InputFormat::kMegatronArgs;
  std::istringstream lines(text);
  std::string line;
  bool yaml = false;
  while (std::getline(lines, line)) {
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::string rest = line.substr(first);
    if (rest.rfind("[model]", 0) == 0 || rest.rfind("[training]", 0) == 0 || rest.rfind("[parallelism]", 0) == 0 ||
        rest.rfind("[job]", 0) == 0)
      return InputFormat::kTorchtitan;
    if (rest.rfind("--", 0) == 0 || rest.find(".py ") != std::string::npos) return InputFormat::kMegatronArgs;
    if (first == 0 && rest.find(": ") != std::string::npos) yaml = true;
    if (first == 0 && !rest.empty() && rest.back() == ':') yaml = true;
  }
  if (yaml) return InputFormat::kNemo;
  throw UserError(path + ": cannot tell its format; give --from-format megatron-args, nemo or torchtitan");
}

UserRun read_user_run(const std::string& path, InputFormat format) {
  const std::string text = read_input_file(path, {"no such file", "is a directory; pass a configuration file", "cannot be read"});
  // A Megatron-LM training log (issue 44): its arguments block, as Megatron-LM printed what it ran.
  if (format == InputFormat::kAuto || format == InputFormat::kMegatronArgs) {
    const LogText log = log_from_text(path, text);
    if (is_megatron_log(log)) {
      UserRun from_log = user_run_from_megatron(parse_megatron_log(log, true, false).arguments);
      from_log.format = "megatron-log";
      return from_log;
    }
  }
  if (format == InputFormat::kAuto) format = detect_format(path, text);
  UserRun run;
  switch (format) {
    case InputFormat::kNemo: return read_nemo_config_text(text, path);
    case InputFormat::kTorchtitan: return read_torchtitan_toml_text(text, path);
    default: run = user_run_from_megatron(megatron_arguments_from_text(text, path)); break;
  }
  run.format = "megatron-args";
  return run;
}

}  // namespace itertime::formats
