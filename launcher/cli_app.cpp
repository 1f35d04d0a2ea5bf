// cli_app.cpp: the `itertime` command line shared by both binaries (cli_app.hpp).
#include "launcher/cli_app.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <utility>
#include <vector>

#include "common/errors.hpp"

namespace itertime::launcher {
namespace {

// Edit distance with adjacent transpositions (optimal string alignment): "precisoin" is 1 from "precision".
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1, 0));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string without_dashes(const std::string& name) { return name.substr(std::min(name.find_first_not_of('-'), name.size())); }

// The candidates closest to `typed` (dashes aside): those at the smallest edit distance when it is at most a
// third of the word (at least 1), or that `typed` begins (3 characters or more); at most 3, in their order.
std::vector<std::string> closest(const std::string& typed, const std::vector<std::string>& candidates) {
  const std::string word = without_dashes(typed);
  const std::size_t limit = std::max<std::size_t>(1, word.size() / 3);
  std::size_t best = limit + 1;
  std::vector<std::string> out;
  for (const std::string& candidate : candidates) {
    const std::string name = without_dashes(candidate);
    std::size_t score = edit_distance(word, name);
    if (word.size() >= 3 && name.size() > word.size() && name.compare(0, word.size(), word) == 0) score = std::min(score, limit);
    if (score < best) {
      best = score;
      out.clear();
    }
    if (score == best && score <= limit && out.size() < 3) out.push_back(candidate);
  }
  return out;
}

std::string did_you_mean(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string out = "; did you mean ";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out + "?";
}

// The deepest subcommand the parse reached (the app itself when none), and its path ("slurm submit").
CLI::App* deepest_subcommand(CLI::App& app, std::string& path) {
  CLI::App* at = &app;
  for (std::vector<CLI::App*> parsed = at->get_subcommands(); !parsed.empty(); parsed = at->get_subcommands()) {
    at = parsed.back();
    path += (path.empty() ? "" : " ") + at->get_name();
  }
  return at;
}

bool looks_like_option(const std::string& word) {
  if (word.size() < 2 || word[0] != '-' || word == "--") return false;
  return !(std::isdigit(static_cast<unsigned char>(word[1])) || word[1] == '.');  // -1, -.5: a negative number
}

// A parse error's one line. Arguments CLI11 did not take are named, with the closest option or subcommand
// of the command they were given to; CLI11's own wording otherwise.
std::string parse_error_line(CLI::App& app, const CLI::ParseError& error) {
  const std::vector<std::string> unknown = app.remaining(/*recurse=*/true);
  std::string path;
  CLI::App* at = deepest_subcommand(app, path);
  const std::string where = path.empty() ? "" : path + ": ";
  std::vector<std::string> subcommands;
  for (const CLI::App* sub : at->get_subcommands({})) subcommands.push_back(sub->get_name());
  if (unknown.empty()) {
    if (error.get_name() != "RequiredError" || subcommands.empty()) return where + error.what();
    std::string list;
    for (const std::string& name : subcommands) list += (list.empty() ? "" : ", ") + name;
    return where + "a subcommand is required: " + list;  // `itertime`, `itertime model`
  }
  const auto positional =
      std::find_if(unknown.begin(), unknown.end(), [](const std::string& w) { return !looks_like_option(w); });
  if (!subcommands.empty() && positional != unknown.end()) {
    return where + "unknown subcommand '" + *positional + "'" + did_you_mean(closest(*positional, subcommands));
  }
  const auto option = std::find_if(unknown.begin(), unknown.end(), looks_like_option);
  if (option != unknown.end()) {
    const std::string typed = option->substr(0, option->find('='));  // --name=value
    std::vector<std::string> names;
    for (const CLI::Option* known : at->get_options()) {
      for (const std::string& name : known->get_lnames()) names.push_back("--" + name);
      for (const std::string& name : known->get_snames()) names.push_back("-" + name);
    }
    return where + "unknown option '" + typed + "'" + did_you_mean(closest(typed, names));
  }
  return where + "unexpected argument '" + unknown.front() + "'";
}

}  // namespace

int run_command_line(int argc, char** argv, const CalibrationVerbs& verbs) {
  CLI::App app{"itertime: predicts the iteration time of distributed LLaMA training (see docs/cli.md)", "itertime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("itertime ") + ITERTIME_VERSION_STRING);

  std::vector<std::pair<CLI::App*, Action>> actions;
  verbs.info(app, actions);
  register_model(app, actions);
  verbs.calibrate(app, actions);
  register_predict(app, actions);
  register_validate(app, actions);
  register_import(app, actions);
  register_plan(app, actions);
  register_published(app, actions);
  verbs.run(app, actions);
  register_inspect(app, actions);
  register_slurm(app, actions);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, exit status 2: a usage mistake is a user's mistake. Arguments CLI11 did not take are
    // named, with a suggestion (CLI11 checks "a subcommand is required" before it reports them, so
    // `itertime frobnicate` would not name the word otherwise).
    std::cerr << "itertime: error: " << one_line(parse_error_line(app, e)) << " (run with --help for usage)\n";
    return kExitUserError;
  }

  Context context;
  context.argc = argc;
  context.argv = argv;
  for (int i = 0; i < argc; ++i) context.command_line += (i ? " " : "") + std::string(argv[i]);

  for (auto& [command, action] : actions) {
    if (command->parsed()) return action(context);
  }
  std::cerr << "itertime: error: no subcommand chosen (run with --help)\n";
  return kExitUserError;
}

std::string one_line(const std::string& message) {
  std::string out;
  for (char c : message) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace itertime::launcher
