// NCCL backend of the communicator: every collective on device buffers, checked like the MPI backend.
// Runs only on ranks that see a CUDA device (one per rank, bound from the node-local rank); skips
// cleanly elsewhere (CPU machines, builds without CUDA). Registered with the CTest label `gpu`.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
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

// Started all-gathers (the trainer's overlapped parameter gather): each complete after its own wait, in
// any order; a second wait returns at once; finish_started() completes the rest.
TEST(NcclCommunicator, StartedAllGathersCompleteEachAtItsOwnWait) {
  if (!every_rank_has_a_device()) GTEST_SKIP() << "no CUDA device on every rank";
  bind_cuda_device(node_local_rank(MPI_COMM_WORLD));
  NcclCommunicator comm(MPI_COMM_WORLD);
  const std::vector<std::size_t> counts = {1, 1000, 70001};
  const auto n = static_cast<std::size_t>(comm.size());
  auto value = [](std::size_t k, std::size_t r, std::size_t i) {
    return static_cast<float>(k * 1000000 + r * 100000 + i % 99991);
  };
  std::vector<std::unique_ptr<CommBuffer>> send, recv;
  std::vector<std::size_t> ids;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    std::vector<float> host(counts[k]);
    for (std::size_t i = 0; i < counts[k]; ++i) host[i] = value(k, static_cast<std::size_t>(comm.rank()), i);
    send.push_back(comm.allocate(counts[k] * sizeof(float)));
    recv.push_back(comm.allocate(counts[k] * n * sizeof(float)));
    comm.copy_in(*send.back(), host.data(), counts[k] * sizeof(float));
    ids.push_back(comm.start_all_gather(send.back()->data(), recv.back()->data(), counts[k], DType::kFloat32));
  }
  auto check = [&](std::size_t k) {
    std::vector<float> host(counts[k] * n);
    comm.copy_out(host.data(), *recv[k], host.size() * sizeof(float));
    std::size_t errors = 0;
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < counts[k]; ++i) errors += host[r * counts[k] + i] != value(k, r, i);
    }
    EXPECT_EQ(errors, 0u) << "all-gather " << k;
  };
  comm.wait_started(ids[2]);
  check(2);
  comm.wait_started(ids[2]);
  comm.wait_started(ids[0]);
  check(0);
  comm.finish_started();
  check(1);
}

}  // namespace
}  // namespace itertime
