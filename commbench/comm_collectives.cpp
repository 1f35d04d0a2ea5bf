// comm_collectives.cpp: each collective as a plugin: sizes, fill, run and check (comm_collectives.hpp).
#include "commbench/comm_collectives.hpp"

#include <cmath>
#include <cstring>

#include "common/errors.hpp"
#include "common/half.hpp"

namespace itertime::calibrate {
namespace {

double pattern(int rank, std::size_t index) { return static_cast<double>((static_cast<std::size_t>(rank) + index) % 3) - 1.0; }

}  // namespace

std::size_t element_count(Collective collective, std::size_t bytes, int group_size, DType dtype) {
  const std::size_t element = dtype_bytes(dtype);
  const auto n = static_cast<std::size_t>(group_size);
  switch (collective) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return bytes / (element * n);
    default: return bytes / element;
  }
}

std::size_t labelled_bytes(Collective collective, std::size_t count, int group_size, DType dtype) {
  const std::size_t element = dtype_bytes(dtype);
  const auto n = static_cast<std::size_t>(group_size);
  switch (collective) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return count * element * n;
    default: return count * element;
  }
}

std::size_t send_elements(Collective collective, std::size_t count, int group_size) {
  const auto n = static_cast<std::size_t>(group_size);
  switch (collective) {
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return count * n;
    case Collective::kBroadcast: return 0;  // in place in the receive buffer
    default: return count;
  }
}

std::size_t recv_elements(Collective collective, std::size_t count, int group_size) {
  const auto n = static_cast<std::size_t>(group_size);
  switch (collective) {
    case Collective::kAllGather:
    case Collective::kAllToAll: return count * n;
    default: return count;
  }
}

void run_collective(Collective collective, Communicator& comm, void* send, void* recv, std::size_t count, DType dtype) {
  switch (collective) {
    case Collective::kAllReduce: comm.all_reduce_sum(send, recv, count, dtype); return;
    case Collective::kAllGather: comm.all_gather(send, recv, count, dtype); return;
    case Collective::kReduceScatter: comm.reduce_scatter_sum(send, recv, count, dtype); return;
    case Collective::kBroadcast: comm.broadcast(recv, count, dtype, /*root=*/0); return;
    case Collective::kAllToAll: comm.all_to_all(send, recv, count, dtype); return;
    case Collective::kSend:
      ITERTIME_CHECK(comm.size() == 2, "send is measured in pairs");
      if (comm.rank() == 0) {
        comm.send(send, count, dtype, 1);
      } else {
        comm.recv(recv, count, dtype, 0);
      }
      return;
    case Collective::kSendRecv: {
      ITERTIME_CHECK(comm.size() == 2, "sendrecv is measured in pairs");
      const int peer = 1 - comm.rank();
      comm.send_recv(send, peer, recv, peer, count, dtype);
      return;
    }
  }
  throw InternalError("unknown collective", __FILE__, __LINE__);
}

void encode_value(DType dtype, double value, uint8_t* destination) {
  switch (dtype) {
    case DType::kFloat32: {
      const auto v = static_cast<float>(value);
      std::memcpy(destination, &v, sizeof(v));
      return;
    }
    case DType::kFloat64: std::memcpy(destination, &value, sizeof(value)); return;
    case DType::kFloat16: {
      const uint16_t v = float_to_fp16(static_cast<float>(value));
      std::memcpy(destination, &v, sizeof(v));
      return;
    }
    case DType::kBFloat16: {
      const uint16_t v = float_to_bf16(static_cast<float>(value));
      std::memcpy(destination, &v, sizeof(v));
      return;
    }
    case DType::kInt8: {
      const auto v = static_cast<int8_t>(value);
      std::memcpy(destination, &v, sizeof(v));
      return;
    }
    case DType::kInt32: {
      const auto v = static_cast<int32_t>(value);
      std::memcpy(destination, &v, sizeof(v));
      return;
    }
    case DType::kInt64: {
      const auto v = static_cast<int64_t>(value);
      std::memcpy(destination, &v, sizeof(v));
      return;
    }
    case DType::kBool: *destination = value != 0.0 ? 1 : 0; return;
  }
}

double decode_value(DType dtype, const uint8_t* source) {
  switch (dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, source, sizeof(v));
      return v;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, source, sizeof(v));
      return v;
    }
    case DType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, source, sizeof(v));
      return fp16_to_float(v);
    }
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, source, sizeof(v));
      return bf16_to_float(v);
    }
    case DType::kInt8: return static_cast<int8_t>(*source);
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, source, sizeof(v));
      return v;
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, source, sizeof(v));
      return static_cast<double>(v);
    }
    case DType::kBool: return *source;
  }
  return 0.0;
}

void fill_buffers(Collective collective, DType dtype, int rank, int group_size, std::size_t count,
                  std::vector<uint8_t>& send_host, std::vector<uint8_t>& recv_host) {
  const std::size_t element = dtype_bytes(dtype);
  const std::size_t send_n = send_elements(collective, count, group_size);
  const std::size_t recv_n = recv_elements(collective, count, group_size);
  send_host.assign(send_n * element, 0);
  recv_host.assign(recv_n * element, 0);
  for (std::size_t i = 0; i < send_n; ++i) encode_value(dtype, pattern(rank, i), &send_host[i * element]);
  // The receive buffer starts with a value the result never holds (7), so a call that writes nothing
  // fails its check. Broadcast's root holds the data in place.
  for (std::size_t i = 0; i < recv_n; ++i) {
    const double initial = (collective == Collective::kBroadcast && rank == 0) ? pattern(0, i) : 7.0;
    encode_value(dtype, initial, &recv_host[i * element]);
  }
}

CheckResult check_result(Collective collective, DType dtype, int rank, int group_size, std::size_t count,
                         const std::vector<uint8_t>& recv_host) {
  CheckResult result;
  if (collective == Collective::kSend && rank == 0) return result;  // the sender receives nothing
  const std::size_t element = dtype_bytes(dtype);
  const std::size_t recv_n = recv_elements(collective, count, group_size);
  ITERTIME_CHECK(recv_host.size() >= recv_n * element, "receive buffer smaller than the point");
  for (std::size_t i = 0; i < recv_n; ++i) {
    double expected = 0.0;
    switch (collective) {
      case Collective::kAllReduce:
        for (int r = 0; r < group_size; ++r) expected += pattern(r, i);
        break;
      case Collective::kAllGather: expected = pattern(static_cast<int>(i / count), i % count); break;
      case Collective::kReduceScatter:
        for (int r = 0; r < group_size; ++r) expected += pattern(r, static_cast<std::size_t>(rank) * count + i);
        break;
      case Collective::kBroadcast: expected = pattern(0, i); break;
      case Collective::kAllToAll:
        expected = pattern(static_cast<int>(i / count), static_cast<std::size_t>(rank) * count + i % count);
        break;
      case Collective::kSend: expected = pattern(0, i); break;
      case Collective::kSendRecv: expected = pattern(1 - rank, i); break;
    }
    const double got = decode_value(dtype, &recv_host[i * element]);
    if (got != expected) {
      if (result.errors == 0) {
        result.first_error =
            "element " + std::to_string(i) + ": got " + std::to_string(got) + ", want " + std::to_string(expected);
      }
      ++result.errors;
    }
  }
  return result;
}

}  // namespace itertime::calibrate
