// MPI tests of ProcessGroups (common/mpi_session): for every factorization dp*tp*pp of the world size,
// the TP/DP/PP communicators have the right sizes, the group rank equals the coordinate index, and the
// members of each communicator (gathered over it) are exactly RankLayout's group of this rank; with
// context parallelism (cp 2, and cp = world) the CP and DP*CP communicators too.
// Every rank runs the same sequence of collectives: no ASSERT may skip one on a single rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "tests/mpi/world.hpp"
#include "common/errors.hpp"
#include "runtime/mpi_session.hpp"
#include "common/parallel_config.hpp"

namespace itertime {
namespace {

using mpi_test::world_rank;
using mpi_test::world_size;

std::vector<std::tuple<int, int, int>> factorizations(int n) {
  std::vector<std::tuple<int, int, int>> out;
  for (int dp = 1; dp <= n; ++dp) {
    for (int tp = 1; tp <= n; ++tp) {
      for (int pp = 1; pp <= n; ++pp) {
        if (dp * tp * pp == n) out.emplace_back(dp, tp, pp);
      }
    }
  }
  return out;
}

// World ranks of the members of `comm`, in the communicator's rank order (collective over `comm`).
std::vector<int> members(const MpiComm& comm) {
  const int me = world_rank();
  std::vector<int> out(static_cast<std::size_t>(comm.size()), -1);
  EXPECT_EQ(MPI_Allgather(&me, 1, MPI_INT, out.data(), 1, MPI_INT, comm.get()), MPI_SUCCESS);
  return out;
}

// True on every rank iff `ok` holds on every rank.
bool all_ranks(bool ok) {
  int value = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return value == 1;
}

TEST(MpiSession, WorldIsInitialized) {
  EXPECT_TRUE(MpiSession::initialized());
  EXPECT_GE(world_size(), 2) << "run through mpiexec with at least 2 ranks";
  EXPECT_FALSE(MpiSession::library_version().empty());
  const MpiComm world = MpiComm::world();
  EXPECT_EQ(world.get(), MPI_COMM_WORLD);
  EXPECT_EQ(world.size(), world_size());
  EXPECT_EQ(world.rank(), world_rank());
}

TEST(ProcessGroups, FactorizationsCoverTheWorld) {
  const auto all = factorizations(world_size());
  // 2 ranks: 3 ordered factorizations; 4 ranks: 6; 8 ranks: 10.
  if (world_size() == 2) {
    EXPECT_EQ(all.size(), 3u);
  }
  if (world_size() == 4) {
    EXPECT_EQ(all.size(), 6u);
  }
  if (world_size() == 8) {
    EXPECT_EQ(all.size(), 10u);
  }
}

TEST(ProcessGroups, EveryFactorizationOfTheWorld) {
  const int rank = world_rank();
  for (const auto& [dp, tp, pp] : factorizations(world_size())) {
    const std::string name = "dp" + std::to_string(dp) + " tp" + std::to_string(tp) + " pp" + std::to_string(pp);
    SCOPED_TRACE(name + " rank " + std::to_string(rank));
    const RankLayout layout(dp, tp, pp);
    const ProcessGroups groups(layout);
    const RankCoords expected = layout.coords(rank);
    EXPECT_EQ(groups.coords(), expected);
    EXPECT_EQ(groups.layout().world_size(), world_size());

    EXPECT_TRUE(groups.tp().valid());
    EXPECT_TRUE(groups.dp().valid());
    EXPECT_TRUE(groups.pp().valid());
    EXPECT_EQ(groups.tp().size(), tp);
    EXPECT_EQ(groups.dp().size(), dp);
    EXPECT_EQ(groups.pp().size(), pp);
    EXPECT_EQ(groups.tp().rank(), expected.tp_idx);
    EXPECT_EQ(groups.dp().rank(), expected.dp_idx);
    EXPECT_EQ(groups.pp().rank(), expected.pp_idx);

    EXPECT_EQ(members(groups.tp()), layout.tp_group(rank));
    EXPECT_EQ(members(groups.dp()), layout.dp_group(rank));
    EXPECT_EQ(members(groups.pp()), layout.pp_group(rank));

    // A reduction over each group sums exactly its members.
    for (const auto& [comm, group] :
         {std::make_pair(&groups.tp(), layout.tp_group(rank)), std::make_pair(&groups.dp(), layout.dp_group(rank)),
          std::make_pair(&groups.pp(), layout.pp_group(rank))}) {
      int sum = rank;
      EXPECT_EQ(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, comm->get()), MPI_SUCCESS);
      EXPECT_EQ(sum, std::accumulate(group.begin(), group.end(), 0));
    }
  }
}

// Every factorization dp*tp*pp*cp of the world with cp 2 (and cp = world size): the five groups'
// sizes, group ranks and members, and a reduction over each sums exactly its members.
TEST(ProcessGroups, ContextParallelFactorizations) {
  const int rank = world_rank();
  const int n = world_size();
  for (const int cp : {2, n}) {
    if (n % cp != 0 || (cp == n && cp == 2)) continue;
    for (const auto& [dp, tp, pp] : factorizations(n / cp)) {
      SCOPED_TRACE("dp" + std::to_string(dp) + " tp" + std::to_string(tp) + " pp" + std::to_string(pp) + " cp" +
                   std::to_string(cp) + " rank " + std::to_string(rank));
      const RankLayout layout(dp, tp, pp, cp);
      const ProcessGroups groups(layout);
      const RankCoords expected = layout.coords(rank);
      EXPECT_EQ(groups.coords(), expected);
      EXPECT_EQ(groups.cp().size(), cp);
      EXPECT_EQ(groups.cp().rank(), expected.cp_idx);
      EXPECT_EQ(groups.dp().size(), dp);
      EXPECT_EQ(groups.dp().rank(), expected.dp_idx);
      EXPECT_EQ(groups.dp_cp().size(), dp * cp);
      EXPECT_EQ(groups.dp_cp().rank(), expected.dp_idx * cp + expected.cp_idx);
      EXPECT_EQ(members(groups.tp()), layout.tp_group(rank));
      EXPECT_EQ(members(groups.cp()), layout.cp_group(rank));
      EXPECT_EQ(members(groups.dp()), layout.dp_group(rank));
      EXPECT_EQ(members(groups.pp()), layout.pp_group(rank));
      EXPECT_EQ(members(groups.dp_cp()), layout.dp_cp_group(rank));
      for (const auto& [comm, group] :
           {std::make_pair(&groups.cp(), layout.cp_group(rank)), std::make_pair(&groups.dp_cp(), layout.dp_cp_group(rank))}) {
        int sum = rank;
        EXPECT_EQ(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, comm->get()), MPI_SUCCESS);
        EXPECT_EQ(sum, std::accumulate(group.begin(), group.end(), 0));
      }
    }
  }
}

TEST(ProcessGroups, GroupsAreIndependentCommunicators) {
  // With dp = world size the TP and PP groups are singletons and DP is the whole world, but a copy:
  // freeing it (at scope exit) must leave MPI_COMM_WORLD usable.
  {
    const ProcessGroups groups(RankLayout(world_size(), 1, 1));
    EXPECT_EQ(groups.dp().size(), world_size());
    EXPECT_NE(groups.dp().get(), MPI_COMM_WORLD);
    EXPECT_EQ(groups.tp().size(), 1);
    EXPECT_EQ(groups.pp().size(), 1);
  }
  int value = 1;
  EXPECT_EQ(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(value, world_size());
}

TEST(ProcessGroups, WrongWorldSizeThrowsUserErrorOnEveryRank) {
  const int n = world_size();
  for (const RankLayout& layout : {RankLayout(n + 1, 1, 1), RankLayout(1, 2 * n, 1), RankLayout(1, 1, 1)}) {
    bool threw_user_error = false;
    std::string message;
    try {
      ProcessGroups groups(layout);
    } catch (const UserError& error) {
      threw_user_error = true;
      message = error.what();
    } catch (...) {
    }
    EXPECT_TRUE(threw_user_error);
    EXPECT_NE(message.find(std::to_string(layout.world_size()) + " ranks"), std::string::npos) << message;
    EXPECT_NE(message.find("has " + std::to_string(n)), std::string::npos) << message;
    EXPECT_TRUE(all_ranks(threw_user_error)) << "some rank did not refuse the layout";
  }
}

TEST(MpiComm, SplitAndMove) {
  const int rank = world_rank();
  MpiComm odd_even = MpiComm::split(MPI_COMM_WORLD, rank % 2, rank);
  EXPECT_TRUE(odd_even.valid());
  EXPECT_EQ(odd_even.rank(), rank / 2);
  EXPECT_EQ(odd_even.size(), (world_size() + 1 - rank % 2) / 2);
  MPI_Comm raw = odd_even.get();
  MpiComm moved(std::move(odd_even));
  EXPECT_FALSE(odd_even.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is part of the contract
  EXPECT_EQ(moved.get(), raw);
  MpiComm assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.get(), raw);
  EXPECT_EQ(assigned.size(), (world_size() + 1 - rank % 2) / 2);
  // MPI_UNDEFINED color gives no communicator.
  MpiComm none = MpiComm::split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0);
  EXPECT_EQ(none.valid(), rank == 0);
}

}  // namespace
}  // namespace itertime
