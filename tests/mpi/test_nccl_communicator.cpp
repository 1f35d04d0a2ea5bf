// NCCL backend of the communicator: every collective on device buffers, checked like the MPI backend.
// Runs only on ranks that see a CUDA device (one per rank, bound from the node-local rank); skips
// cleanly elsewhere (CPU machines, builds without CUDA). Registered with the CTest label `gpu`.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "commbench/comm_collectives.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/nccl_communicator.hpp"

namespace itertime {
namespace {

bool every_rank_has_a_device() {
  int local = cuda_device_available() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &local, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return local == 1;
}

TEST(NcclCommunicator, EveryCollectiveAndDtypeIsRight) {
  if (!every_rank_has_a_device()) GTEST_SKIP() << "no CUDA device on every rank";
  bind_cuda_device(node_local_rank(MPI_COMM_WORLD));
  NcclCommunicator comm(MPI_COMM_WORLD);
  for (calibrate::Collective collective : calibrate::all_collectives()) {
    if (calibrate::is_point_to_point(collective) && comm.size() != 2) continue;
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8}) {
      const std::size_t count = 1000;
      std::vector<uint8_t> send_host, recv_host;
      calibrate::fill_buffers(collective, dtype, comm.rank(), comm.size(), count, send_host, recv_host);
      auto send = comm.allocate(std::max<std::size_t>(send_host.size(), 1));
      auto recv = comm.allocate(recv_host.size());
      comm.copy_in(*send, send_host.data(), send_host.size());
      comm.copy_in(*recv, recv_host.data(), recv_host.size());
      calibrate::run_collective(collective, comm, send->data(), recv->data(), count, dtype);
      comm.synchronize();
      comm.copy_out(recv_host.data(), *recv, recv_host.size());
      const auto check = calibrate::check_result(collective, dtype, comm.rank(), comm.size(), count, recv_host);
      EXPECT_EQ(check.errors, 0u) << to_string(collective) << " " << to_string(dtype) << ": " << check.first_error;
    }
  }
}

}  // namespace
}  // namespace itertime
