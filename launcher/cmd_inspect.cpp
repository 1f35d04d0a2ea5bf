// cmd_inspect.cpp: `itertime inspect FILE.h5`: provenance, tables and row counts of an itertime store.
// Read-only: the file is opened with H5F_ACC_RDONLY and never changed.
#include <cstdio>
#include <string>

#include "common/h5store.hpp"
#include "launcher/commands.hpp"

namespace itertime::launcher {

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
    return 0;
  });
}

}  // namespace itertime::launcher
