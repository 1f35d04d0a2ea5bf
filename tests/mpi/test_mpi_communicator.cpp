// MPI tests of MpiCommunicator (common/mpi_communicator) driven through the calibration plugins
// (calibrate/comm_collectives): every collective and dtype over MPI_COMM_WORLD, checked with
// fill_buffers/check_result on every rank; point-to-point between ranks 0 and 1, pairwise and ring
// exchanges; broadcast from a non-zero root; in-place all-reduce; int8 sums of large values; started
// (non-blocking) all-gathers waited for one by one, out of order.
//
// 16-bit float sums are checked numerically with non-integer values: rank r contributes
// x_r[i] = 0.1*(r+1) + i*1e-3, encoded in fp16/bf16. MPI may associate the n contributions in any
// order (ring, recursive doubling, a tree), and our MPI_Op rounds once per addition (float sum of two
// 16-bit values, which is exact, then one round-to-nearest-even). So:
//  - the result must be exactly the value of SOME bracketing of the n contributions with one rounding
//    per addition; we enumerate all bracketings (n <= 8) and require membership;
//  - bound against the sequential order ((x0+x1)+x2)+...: every bracketing has n-1 roundings of at most
//    half an ulp each, of partial sums no larger than the total (all values are positive), so each lies
//    within (n-1)/2 ulp of the exact total and any two differ by at most (n-1) ulp of the total's binade. With n = 2 there is one
//    rounding of an exact sum, so the result is bit-identical to the sequential one. (For n = 4 this is not 1 ulp: with these
//    very inputs some bracketings lie 2 ulp from the sequential order.)
//  - all_reduce results are bit-identical on every rank.
// Every rank runs the same sequence of collectives: no ASSERT may skip one on a single rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "commbench/comm_collectives.hpp"
#include "common/half.hpp"
#include "runtime/job_abort.hpp"
#include "runtime/mpi_communicator.hpp"
#include "runtime/mpi_session.hpp"

namespace itertime::calibrate {
namespace {

using Bytes = std::vector<uint8_t>;

const std::vector<DType>& tested_dtypes() {
  static const std::vector<DType> kAll = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                                          DType::kFloat64, DType::kInt32,   DType::kInt64};
  return kAll;
}

std::string label(Collective c, DType dtype, std::size_t count) {
  return to_string(c) + " " + to_string(dtype) + " count " + std::to_string(count);
}

// One call of `c` through run_collective on `comm` with buffers from fill_buffers; returns the
// receive buffer's host copy.
Bytes run_point(Communicator& comm, Collective c, DType dtype, std::size_t count) {
  Bytes send_host, recv_host;
  fill_buffers(c, dtype, comm.rank(), comm.size(), count, send_host, recv_host);
  auto send = comm.allocate(std::max<std::size_t>(send_host.size(), 1));
  auto recv = comm.allocate(recv_host.size());
  comm.copy_in(*send, send_host.data(), send_host.size());
  comm.copy_in(*recv, recv_host.data(), recv_host.size());
  run_collective(c, comm, send->data(), recv->data(), count, dtype);
  comm.synchronize();
  comm.copy_out(recv_host.data(), *recv, recv_host.size());
  return recv_host;
}

// Counts below, at and above typical eager/segment limits (70001 fp32 = 280 KB per rank).
const std::size_t kCounts[] = {1, 7, 1000, 70001};

TEST(MpiCommunicator, Identity) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(comm.rank(), rank);
  EXPECT_EQ(comm.size(), size);
  EXPECT_EQ(comm.name(), "mpi");
  EXPECT_EQ(comm.backend(), Backend::kCpu);
  EXPECT_EQ(comm.comm(), MPI_COMM_WORLD);
  auto buffer = comm.allocate(24);
  EXPECT_EQ(buffer->bytes(), 24u);
  EXPECT_NE(comm.allocate(0)->data(), nullptr);
}

TEST(MpiCommunicator, EveryCollectiveAndDtypeOverTheWorld) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter, Collective::kBroadcast,
                       Collective::kAllToAll}) {
    for (DType dtype : tested_dtypes()) {
      for (std::size_t count : kCounts) {
        const Bytes recv = run_point(comm, c, dtype, count);
        const CheckResult result = check_result(c, dtype, comm.rank(), comm.size(), count, recv);
        EXPECT_EQ(result.errors, 0u) << label(c, dtype, count) << ": " << result.first_error;
      }
    }
  }
}

TEST(MpiCommunicator, SendAndRecvBetweenRanksZeroAndOne) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (DType dtype : tested_dtypes()) {
    for (std::size_t count : kCounts) {
      Bytes send_host, recv_host;
      // Group-of-2 semantics of the `send` plugin: rank 0 sends its pattern, rank 1 receives it.
      const int pair_rank = comm.rank() <= 1 ? comm.rank() : 0;
      fill_buffers(Collective::kSend, dtype, pair_rank, 2, count, send_host, recv_host);
      auto send = comm.allocate(send_host.size());
      auto recv = comm.allocate(recv_host.size());
      comm.copy_in(*send, send_host.data(), send_host.size());
      comm.copy_in(*recv, recv_host.data(), recv_host.size());
      if (comm.rank() == 0) comm.send(send->data(), count, dtype, 1);
      if (comm.rank() == 1) comm.recv(recv->data(), count, dtype, 0);
      comm.synchronize();
      comm.copy_out(recv_host.data(), *recv, recv_host.size());
      if (comm.rank() == 1) {
        const CheckResult result = check_result(Collective::kSend, dtype, 1, 2, count, recv_host);
        EXPECT_EQ(result.errors, 0u) << label(Collective::kSend, dtype, count) << ": " << result.first_error;
      }
      if (comm.rank() >= 2) {
        // Bystanders' buffers are untouched (still the initial 7s): a mis-addressed message would show.
        EXPECT_EQ(check_result(Collective::kSend, dtype, 1, 2, count, recv_host).errors, count);
      }
      comm.barrier();
    }
  }
}

TEST(MpiCommunicator, SendRecvExchangesWithinPairs) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  ASSERT_EQ(comm.size() % 2, 0) << "run at an even number of ranks";
  const int peer = comm.rank() ^ 1;
  const int pair_rank = comm.rank() & 1;
  for (DType dtype : tested_dtypes()) {
    for (std::size_t count : kCounts) {
      Bytes send_host, recv_host;
      fill_buffers(Collective::kSendRecv, dtype, pair_rank, 2, count, send_host, recv_host);
      auto send = comm.allocate(send_host.size());
      auto recv = comm.allocate(recv_host.size());
      comm.copy_in(*send, send_host.data(), send_host.size());
      comm.copy_in(*recv, recv_host.data(), recv_host.size());
      comm.send_recv(send->data(), peer, recv->data(), peer, count, dtype);
      comm.copy_out(recv_host.data(), *recv, recv_host.size());
      const CheckResult result = check_result(Collective::kSendRecv, dtype, pair_rank, 2, count, recv_host);
      EXPECT_EQ(result.errors, 0u) << label(Collective::kSendRecv, dtype, count) << ": " << result.first_error;
    }
  }
}

TEST(MpiCommunicator, SendRecvRingWithDistinctPeers) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const int next = (comm.rank() + 1) % n;
  const int prev = (comm.rank() + n - 1) % n;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8}) {
    const std::size_t count = 1001;
    const std::size_t e = dtype_bytes(dtype);
    Bytes send_host(count * e), recv_host(count * e, 0);
    // Rank r sends 10*r + (i % 7): the receiver can tell exactly whom it heard from.
    for (std::size_t i = 0; i < count; ++i)
      encode_value(dtype, 10.0 * comm.rank() + static_cast<double>(i % 7), &send_host[i * e]);
    comm.send_recv(send_host.data(), next, recv_host.data(), prev, count, dtype);
    std::size_t errors = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (decode_value(dtype, &recv_host[i * e]) != 10.0 * prev + static_cast<double>(i % 7)) ++errors;
    }
    EXPECT_EQ(errors, 0u) << to_string(dtype);
  }
}

TEST(MpiCommunicator, PointToPointPluginsOnPairCommunicators) {
  // As `itertime calibrate comm` runs them: pairs {0,1}, {2,3}, ... split from the world.
  const int rank = MpiComm::world().rank();
  MpiComm pair = MpiComm::split(MPI_COMM_WORLD, rank / 2, rank % 2);
  MpiCommunicator comm(pair.get());
  ASSERT_EQ(comm.size(), 2);
  for (Collective c : {Collective::kSend, Collective::kSendRecv}) {
    for (DType dtype : tested_dtypes()) {
      for (std::size_t count : kCounts) {
        const Bytes recv = run_point(comm, c, dtype, count);
        const CheckResult result = check_result(c, dtype, comm.rank(), 2, count, recv);
        EXPECT_EQ(result.errors, 0u) << label(c, dtype, count) << ": " << result.first_error;
      }
    }
  }
}

TEST(MpiCommunicator, BroadcastFromTheLastRank) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int root = comm.size() - 1;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8}) {
    const std::size_t count = 513;
    const std::size_t e = dtype_bytes(dtype);
    Bytes buffer(count * e);
    for (std::size_t i = 0; i < count; ++i) {
      encode_value(dtype, comm.rank() == root ? static_cast<double>(i % 5) - 2.0 : 9.0, &buffer[i * e]);
    }
    comm.broadcast(buffer.data(), count, dtype, root);
    std::size_t errors = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (decode_value(dtype, &buffer[i * e]) != static_cast<double>(i % 5) - 2.0) ++errors;
    }
    EXPECT_EQ(errors, 0u) << to_string(dtype);
  }
}

TEST(MpiCommunicator, InPlaceAllReduce) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (DType dtype : tested_dtypes()) {
    for (std::size_t count : kCounts) {
      Bytes send_host, recv_host;
      fill_buffers(Collective::kAllReduce, dtype, comm.rank(), comm.size(), count, send_host, recv_host);
      comm.all_reduce_sum(send_host.data(), send_host.data(), count, dtype);  // send == recv: MPI_IN_PLACE
      const CheckResult result = check_result(Collective::kAllReduce, dtype, comm.rank(), comm.size(), count, send_host);
      EXPECT_EQ(result.errors, 0u) << label(Collective::kAllReduce, dtype, count) << ": " << result.first_error;
    }
  }
}

TEST(MpiCommunicator, Int8SumsOfLargeValuesWithinRange) {
  // Magnitudes far beyond the {-1, 0, 1} of the calibration pattern, sums still inside [-128, 127]:
  // exact. (What happens on overflow is the MPI library's choice: Open MPI 4.1's AVX op component
  // saturates instead of wrapping, open-mpi/ompi#8045, so no test relies on either.)
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const int share = 127 / n;       // 63 at 2 ranks, 31 at 4
  const std::size_t count = 1000;  // long enough for vectorized reduction kernels
  std::vector<int8_t> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<int8_t>((i % 2 ? -1 : 1) * (share - static_cast<int>(i % 3)));
  comm.all_reduce_sum(values.data(), values.data(), count, DType::kInt8);
  std::size_t errors = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const int want = n * (i % 2 ? -1 : 1) * (share - static_cast<int>(i % 3));
    errors += values[i] != want;
  }
  EXPECT_EQ(errors, 0u);
}

// ---- started all-gathers (the trainer's overlapped parameter gather) --------------------------

// What rank r sends in all-gather k: distinct per (k, r, i), exact in float32.
float gathered_value(std::size_t k, int r, std::size_t i) { return static_cast<float>(k * 1000000 + r * 100000 + i % 99991); }

// Every started all-gather's receive buffer is complete after its own wait, in any order of waits (the
// reverse of the starts, then interleaved), while the others are still pending; a second wait of an id
// returns at once; finish_started() completes the rest; ids grow by one per start. With a JobAbort set
// (no raise) the same waits go through it. Sizes from one element to above the eager limit.
void check_started_all_gathers(MpiCommunicator& comm) {
  const int n = comm.size();
  const std::vector<std::size_t> counts = {1, 7, 1000, 70001, 3};
  std::vector<std::vector<float>> send(counts.size()), recv(counts.size());
  std::vector<std::size_t> ids;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    send[k].resize(counts[k]);
    for (std::size_t i = 0; i < counts[k]; ++i) send[k][i] = gathered_value(k, comm.rank(), i);
    recv[k].assign(counts[k] * static_cast<std::size_t>(n), -1.0f);
    ids.push_back(comm.start_all_gather(send[k].data(), recv[k].data(), counts[k], DType::kFloat32));
    if (k > 0) {
      EXPECT_EQ(ids[k], ids[k - 1] + 1);
    }
  }
  auto check = [&](std::size_t k) {
    std::size_t errors = 0;
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < counts[k]; ++i)
        errors += recv[k][static_cast<std::size_t>(r) * counts[k] + i] != gathered_value(k, r, i);
    }
    EXPECT_EQ(errors, 0u) << "all-gather " << k << " of " << counts[k] << " elements";
  };
  // Out of order: 3, then 1 (progress between), 1 again, 4; then 0 and 2 by finish_started().
  comm.wait_started(ids[3]);
  check(3);
  comm.progress();
  comm.wait_started(ids[1]);
  check(1);
  comm.wait_started(ids[1]);  // waited for already
  comm.wait_started(ids[4]);
  check(4);
  comm.finish_started();
  check(0);
  check(2);
  comm.wait_started(ids[0]);  // finished by finish_started()
}

TEST(MpiCommunicator, StartedAllGathersCompleteEachAtItsOwnWaitInAnyOrder) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  check_started_all_gathers(comm);
  check_started_all_gathers(comm);  // ids go on
  JobAbort abort(MPI_COMM_WORLD);
  comm.set_abort(&abort);
  check_started_all_gathers(comm);
  comm.set_abort(nullptr);
}

// A started all-gather of 16-bit elements (bf16 parameters) moves the bits unchanged.
TEST(MpiCommunicator, StartedAllGatherOfBf16IsExact) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const std::size_t count = 513;
  std::vector<uint16_t> send(count), recv(count * static_cast<std::size_t>(comm.size()), 0);
  for (std::size_t i = 0; i < count; ++i) send[i] = static_cast<uint16_t>(comm.rank() * 1000 + i);
  const std::size_t id = comm.start_all_gather(send.data(), recv.data(), count, DType::kBFloat16);
  comm.wait_started(id);
  std::size_t errors = 0;
  for (int r = 0; r < comm.size(); ++r) {
    for (std::size_t i = 0; i < count; ++i) errors += recv[static_cast<std::size_t>(r) * count + i] != r * 1000 + i;
  }
  EXPECT_EQ(errors, 0u);
}

// ---- 16-bit float sums with non-integer values ------------------------------------------------

struct Half16 {
  DType dtype;
  float (*decode)(uint16_t);
  uint16_t (*encode)(float);
};

const Half16 kFp16{DType::kFloat16, &fp16_to_float, &float_to_fp16};
const Half16 kBf16{DType::kBFloat16, &bf16_to_float, &float_to_bf16};

uint16_t contribution(const Half16& h, int rank, std::size_t index) {
  return h.encode(static_cast<float>(0.1 * (rank + 1) + static_cast<double>(index) * 1e-3));
}

uint16_t add16(const Half16& h, uint16_t a, uint16_t b) { return h.encode(h.decode(a) + h.decode(b)); }

// ((x0 + x1) + x2) + ..., one rounding per addition.
uint16_t sequential_sum(const Half16& h, const std::vector<uint16_t>& x) {
  uint16_t sum = x[0];
  for (std::size_t k = 1; k < x.size(); ++k) sum = add16(h, sum, x[k]);
  return sum;
}

// Every value any bracketing of the leaves can produce with one rounding per addition.
std::set<uint16_t> all_bracketings(const Half16& h, const std::vector<uint16_t>& leaves) {
  const unsigned full = (1u << leaves.size()) - 1;
  std::vector<std::set<uint16_t>> memo(full + 1);
  std::function<const std::set<uint16_t>&(unsigned)> of = [&](unsigned mask) -> const std::set<uint16_t>& {
    std::set<uint16_t>& out = memo[mask];
    if (!out.empty()) return out;
    if ((mask & (mask - 1)) == 0) {
      out.insert(leaves[static_cast<std::size_t>(__builtin_ctz(mask))]);
      return out;
    }
    const unsigned lowest = mask & (~mask + 1);
    for (unsigned a = (mask - 1) & mask; a != 0; a = (a - 1) & mask) {
      if (!(a & lowest)) continue;  // each split once
      const std::set<uint16_t>& left = of(a);
      const std::set<uint16_t>& right = of(mask & ~a);
      for (uint16_t x : left) {
        for (uint16_t y : right) out.insert(add16(h, x, y));
      }
    }
    return out;
  };
  return of(full);
}

// |value - reference| in ulps of the 16-bit grid at the exact sum of the leaves (the ulp above its
// rounded value): no partial sum of positive leaves lies in a higher binade, so this is the unit of the
// (n-1)-ulp bound.
double ulps_apart(const Half16& h, uint16_t value, uint16_t reference, const std::vector<uint16_t>& leaves) {
  double exact = 0;
  for (uint16_t leaf : leaves) exact += h.decode(leaf);
  const uint16_t grid = h.encode(static_cast<float>(exact));
  const double ulp = static_cast<double>(h.decode(static_cast<uint16_t>(grid + 1))) - h.decode(grid);
  return std::fabs(static_cast<double>(h.decode(value)) - h.decode(reference)) / ulp;
}

struct SumReport {
  std::size_t not_a_bracketing = 0;
  std::size_t beyond_bound = 0;
  std::size_t differs_from_sequential = 0;
  double worst_ulps = 0;
  std::string first;
};

void judge(const Half16& h, const std::vector<uint16_t>& leaves, uint16_t got, std::size_t index, SumReport& report) {
  const uint16_t sequential = sequential_sum(h, leaves);
  const std::set<uint16_t> possible = all_bracketings(h, leaves);
  const double ulps = ulps_apart(h, got, sequential, leaves);
  const double bound = static_cast<double>(leaves.size()) - 1.0;  // (n-1) ulp; 0 for n = 2 (see the top)
  report.worst_ulps = std::max(report.worst_ulps, ulps);
  const bool member = possible.count(got) != 0;
  const bool within = leaves.size() == 2 ? got == sequential : ulps <= bound;
  if (got != sequential) ++report.differs_from_sequential;
  if (!member) ++report.not_a_bracketing;
  if (!within) ++report.beyond_bound;
  if ((!member || !within) && report.first.empty()) {
    report.first = "element " + std::to_string(index) + ": got " + std::to_string(h.decode(got)) + ", sequential " +
                   std::to_string(h.decode(sequential)) + " (" + std::to_string(ulps) + " ulp)";
  }
}

void check_all_reduce_16(const Half16& h) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const std::size_t count = 3000;  // 6 KB: MPI splits larger reductions into segments
  std::vector<uint16_t> send(count), recv(count, 0);
  for (std::size_t i = 0; i < count; ++i) send[i] = contribution(h, comm.rank(), i);
  comm.all_reduce_sum(send.data(), recv.data(), count, h.dtype);

  SumReport report;
  std::vector<uint16_t> leaves(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < count; ++i) {
    for (int r = 0; r < n; ++r) leaves[static_cast<std::size_t>(r)] = contribution(h, r, i);
    judge(h, leaves, recv[i], i, report);
  }
  EXPECT_EQ(report.not_a_bracketing, 0u) << to_string(h.dtype) << " all_reduce: " << report.first;
  EXPECT_EQ(report.beyond_bound, 0u) << to_string(h.dtype) << " all_reduce: " << report.first;
  if (n == 2) {
    EXPECT_EQ(report.differs_from_sequential, 0u);
  }
  if (comm.rank() == 0) {
    std::printf("[ info     ] %s all_reduce on %d ranks: %zu of %zu elements differ from the sequential order, worst %.0f ulp\n",
                to_string(h.dtype).c_str(), n, report.differs_from_sequential, count, report.worst_ulps);
  }

  // The inputs do exercise rounding: somewhere the 16-bit sum differs from the exact sum of the inputs.
  double exact_error = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double exact = 0;
    for (int r = 0; r < n; ++r) exact += h.decode(contribution(h, r, i));
    exact_error = std::max(exact_error, std::fabs(exact - h.decode(recv[i])));
  }
  EXPECT_GT(exact_error, 0.0) << "16-bit sums rounded nowhere: the inputs are not testing rounding";

  // Bit-identical on every rank.
  std::vector<uint16_t> root(recv);
  MPI_Bcast(root.data(), static_cast<int>(count), MPI_UINT16_T, 0, MPI_COMM_WORLD);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < count; ++i) differ += root[i] != recv[i];
  EXPECT_EQ(differ, 0u) << to_string(h.dtype) << " all_reduce differs from rank 0's on rank " << comm.rank();
}

void check_reduce_scatter_16(const Half16& h) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size();
  const std::size_t count = 1000;
  const auto N = static_cast<std::size_t>(n);
  std::vector<uint16_t> send(count * N), recv(count, 0);
  for (std::size_t j = 0; j < count * N; ++j) send[j] = contribution(h, comm.rank(), j);
  comm.reduce_scatter_sum(send.data(), recv.data(), count, h.dtype);

  SumReport report;
  std::vector<uint16_t> leaves(N);
  const std::size_t block = static_cast<std::size_t>(comm.rank()) * count;
  for (std::size_t i = 0; i < count; ++i) {
    for (int r = 0; r < n; ++r) leaves[static_cast<std::size_t>(r)] = contribution(h, r, block + i);
    judge(h, leaves, recv[i], i, report);
  }
  EXPECT_EQ(report.not_a_bracketing, 0u) << to_string(h.dtype) << " reduce_scatter: " << report.first;
  EXPECT_EQ(report.beyond_bound, 0u) << to_string(h.dtype) << " reduce_scatter: " << report.first;
  if (n == 2) {
    EXPECT_EQ(report.differs_from_sequential, 0u);
  }
}

TEST(MpiCommunicator16, Fp16AllReduceOfNonIntegers) { check_all_reduce_16(kFp16); }
TEST(MpiCommunicator16, Bf16AllReduceOfNonIntegers) { check_all_reduce_16(kBf16); }
TEST(MpiCommunicator16, Bf16ReduceScatterOfNonIntegers) { check_reduce_scatter_16(kBf16); }
TEST(MpiCommunicator16, Fp16ReduceScatterOfNonIntegers) { check_reduce_scatter_16(kFp16); }

TEST(MpiCommunicator16, BracketingModelIsNotVacuous) {
  // The membership check above would accept anything if the model produced every value: for these
  // inputs at 4 ranks the bracketings give few distinct values, and never a neighbour 3 ulp away.
  for (const Half16* h : {&kFp16, &kBf16}) {
    std::size_t largest = 0;
    for (std::size_t i = 0; i < 3000; ++i) {
      std::vector<uint16_t> leaves;
      for (int r = 0; r < 4; ++r) leaves.push_back(contribution(*h, r, i));
      const auto possible = all_bracketings(*h, leaves);
      largest = std::max(largest, possible.size());
      const uint16_t sequential = sequential_sum(*h, leaves);
      EXPECT_TRUE(possible.count(sequential)) << i;
      EXPECT_FALSE(possible.count(static_cast<uint16_t>(sequential + 3))) << i;
    }
    EXPECT_LE(largest, 3u) << to_string(h->dtype);
    // Two leaves: one value, the sequential sum.
    const std::vector<uint16_t> two = {contribution(*h, 0, 5), contribution(*h, 1, 5)};
    EXPECT_EQ(all_bracketings(*h, two), (std::set<uint16_t>{sequential_sum(*h, two)}));
  }
}

}  // namespace
}  // namespace itertime::calibrate
