// string_gather.cpp: see string_gather.hpp.
#include "runtime/string_gather.hpp"

#include "runtime/mpi_check.hpp"

namespace itertime {

std::vector<std::string> gather_strings(const std::string& text, MPI_Comm comm) {
  int rank = 0, size = 1;
  ITERTIME_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ITERTIME_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int length = static_cast<int>(text.size());
  std::vector<int> lengths(rank == 0 ? size : 0);
  ITERTIME_MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm));
  std::vector<int> offsets(lengths.size());
  int total = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  ITERTIME_MPI_CHECK(MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, comm));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < lengths.size(); ++i) out.push_back(all.substr(offsets[i], lengths[i]));
  return out;
}

}  // namespace itertime
