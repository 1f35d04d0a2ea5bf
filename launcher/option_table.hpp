// option_table.hpp: a verb's options as a declarative table: each row the option's names, its help, the
// request field it fills (whose type gives the option's: a number, a text, a flag, a comma-separated
// list), and whether the default is shown; add_options registers a table on a CLI11 subcommand, and
// given_flags lists the options the command line gave, by their long names, for a query's `given` set.
// Rows two verbs share are written once (shared_rows below) for every request type with the same fields.
// Invariants:
//  - A row only binds: every rule about the option's value is the query's (query/*.hpp).
//  - The table's order is the order of `--help`.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace itertime::launcher {

// The field an option fills.
using OptionField = std::variant<int*, int64_t*, double*, std::string*, bool*, std::vector<int>*, std::vector<std::string>*>;

template <class Request>
struct OptionRow {
  const char* names;  // CLI11's: "--dp", "-o,--output", or a positional "SOURCE"
  std::string help;
  OptionField (*field)(Request& request);
  bool show_default = false;
};

// Registers every row on `command`, bound to `request` (which must outlive the parse).
template <class Request>
void add_options(CLI::App& command, Request& request, const std::vector<OptionRow<Request>>& rows) {
  for (const OptionRow<Request>& row : rows) {
    std::visit(
        [&](auto* target) {
          using Target = std::remove_pointer_t<decltype(target)>;
          if constexpr (std::is_same_v<Target, bool>) {
            command.add_flag(row.names, *target, row.help);
          } else {
            CLI::Option* option = command.add_option(row.names, *target, row.help);
            if constexpr (std::is_same_v<Target, std::vector<int>> || std::is_same_v<Target, std::vector<std::string>>) {
              option->delimiter(',');
            }
            if (row.show_default) option->capture_default_str();
          }
        },
        row.field(request));
  }
}

// The long names ("--dp") of the options `command` saw on its command line.
inline std::set<std::string> given_flags(const CLI::App& command) {
  std::set<std::string> given;
  for (const CLI::Option* option : command.get_options()) {
    if (option->count() > 0 && !option->get_lnames().empty()) given.insert("--" + option->get_lnames().front());
  }
  return given;
}

// A verb that asks one query: its request, and whether the answer is printed as JSON.
template <class Request>
struct QueryCommand {
  Request request;
  bool json = false;
};

// Rows predict and plan share, for any QueryCommand whose request has these fields.
template <class Command>
OptionRow<Command> from_format_row() {
  return {"--from-format", "The format of --from: megatron-args, nemo or torchtitan",
          [](Command& c) -> OptionField { return &c.request.from.format; }, true};
}
template <class Command>
OptionRow<Command> megatron_args_row(const char* help) {
  return {"--megatron-args", help, [](Command& c) -> OptionField { return &c.request.from.megatron_args; }};
}
template <class Command>
OptionRow<Command> hardware_row() {
  return {"--hardware",
          "Hardware description (data/hardware): the calibration's own (default) for MFU and the device memory, or another "
          "device, predicted from its description with the calibration's operator efficiencies",
          [](Command& c) -> OptionField { return &c.request.hardware; }};
}
template <class Command>
OptionRow<Command> model_row() {
  return {"--model", "LLaMA config.json (the model that was traced); required unless --from or --megatron-args",
          [](Command& c) -> OptionField { return &c.request.model_file; }};
}
template <class Command>
OptionRow<Command> seq_row() {
  return {"--seq", "Sequence length (required unless --from or --megatron-args)",
          [](Command& c) -> OptionField { return &c.request.seq_len; }};
}
template <class Command>
OptionRow<Command> efficiency_row() {
  return {"--efficiency",
          "Operator efficiencies to carry to --hardware (a file from `itertime fit --efficiency-out`; default on a GPU: a "
          "GPU calibration's, else its published kernel figures; on a CPU node: the calibration's, or "
          "data/efficiency/default.json)",
          [](Command& c) -> OptionField { return &c.request.efficiency; }};
}
template <class Command>
OptionRow<Command> ranks_per_node_row() {
  return {"--ranks-per-node",
          "On a calibration: world ranks per node, filled in rank order (TP inside a node, then CP, DP, PP across); "
          "default: the calibration's own when its comm calibration spanned nodes, else one node",
          [](Command& c) -> OptionField { return &c.request.ranks_per_node; }};
}
template <class Command>
OptionRow<Command> json_row(const char* help) {
  return {"--json", help, [](Command& c) -> OptionField { return &c.json; }};
}

}  // namespace itertime::launcher
