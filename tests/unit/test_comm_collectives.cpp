// Unit tests of calibrate/comm_collectives: bus-bandwidth factors, the nccl-tests size conventions,
// buffer sizes, and fill_buffers/check_result. Every collective is simulated in-process for every rank
// of a group: an independent model of what each receive buffer must hold after the call is computed
// from the filled send buffers, and check_result must accept it on every rank; untouched buffers, a
// single corrupted element and wrongly ordered blocks must be caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "commbench/comm_collectives.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"

namespace itertime::calibrate {
namespace {

using Buffer = std::vector<uint8_t>;

const std::vector<DType>& numeric_dtypes() {
  static const std::vector<DType> kAll = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                                          DType::kFloat64, DType::kInt32,   DType::kInt64};
  return kAll;
}

// Element codec written independently of encode_value/decode_value (only half.hpp is shared, and it
// has its own exhaustive tests).
double read_element(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return fp16_to_float(v);
    }
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return bf16_to_float(v);
    }
    case DType::kInt8: return static_cast<int8_t>(*p);
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kBool: return *p;
  }
  return 0;
}

void write_element(DType dtype, double value, uint8_t* p) {
  switch (dtype) {
    case DType::kFloat32: {
      const auto v = static_cast<float>(value);
      std::memcpy(p, &v, 4);
      return;
    }
    case DType::kFloat64: std::memcpy(p, &value, 8); return;
    case DType::kFloat16: {
      const uint16_t v = float_to_fp16(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      return;
    }
    case DType::kBFloat16: {
      const uint16_t v = float_to_bf16(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      return;
    }
    case DType::kInt8: {
      const auto v = static_cast<int8_t>(value);
      std::memcpy(p, &v, 1);
      return;
    }
    case DType::kInt32: {
      const auto v = static_cast<int32_t>(value);
      std::memcpy(p, &v, 4);
      return;
    }
    case DType::kInt64: {
      const auto v = static_cast<int64_t>(value);
      std::memcpy(p, &v, 8);
      return;
    }
    case DType::kBool: *p = value != 0; return;
  }
}

// Copies element `from_index` of `from` to element `to_index` of `to`.
void copy_element(DType dtype, const Buffer& from, std::size_t from_index, Buffer& to, std::size_t to_index) {
  const std::size_t e = dtype_bytes(dtype);
  ASSERT_LE((from_index + 1) * e, from.size());
  ASSERT_LE((to_index + 1) * e, to.size());
  std::memcpy(&to[to_index * e], &from[from_index * e], e);
}

struct Group {
  std::vector<Buffer> send, recv;
};

Group fill_group(Collective c, DType dtype, int n, std::size_t count) {
  Group g;
  g.send.resize(static_cast<std::size_t>(n));
  g.recv.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    fill_buffers(c, dtype, r, n, count, g.send[static_cast<std::size_t>(r)], g.recv[static_cast<std::size_t>(r)]);
  return g;
}

// What the call does, element by element, per the Communicator contract (runtime/comm.hpp): sums for
// the reductions, block copies for the rest; broadcast from root 0 in place in the receive buffer;
// send from group rank 0 to 1; sendrecv exchanges within the pair.
void simulate(Collective c, DType dtype, int n, std::size_t count, Group& g) {
  const auto N = static_cast<std::size_t>(n);
  const std::size_t e = dtype_bytes(dtype);
  std::vector<Buffer> out = g.recv;
  for (std::size_t r = 0; r < N; ++r) {
    switch (c) {
      case Collective::kAllReduce:
        for (std::size_t i = 0; i < count; ++i) {
          double sum = 0;
          for (std::size_t k = 0; k < N; ++k) sum += read_element(dtype, &g.send[k][i * e]);
          write_element(dtype, sum, &out[r][i * e]);
        }
        break;
      case Collective::kAllGather:
        for (std::size_t k = 0; k < N; ++k)
          for (std::size_t i = 0; i < count; ++i) copy_element(dtype, g.send[k], i, out[r], k * count + i);
        break;
      case Collective::kReduceScatter:
        for (std::size_t i = 0; i < count; ++i) {
          double sum = 0;
          for (std::size_t k = 0; k < N; ++k) sum += read_element(dtype, &g.send[k][(r * count + i) * e]);
          write_element(dtype, sum, &out[r][i * e]);
        }
        break;
      case Collective::kBroadcast: out[r] = g.recv[0]; break;
      case Collective::kAllToAll:
        for (std::size_t k = 0; k < N; ++k)
          for (std::size_t i = 0; i < count; ++i) copy_element(dtype, g.send[k], r * count + i, out[r], k * count + i);
        break;
      case Collective::kSend:
        if (r == 1) out[r] = Buffer(g.send[0].begin(), g.send[0].begin() + static_cast<long>(count * e));
        break;
      case Collective::kSendRecv:
        out[r] = Buffer(g.send[1 - r].begin(), g.send[1 - r].begin() + static_cast<long>(count * e));
        break;
    }
  }
  g.recv = out;
}

std::vector<int> group_sizes_for(Collective c) {
  if (is_point_to_point(c)) return {2};
  return {2, 3, 4, 8, 16};
}

std::string describe(Collective c, DType dtype, int n, std::size_t count, int rank) {
  return to_string(c) + " " + to_string(dtype) + " n=" + std::to_string(n) + " count=" + std::to_string(count) +
         " rank=" + std::to_string(rank);
}

TEST(CommCollectives, BusBandwidthFactors) {
  const int sizes[] = {2, 4, 8};
  const double all_reduce[] = {1.0, 1.5, 1.75};  // 2(n-1)/n
  const double one_way[] = {0.5, 0.75, 0.875};   // (n-1)/n
  for (int k = 0; k < 3; ++k) {
    const int n = sizes[k];
    EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllReduce, n), all_reduce[k]) << n;
    EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllGather, n), one_way[k]) << n;
    EXPECT_DOUBLE_EQ(busbw_factor(Collective::kReduceScatter, n), one_way[k]) << n;
    EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllToAll, n), one_way[k]) << n;
    EXPECT_DOUBLE_EQ(busbw_factor(Collective::kBroadcast, n), 1.0) << n;
    EXPECT_DOUBLE_EQ(busbw_factor(Collective::kSend, n), 1.0) << n;
    EXPECT_DOUBLE_EQ(busbw_factor(Collective::kSendRecv, n), 1.0) << n;
  }
}

TEST(CommCollectives, NamesRoundTripAndUnknownIsRefused) {
  ASSERT_EQ(all_collectives().size(), 7u);
  const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send", "sendrecv"};
  for (std::size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(to_string(all_collectives()[i]), names[i]);
    EXPECT_EQ(parse_collective(names[i]), all_collectives()[i]);
  }
  EXPECT_TRUE(is_point_to_point(Collective::kSend));
  EXPECT_TRUE(is_point_to_point(Collective::kSendRecv));
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter, Collective::kBroadcast,
                       Collective::kAllToAll}) {
    EXPECT_FALSE(is_point_to_point(c)) << to_string(c);
  }
  try {
    parse_collective("allreduce");
    FAIL() << "allreduce accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("'allreduce'"), std::string::npos) << error.what();
  }
}

TEST(CommCollectives, ElementCountFollowsNcclTestsSizes) {
  // all_reduce, broadcast, send, sendrecv: `bytes` is the buffer.
  EXPECT_EQ(element_count(Collective::kAllReduce, 1024, 4, DType::kFloat32), 256u);
  EXPECT_EQ(element_count(Collective::kAllReduce, 1024, 4, DType::kFloat16), 512u);
  EXPECT_EQ(element_count(Collective::kBroadcast, 1024, 8, DType::kInt8), 1024u);
  EXPECT_EQ(element_count(Collective::kSend, 1024, 2, DType::kBFloat16), 512u);
  EXPECT_EQ(element_count(Collective::kSendRecv, 1024, 2, DType::kFloat64), 128u);
  // all_gather: the receive buffer; reduce_scatter and all_to_all: the send buffer; count per rank.
  EXPECT_EQ(element_count(Collective::kAllGather, 1024, 4, DType::kFloat32), 64u);
  EXPECT_EQ(element_count(Collective::kReduceScatter, 1024, 4, DType::kFloat32), 64u);
  EXPECT_EQ(element_count(Collective::kAllToAll, 1024, 4, DType::kFloat32), 64u);
  EXPECT_EQ(element_count(Collective::kAllGather, 1024, 8, DType::kInt8), 128u);
  // Rounded down to whole elements (per rank); 0 when smaller than one element per rank.
  EXPECT_EQ(element_count(Collective::kAllReduce, 10, 2, DType::kFloat32), 2u);
  EXPECT_EQ(element_count(Collective::kAllReduce, 3, 2, DType::kFloat32), 0u);
  EXPECT_EQ(element_count(Collective::kAllGather, 12, 4, DType::kFloat32), 0u);
  EXPECT_EQ(element_count(Collective::kAllGather, 16, 4, DType::kFloat32), 1u);
  EXPECT_EQ(element_count(Collective::kReduceScatter, 31, 4, DType::kFloat32), 1u);
  EXPECT_EQ(element_count(Collective::kAllToAll, 8, 8, DType::kFloat16), 0u);
}

TEST(CommCollectives, LabelledBytesAreTheRoundedNcclTestsSize) {
  EXPECT_EQ(labelled_bytes(Collective::kAllReduce, 256, 4, DType::kFloat32), 1024u);
  EXPECT_EQ(labelled_bytes(Collective::kBroadcast, 7, 4, DType::kInt8), 7u);
  EXPECT_EQ(labelled_bytes(Collective::kSend, 3, 2, DType::kBFloat16), 6u);
  EXPECT_EQ(labelled_bytes(Collective::kAllGather, 64, 4, DType::kFloat32), 1024u);
  EXPECT_EQ(labelled_bytes(Collective::kReduceScatter, 64, 4, DType::kFloat32), 1024u);
  EXPECT_EQ(labelled_bytes(Collective::kAllToAll, 3, 8, DType::kFloat16), 48u);
  // labelled_bytes(element_count(b)) is b rounded down to whole elements per rank, and a fixed point.
  for (Collective c : all_collectives()) {
    for (DType dtype : numeric_dtypes()) {
      for (int n : {2, 4, 8}) {
        for (std::size_t bytes : {1u, 7u, 8u, 100u, 1000u, 4096u, 65537u}) {
          const std::size_t count = element_count(c, bytes, n, dtype);
          const std::size_t labelled = labelled_bytes(c, count, n, dtype);
          EXPECT_LE(labelled, bytes);
          const std::size_t unit = (c == Collective::kAllGather || c == Collective::kReduceScatter || c == Collective::kAllToAll)
                                       ? dtype_bytes(dtype) * static_cast<std::size_t>(n)
                                       : dtype_bytes(dtype);
          EXPECT_LT(bytes - labelled, unit) << to_string(c) << " " << bytes;
          EXPECT_EQ(labelled % unit, 0u);
          EXPECT_EQ(element_count(c, labelled, n, dtype), count);
        }
      }
    }
  }
}

TEST(CommCollectives, SendAndReceiveBufferSizes) {
  const std::size_t c = 5;
  const int n = 4;
  EXPECT_EQ(send_elements(Collective::kAllReduce, c, n), 5u);
  EXPECT_EQ(recv_elements(Collective::kAllReduce, c, n), 5u);
  EXPECT_EQ(send_elements(Collective::kAllGather, c, n), 5u);
  EXPECT_EQ(recv_elements(Collective::kAllGather, c, n), 20u);
  EXPECT_EQ(send_elements(Collective::kReduceScatter, c, n), 20u);
  EXPECT_EQ(recv_elements(Collective::kReduceScatter, c, n), 5u);
  EXPECT_EQ(send_elements(Collective::kBroadcast, c, n), 0u);  // in place in the receive buffer
  EXPECT_EQ(recv_elements(Collective::kBroadcast, c, n), 5u);
  EXPECT_EQ(send_elements(Collective::kAllToAll, c, n), 20u);
  EXPECT_EQ(recv_elements(Collective::kAllToAll, c, n), 20u);
  EXPECT_EQ(send_elements(Collective::kSend, c, 2), 5u);
  EXPECT_EQ(recv_elements(Collective::kSend, c, 2), 5u);
  EXPECT_EQ(send_elements(Collective::kSendRecv, c, 2), 5u);
  EXPECT_EQ(recv_elements(Collective::kSendRecv, c, 2), 5u);
  // The labelled size is the largest buffer of the call (nccl-tests convention).
  for (Collective col : all_collectives()) {
    const int g = is_point_to_point(col) ? 2 : n;
    const std::size_t largest = std::max(send_elements(col, c, g), recv_elements(col, c, g)) * 4;
    EXPECT_EQ(labelled_bytes(col, c, g, DType::kFloat32), largest) << to_string(col);
  }
}

TEST(CommCollectives, EncodeDecodeSmallIntegersInEveryDtype) {
  for (DType dtype : numeric_dtypes()) {
    for (double v : {-3.0, -1.0, 0.0, 1.0, 2.0, 7.0, 100.0}) {
      uint8_t bytes[8] = {};
      encode_value(dtype, v, bytes);
      EXPECT_EQ(decode_value(dtype, bytes), v) << to_string(dtype);
      EXPECT_EQ(read_element(dtype, bytes), v) << to_string(dtype);
    }
  }
  uint8_t bytes[2] = {};
  encode_value(DType::kFloat16, 1.0, bytes);
  EXPECT_EQ(bytes[0] | (bytes[1] << 8), 0x3c00);
  encode_value(DType::kBFloat16, -1.0, bytes);
  EXPECT_EQ(bytes[0] | (bytes[1] << 8), 0xbf80);
}

TEST(CommCollectives, FillUsesMinusOneZeroOneAndDiffersBetweenRanks) {
  for (Collective c : all_collectives()) {
    for (DType dtype : numeric_dtypes()) {
      const int n = is_point_to_point(c) ? 2 : 4;
      const std::size_t count = 6;
      Group g = fill_group(c, dtype, n, count);
      const std::size_t e = dtype_bytes(dtype);
      for (int r = 0; r < n; ++r) {
        const Buffer& send = g.send[static_cast<std::size_t>(r)];
        const Buffer& recv = g.recv[static_cast<std::size_t>(r)];
        ASSERT_EQ(send.size(), send_elements(c, count, n) * e);
        ASSERT_EQ(recv.size(), recv_elements(c, count, n) * e);
        for (std::size_t i = 0; i < send.size() / e; ++i) {
          const double v = read_element(dtype, &send[i * e]);
          EXPECT_TRUE(v == -1 || v == 0 || v == 1) << describe(c, dtype, n, count, r) << " element " << i << " = " << v;
          EXPECT_EQ(v, static_cast<double>((static_cast<std::size_t>(r) + i) % 3) - 1.0);
        }
        // Receive buffers start at 7 (a value no result holds); broadcast's root holds the data.
        for (std::size_t i = 0; i < recv.size() / e; ++i) {
          const double v = read_element(dtype, &recv[i * e]);
          if (c == Collective::kBroadcast && r == 0) {
            EXPECT_EQ(v, static_cast<double>(i % 3) - 1.0);
          } else {
            EXPECT_EQ(v, 7.0) << describe(c, dtype, n, count, r);
          }
        }
      }
      if (send_elements(c, count, n) > 0) {
        EXPECT_NE(g.send[0], g.send[1]) << to_string(c);
      }
    }
  }
}

TEST(CommCollectives, CheckAcceptsTheSimulatedResultOfEveryCollectiveOnEveryRank) {
  int simulated = 0;
  for (Collective c : all_collectives()) {
    for (DType dtype : numeric_dtypes()) {
      for (int n : group_sizes_for(c)) {
        for (std::size_t count : {1u, 2u, 7u, 64u}) {
          Group g = fill_group(c, dtype, n, count);
          simulate(c, dtype, n, count, g);
          for (int r = 0; r < n; ++r) {
            const CheckResult result = check_result(c, dtype, r, n, count, g.recv[static_cast<std::size_t>(r)]);
            EXPECT_EQ(result.errors, 0u) << describe(c, dtype, n, count, r) << ": " << result.first_error;
            EXPECT_TRUE(result.first_error.empty());
          }
          ++simulated;
        }
      }
    }
  }
  EXPECT_EQ(simulated, (5 * 5 + 2 * 1) * 7 * 4);
}

TEST(CommCollectives, CheckRejectsUntouchedReceiveBuffers) {
  for (Collective c : all_collectives()) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8}) {
      const int n = is_point_to_point(c) ? 2 : 4;
      const std::size_t count = 9;
      Group g = fill_group(c, dtype, n, count);  // no call: receive buffers still hold 7 (or root's data)
      for (int r = 0; r < n; ++r) {
        const CheckResult result = check_result(c, dtype, r, n, count, g.recv[static_cast<std::size_t>(r)]);
        const bool passes_anyway = (c == Collective::kSend && r == 0) || (c == Collective::kBroadcast && r == 0);
        if (passes_anyway) {
          EXPECT_EQ(result.errors, 0u) << describe(c, dtype, n, count, r);
        } else {
          EXPECT_EQ(result.errors, recv_elements(c, count, n)) << describe(c, dtype, n, count, r);
          EXPECT_NE(result.first_error.find("element 0: got 7"), std::string::npos) << result.first_error;
        }
      }
    }
  }
}

TEST(CommCollectives, OneCorruptedElementIsExactlyOneErrorNamingIt) {
  for (Collective c : all_collectives()) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8}) {
      const int n = is_point_to_point(c) ? 2 : 4;
      const std::size_t count = 10;
      Group g = fill_group(c, dtype, n, count);
      simulate(c, dtype, n, count, g);
      const int rank = 1;  // a receiving rank for every collective (send goes 0 -> 1)
      Buffer& recv = g.recv[static_cast<std::size_t>(rank)];
      const std::size_t e = dtype_bytes(dtype);
      const std::size_t index = recv.size() / e - 3;
      // Off by one: a value the result can hold elsewhere, so only the position makes it wrong.
      const double original = read_element(dtype, &recv[index * e]);
      write_element(dtype, original + 1.0, &recv[index * e]);
      const CheckResult result = check_result(c, dtype, rank, n, count, recv);
      EXPECT_EQ(result.errors, 1u) << describe(c, dtype, n, count, rank);
      const std::string want = "element " + std::to_string(index) + ": got ";
      EXPECT_EQ(result.first_error.rfind(want, 0), 0u) << result.first_error << " (want it to start with '" << want << "')";
      EXPECT_NE(result.first_error.find("want"), std::string::npos) << result.first_error;
      // Corrupting a second element counts two, and the message still names the first.
      write_element(dtype, original - 5.0, &recv[1 * e]);
      const CheckResult two = check_result(c, dtype, rank, n, count, recv);
      EXPECT_EQ(two.errors, 2u) << describe(c, dtype, n, count, rank);
      EXPECT_EQ(two.first_error.rfind("element 1: got ", 0), 0u) << two.first_error;
    }
  }
}

TEST(CommCollectives, CheckCatchesBlocksInTheWrongOrder) {
  // all_gather with the blocks of ranks 0 and 1 swapped, all_to_all likewise: every element is a value
  // the pattern produces, only its place is wrong.
  for (Collective c : {Collective::kAllGather, Collective::kAllToAll}) {
    const int n = 4;
    const std::size_t count = 4;
    Group g = fill_group(c, DType::kFloat32, n, count);
    simulate(c, DType::kFloat32, n, count, g);
    Buffer& recv = g.recv[2];
    std::swap_ranges(recv.begin(), recv.begin() + static_cast<long>(count * 4), recv.begin() + static_cast<long>(count * 4));
    EXPECT_GT(check_result(c, DType::kFloat32, 2, n, count, recv).errors, 0u) << to_string(c);
  }
  // reduce_scatter: rank 1 holding rank 0's block of the sum.
  {
    const int n = 4;
    const std::size_t count = 5;
    Group g = fill_group(Collective::kReduceScatter, DType::kInt8, n, count);
    simulate(Collective::kReduceScatter, DType::kInt8, n, count, g);
    EXPECT_GT(check_result(Collective::kReduceScatter, DType::kInt8, 1, n, count, g.recv[0]).errors, 0u);
  }
  // sendrecv: a rank that received its own data back.
  {
    Group g = fill_group(Collective::kSendRecv, DType::kBFloat16, 2, 6);
    EXPECT_GT(check_result(Collective::kSendRecv, DType::kBFloat16, 0, 2, 6, g.send[0]).errors, 0u);
  }
}

TEST(CommCollectives, SenderOfAOneWaySendAlwaysPasses) {
  Buffer garbage(40, 0xff);
  EXPECT_EQ(check_result(Collective::kSend, DType::kFloat32, 0, 2, 10, garbage).errors, 0u);
  EXPECT_EQ(check_result(Collective::kSend, DType::kFloat32, 1, 2, 10, garbage).errors, 10u);
}

TEST(CommCollectives, CheckRefusesAReceiveBufferSmallerThanThePoint) {
  Buffer small(3 * 4, 0);
  EXPECT_THROW(check_result(Collective::kAllGather, DType::kFloat32, 0, 2, 2, small), InternalError);
}

}  // namespace
}  // namespace itertime::calibrate
