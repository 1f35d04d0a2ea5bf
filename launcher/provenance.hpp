// provenance.hpp: the /meta attributes every file itertime creates carries (docs/schema.md).
// Collective over MPI_COMM_WORLD (hostnames are gathered).
#pragma once

#include <map>
#include <string>

namespace itertime::launcher {

std::map<std::string, std::string> collect_provenance(const std::string& command_line, const std::string& backend);

}  // namespace itertime::launcher
