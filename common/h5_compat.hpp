// h5_compat.hpp: the one place where HDF5 version differences live (Debian 12's 1.10, Debian 13's 1.14).
// Invariants: every HDF5 call whose signature changed between 1.10 and 1.12+ goes through a function
// here, selected by H5_VERSION_GE at compile time; callers never test HDF5 versions themselves.
#pragma once

#include <H5Cpp.h>

#include <optional>

namespace itertime::h5compat {

// The type of the object at `name` below `location` (H5O_TYPE_GROUP, ...), or nullopt when it cannot be
// read. HDF5 1.12 added a `fields` argument to H5Oget_info_by_name (and made the 1.10 form
// H5Oget_info_by_name1); asking for the basic fields only keeps the call cheap on both.
inline std::optional<H5O_type_t> object_type(hid_t location, const char* name) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info{};
  if (H5Oget_info_by_name3(location, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return std::nullopt;
#else
  H5O_info_t info{};
  if (H5Oget_info_by_name(location, name, &info, H5P_DEFAULT) < 0) return std::nullopt;
#endif
  return info.type;
}

// Asks HDF5 not to take its flock(2) on the file for this access list (readers beside a writer). HDF5
// 1.10.7 and 1.12.1 added H5Pset_file_locking; before them only HDF5_USE_FILE_LOCKING=FALSE in the
// environment does it, so this returns false and the reader takes the shared lock as before.
inline bool disable_file_locking(hid_t access_list) {
#if H5_VERSION_GE(1, 10, 7)
  return H5Pset_file_locking(access_list, false, true) >= 0;
#else
  (void)access_list;
  return false;
#endif
}

}  // namespace itertime::h5compat
