// build_info.hpp: what this itertime binary was built with, for `itertime info` and /meta provenance.
// Invariants: values are fixed at build time, except the runtime library versions (HDF5, MPI) which are
// asked of the loaded libraries.
#pragma once

#include <string>

namespace itertime {

struct BuildInfo {
  std::string itertime_version;
  std::string git_revision;
  std::string build_type;
  std::string compiler;
  bool with_cuda = false;
  bool with_nccl = false;
  bool with_torch = false;
  std::string hdf5_version;  // runtime library
};

BuildInfo build_info();
std::string utc_timestamp();  // ISO 8601, e.g. 2026-11-29T10:08:47Z

}  // namespace itertime
