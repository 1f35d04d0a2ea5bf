// mpi_check.hpp: ITERTIME_MPI_CHECK(call), for the runtime's MPI calls. Invariant: a call that returns
// anything but MPI_SUCCESS throws InternalError naming the call, MPI's own message, file and line (the
// session's handler then aborts every rank). Private to runtime/: include it from .cpp files only.
#pragma once

#include <mpi.h>

#include <string>

#include "common/errors.hpp"

#define ITERTIME_MPI_CHECK(call)                                                                            \
  do {                                                                                                      \
    const int mpi_status_ = (call);                                                                         \
    if (mpi_status_ != MPI_SUCCESS) {                                                                       \
      char mpi_message_[MPI_MAX_ERROR_STRING];                                                              \
      int mpi_length_ = 0;                                                                                  \
      MPI_Error_string(mpi_status_, mpi_message_, &mpi_length_);                                            \
      throw ::itertime::InternalError(std::string(#call) + " failed: " + mpi_message_, __FILE__, __LINE__); \
    }                                                                                                       \
  } while (0)
