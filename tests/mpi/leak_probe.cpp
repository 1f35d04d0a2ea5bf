// leak_probe.cpp: a deliberately leaking MPI program for the sanitizer leg (issue 31): it creates a
// communicator, a group and a datatype the way itertime's code would and loses them. Run under
// LeakSanitizer with tests/sanitizers/lsan.supp it must be reported (the test expects the leak report
// through make_and_lose_handles); a suppression that names a whole library (libmpi.so) hid it.
#include <mpi.h>

namespace {
[[gnu::noinline]] void make_and_lose_handles() {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &group);
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(4, MPI_FLOAT, &type);
  MPI_Type_commit(&type);
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  make_and_lose_handles();
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
