// MPI tests of detect_nodes (common/mpi_session): under mpiexec on one machine every rank is on node 0,
// local ranks are 0..n-1 and agree with the world ranks, and all ranks see the same picture.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/mpi_session.hpp"

namespace itertime {
namespace {

TEST(DetectNodes, SingleMachine) {
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  const NodeInfo info = detect_nodes();
  EXPECT_EQ(info.num_nodes, 1);
  EXPECT_EQ(info.node_index, 0);
  EXPECT_EQ(info.local_size, size);
  EXPECT_EQ(info.local_rank, rank) << "on one node the local rank follows the world rank";
  EXPECT_EQ(info.node_of_rank, std::vector<int>(static_cast<std::size_t>(size), 0));

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(info.hostname, std::string(host));
  EXPECT_EQ(info.hostnames, std::vector<std::string>{std::string(host)});

  // Gather every rank's local rank: exactly 0 .. n-1.
  std::vector<int> local_ranks(static_cast<std::size_t>(size), -1);
  MPI_Allgather(&info.local_rank, 1, MPI_INT, local_ranks.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> expected(static_cast<std::size_t>(size));
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(local_ranks, expected);
}

TEST(DetectNodes, RepeatableAndCollective) {
  // Called twice in a row (communicators are freed in between), the answer is the same.
  const NodeInfo first = detect_nodes();
  const NodeInfo second = detect_nodes();
  EXPECT_EQ(first.node_of_rank, second.node_of_rank);
  EXPECT_EQ(first.local_rank, second.local_rank);
  EXPECT_EQ(first.hostnames, second.hostnames);
}

}  // namespace
}  // namespace itertime
