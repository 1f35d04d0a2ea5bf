// megatron_args.hpp: a Megatron-LM command line or arguments file read into MegatronArguments (issue 34).
// Invariants:
//  - The text is split as a shell would split a launch script's argument list: blanks and line breaks
//    separate words, '\' before a line break continues the line, '#' at the start of a word comments to
//    the end of the line, single and double quotes group (a backslash escapes in double quotes); each
//    word keeps the line it started on. An unclosed quote is a UserError naming file and line.
//  - A line that launches a script (`torchrun ... pretrain_gpt.py ARGS`, `python pretrain_gpt.py ARGS`):
//    the arguments are the words after the first word ending in ".py"; torchrun's --nproc-per-node (or
//    --nproc_per_node) times --nnodes before it is the world size. Words before the first option that are
//    not a launcher line (a shell assignment `ARGS=(`, a closing `)`) are stray, listed, never used.
//  - Options are Megatron-LM's (megatron/training/arguments.py): each option is stored under its
//    argparse dest name (--fp8-format is fp8, --disable-bias-linear is add_bias_linear = "false"); a
//    flag given is "true"; an option takes the words up to the next "--" word (one for the known
//    single-valued options: a second is a UserError), `--opt=value` too. An option not in the table is
//    stored under its own name with '_' for '-', and the mapping lists it as not understood.
//  - An option given twice with different values is a UserError naming both lines.
#pragma once

#include <string>
#include <vector>

#include "formats/megatron_arguments.hpp"
#include "formats/user_run.hpp"

namespace itertime::formats {

struct Word {
  std::string text;
  int line = 0;  // 1-based; 0 for a command line given as one string
};

// Shell-like words of `text` (see above); `source` names it in errors; `lines` false: every word is line 0.
std::vector<Word> split_words(const std::string& text, const std::string& source, bool lines = true);

MegatronArguments megatron_arguments_from_words(const std::vector<Word>& words, const std::string& source);

// A command line as one string (--megatron-args '...'); errors name "--megatron-args".
MegatronArguments megatron_arguments_from_command_line(const std::string& command_line);
// An arguments file's text; errors name `source` and the line.
MegatronArguments megatron_arguments_from_text(const std::string& text, const std::string& source);

// The file at `path` (UserError when missing or unreadable), read and mapped to its UserRun.
UserRun read_megatron_args_file(const std::string& path);

}  // namespace itertime::formats
