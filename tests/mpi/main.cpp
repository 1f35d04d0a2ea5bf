// main.cpp of itertime_mpi_tests: GoogleTest under MPI.
// Every rank runs every test in the same order (tests may therefore call collectives). Rank 0 prints
// with GoogleTest's default printer; other ranks print only their failures, prefixed with the rank.
// After each test the ranks agree on whether it failed anywhere, so rank 0 names tests that failed
// only on other ranks; the exit status is the maximum over ranks, identical on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "runtime/mpi_session.hpp"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
    std::fflush(stderr);
  }

 private:
  int rank_;
};

// Collective at the end of every test: tells rank 0 which ranks failed it.
class FailureAgreement : public ::testing::EmptyTestEventListener {
 public:
  explicit FailureAgreement(int rank) : rank_(rank) {}
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const int failed_here = info.result()->Failed() ? 1 : 0;
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Gather(&failed_here, 1, MPI_INT, rank_ == 0 ? receive_buffer(size) : nullptr, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank_ != 0) return;
    std::string ranks;
    for (int r = 0; r < size; ++r) {
      if (buffer_[static_cast<std::size_t>(r)] != 0) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    }
    if (!ranks.empty()) {
      failed_.push_back(std::string(info.test_suite_name()) + "." + info.name() + " on rank(s) " + ranks);
      std::printf("[  RANKS   ] %s\n", failed_.back().c_str());
      std::fflush(stdout);
    }
  }
  const std::vector<std::string>& failed() const { return failed_; }

 private:
  int* receive_buffer(int size) {
    buffer_.assign(static_cast<std::size_t>(size), 0);
    return buffer_.data();
  }
  int rank_;
  std::vector<int> buffer_;
  std::vector<std::string> failed_;
};

}  // namespace

int main(int argc, char** argv) {
  itertime::MpiSession session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = session.world_rank();

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  auto* agreement = new FailureAgreement(rank);  // owned by GoogleTest
  listeners.Append(agreement);

  const int local = RUN_ALL_TESTS();
  int combined = 0;
  MPI_Allreduce(&local, &combined, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("itertime_mpi_tests: %s on %d ranks\n", combined == 0 ? "PASSED" : "FAILED", session.world_size());
    for (const auto& line : agreement->failed()) std::printf("  failed: %s\n", line.c_str());
    std::fflush(stdout);
  }
  return combined;
}
