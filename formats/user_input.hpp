// user_input.hpp: `--from FILE`: which of the users' formats a file is, and its UserRun.
// Invariants:
//  - The format is the one named (--from-format megatron-args | nemo | torchtitan), else the extension's
//    (.yaml/.yml: nemo; .toml: torchtitan; .sh/.args/.txt: megatron-args), else the content's: a TOML
//    table header of torchtitan ([model], [training], [parallelism]) is torchtitan, a line starting "--" or a
//    launcher line (.py) is megatron-args, a YAML mapping is nemo. Undecided is a UserError naming the choices.
//  - A Megatron-LM training log (its arguments block's header or a timing line in it) is read for its
//    arguments block (megatron_log.hpp), whatever the extension or --from-format megatron-args.
//  - Every reader's errors name the file (and the line where there is one).
#pragma once

#include <string>
#include <string_view>

#include "formats/user_run.hpp"

namespace itertime::formats {

enum class InputFormat { kAuto, kMegatronArgs, kNemo, kTorchtitan };

InputFormat parse_input_format(std::string_view text);  // "auto", "megatron-args", "nemo", "torchtitan"
std::string to_string(InputFormat format);
InputFormat detect_format(const std::string& path, const std::string& text);

UserRun read_user_run(const std::string& path, InputFormat format = InputFormat::kAuto);

}  // namespace itertime::formats
