/* corrupt_allreduce: an LD_PRELOAD interposer (PMPI) for the end-to-end tests. It lets the first
 * MPI_Allreduce of MPI_FLOAT elements complete, then adds 5 to the last received element on one rank,
 * so that `itertime calibrate comm` sees a wrong result exactly as a faulty network or library would,
 * without any test hook in itertime itself. Every later call passes through untouched.
 *   ITERTIME_TEST_CORRUPT_RANK   world rank whose result is damaged (default 1)
 * Use: mpiexec -x LD_PRELOAD=.../libitertime_corrupt_allreduce.so ... itertime calibrate comm ... */
#include <mpi.h>
#include <stdlib.h>

static int corrupted_once = 0;

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  const int status = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  if (status != MPI_SUCCESS || corrupted_once || datatype != MPI_FLOAT || count <= 0) return status;
  corrupted_once = 1;
  const char* text = getenv("ITERTIME_TEST_CORRUPT_RANK");
  const int target = text ? atoi(text) : 1;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == target) ((float*)recvbuf)[count - 1] += 5.0f;
  return status;
}
