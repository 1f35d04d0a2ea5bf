// cmd_inspect.cpp: `itertime inspect FILE.h5`: provenance, tables and row counts of an itertime store,
// the ground-truth configurations per training recipe, and the node-pair links with their slow ones.
// Read-only: the file is opened with H5F_ACC_RDONLY and never changed.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/node_link_report.hpp"
#include "common/node_links_store.hpp"
#include "common/training_techniques.hpp"
#include "launcher/commands.hpp"

namespace itertime::launcher {
namespace {

// recipe_label of a stored recipe text; a text that is not a recipe is shown as it is, marked.
std::string label_of(const std::string& recipe) {
  try {
    return recipe_label(parse_recipe_text(recipe));
  } catch (const UserError&) {
    return "'" + recipe + "' (not a recipe)";
  }
}

// One line per recipe in /groundtruth/configs (plain first, then by name): configurations and statuses.
void print_groundtruth_recipes(h5::Store& store) {
  std::map<std::string, std::map<std::string, int>> statuses;  // recipe text -> status -> rows
  for (const store::GroundTruthRow& row : store::read_groundtruth_rows(store)) {
    ++statuses[h5::get_string(row.recipe)][h5::get_string(row.status)];
  }
  if (statuses.empty()) return;
  std::printf("\ngroundtruth configurations by recipe\n");
  for (const auto& [recipe, counts] : statuses) {
    int total = 0;
    std::string detail;
    for (const auto& [status, count] : counts) {
      total += count;
      detail += (detail.empty() ? "" : ", ") + std::to_string(count) + " " + status;
    }
    std::printf("  %-36s %10d rows  (%s)\n", label_of(recipe).c_str(), total, detail.c_str());
  }
}

// /comm/node_links, judged as `calibrate comm` judges it (common/node_link_report.hpp).
void print_node_links(h5::Store& store) {
  std::vector<LinkFigures> links;
  for (const store::NodeLinkRow& row : store::read_node_links(store)) {
    links.push_back({h5::get_string(row.host_a), h5::get_string(row.host_b), row.latency_us, row.bandwidth_GBps});
  }
  if (links.empty()) return;
  std::printf("\nnode links (%s)\n", store::kNodeLinksTable);
  for (const std::string& line : link_report_lines(links, judge_links(links), "  ")) std::printf("%s\n", line.c_str());
}

}  // namespace

void register_inspect(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* inspect = app.add_subcommand("inspect", "Summarize what an itertime HDF5 file holds (meta, tables, rows)");
  auto file = std::make_shared<std::string>();
  auto show_fields = std::make_shared<bool>(false);
  inspect->add_option("FILE", *file, "HDF5 file written by itertime")->required();
  inspect->add_flag("--fields", *show_fields, "Also list every table's fields");

  actions.emplace_back(inspect, [file, show_fields](Context&) {
    h5::Store store = h5::Store::open(*file, /*writable=*/false);
    std::printf("file %s (schema version %lld)\n", file->c_str(), static_cast<long long>(store.schema_version()));
    std::printf("\n/meta\n");
    for (const auto& [name, value] : store.meta()) std::printf("  %-20s %s\n", name.c_str(), value.c_str());
    const auto datasets = store.list_datasets();
    std::printf("\ntables\n");
    if (datasets.empty()) std::printf("  (none yet)\n");
    for (const auto& info : datasets) {
      std::printf("  %-36s %10zu rows  %s%s\n", info.path.c_str(), info.rows, info.element.c_str(),
                  info.fields.empty() ? "" : (" (" + std::to_string(info.fields.size()) + " fields)").c_str());
      if (*show_fields && !info.fields.empty()) {
        std::string line = "      ";
        for (std::size_t i = 0; i < info.fields.size(); ++i) line += (i ? ", " : "") + info.fields[i];
        std::printf("%s\n", line.c_str());
      }
    }
    print_groundtruth_recipes(store);
    print_node_links(store);
    return 0;
  });
}

}  // namespace itertime::launcher
