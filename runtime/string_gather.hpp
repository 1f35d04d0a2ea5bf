// string_gather.hpp: every rank's text on rank 0, for records of varying length (a rank's series of
// measurement windows) that rank 0 alone writes.
// Invariants: collective over `comm`; rank order kept; ranks other than 0 get an empty vector.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace itertime {

std::vector<std::string> gather_strings(const std::string& text, MPI_Comm comm);

}  // namespace itertime
