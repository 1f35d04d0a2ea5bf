// mpi_communicator.cpp: the Communicator over MPI on host buffers (mpi_communicator.hpp).
#include "runtime/mpi_communicator.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/errors.hpp"
#include "common/half.hpp"
#include "runtime/job_abort.hpp"
#include "runtime/mpi_check.hpp"
#include "runtime/watchdog.hpp"

namespace itertime {
namespace {

class HostBuffer final : public CommBuffer {
 public:
  explicit HostBuffer(std::size_t bytes) : storage_(bytes == 0 ? 1 : bytes), bytes_(bytes) {}
  void* data() override { return storage_.data(); }
  std::size_t bytes() const override { return bytes_; }

 private:
  std::vector<unsigned char> storage_;
  std::size_t bytes_;
};

// MPI_User_function signatures: sum 16-bit floats element-wise into inout.
void fp16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_fp16(fp16_to_float(a[i]) + fp16_to_float(b[i]));
}

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

int checked_count(std::size_t count) {
  ITERTIME_CHECK(count <= static_cast<std::size_t>(INT_MAX), "message of more than INT_MAX elements for MPI");
  return static_cast<int>(count);
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : MpiGroupCommunicator(comm), comm_(comm) {
  ITERTIME_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &half_type_));
  ITERTIME_MPI_CHECK(MPI_Type_commit(&half_type_));
  ITERTIME_MPI_CHECK(MPI_Type_dup(half_type_, &bf16_type_));
  ITERTIME_MPI_CHECK(MPI_Op_create(&fp16_sum, /*commute=*/1, &fp16_sum_));
  ITERTIME_MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_sum_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (fp16_sum_ != MPI_OP_NULL) MPI_Op_free(&fp16_sum_);
  if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
  if (bf16_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&bf16_type_);
  if (half_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_type_);
}

MPI_Datatype MpiCommunicator::mpi_type(DType dtype) const {
  switch (dtype) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kFloat16: return half_type_;
    case DType::kBFloat16: return bf16_type_;
    case DType::kInt8: return MPI_INT8_T;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kBool: return MPI_UINT8_T;
  }
  throw InternalError("no MPI type for " + to_string(dtype), __FILE__, __LINE__);
}

MPI_Op MpiCommunicator::sum_op(DType dtype) const {
  if (dtype == DType::kFloat16) return fp16_sum_;
  if (dtype == DType::kBFloat16) return bf16_sum_;
  ITERTIME_CHECK(dtype != DType::kBool, "sum of booleans is not defined");
  return MPI_SUM;
}

std::unique_ptr<CommBuffer> MpiCommunicator::allocate(std::size_t bytes) { return std::make_unique<HostBuffer>(bytes); }

void MpiCommunicator::copy_in(CommBuffer& buffer, const void* host, std::size_t bytes) {
  ITERTIME_CHECK(bytes <= buffer.bytes(), "copy_in past the end of a buffer");
  if (bytes) std::memcpy(buffer.data(), host, bytes);
}

void MpiCommunicator::copy_out(void* host, const CommBuffer& buffer, std::size_t bytes) {
  ITERTIME_CHECK(bytes <= buffer.bytes(), "copy_out past the end of a buffer");
  if (bytes) std::memcpy(host, const_cast<CommBuffer&>(buffer).data(), bytes);
}

void MpiCommunicator::all_reduce_sum(const void* send, void* recv, std::size_t count, DType dtype) {
  ITERTIME_MPI_CHECK(
      MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, checked_count(count), mpi_type(dtype), sum_op(dtype), comm_));
}

void MpiCommunicator::all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
  const int n = checked_count(count);
  ITERTIME_MPI_CHECK(MPI_Allgather(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_));
}

void MpiCommunicator::reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType dtype) {
  ITERTIME_MPI_CHECK(MPI_Reduce_scatter_block(send, recv, checked_count(count), mpi_type(dtype), sum_op(dtype), comm_));
}

void MpiCommunicator::broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  ITERTIME_MPI_CHECK(MPI_Bcast(buffer, checked_count(count), mpi_type(dtype), root, comm_));
}

void MpiCommunicator::all_to_all(const void* send, void* recv, std::size_t count, DType dtype) {
  const int n = checked_count(count);
  ITERTIME_MPI_CHECK(MPI_Alltoall(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_));
}

void MpiCommunicator::send(const void* buffer, std::size_t count, DType dtype, int peer) {
  if (abort_ != nullptr) {
    WatchedOperation watched("send", static_cast<long long>(count * dtype_bytes(dtype)), size_);
    MPI_Request send = MPI_REQUEST_NULL, none = MPI_REQUEST_NULL;
    ITERTIME_MPI_CHECK(MPI_Isend(buffer, checked_count(count), mpi_type(dtype), peer, /*tag=*/7, comm_, &send));
    abort_->wait(send, none);
    return;
  }
  ITERTIME_MPI_CHECK(MPI_Send(buffer, checked_count(count), mpi_type(dtype), peer, /*tag=*/7, comm_));
}

void MpiCommunicator::recv(void* buffer, std::size_t count, DType dtype, int peer) {
  if (abort_ != nullptr) {
    WatchedOperation watched("recv", static_cast<long long>(count * dtype_bytes(dtype)), size_);
    MPI_Request none = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
    ITERTIME_MPI_CHECK(MPI_Irecv(buffer, checked_count(count), mpi_type(dtype), peer, /*tag=*/7, comm_, &recv));
    abort_->wait(none, recv);
    return;
  }
  ITERTIME_MPI_CHECK(MPI_Recv(buffer, checked_count(count), mpi_type(dtype), peer, /*tag=*/7, comm_, MPI_STATUS_IGNORE));
}

void MpiCommunicator::send_recv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count, DType dtype) {
  const int n = checked_count(count);
  if (abort_ != nullptr) {
    WatchedOperation watched("send_recv", static_cast<long long>(count * dtype_bytes(dtype)), size_);
    MPI_Request send_request = MPI_REQUEST_NULL, recv_request = MPI_REQUEST_NULL;
    ITERTIME_MPI_CHECK(MPI_Irecv(recv, n, mpi_type(dtype), recv_peer, /*tag=*/8, comm_, &recv_request));
    ITERTIME_MPI_CHECK(MPI_Isend(send, n, mpi_type(dtype), send_peer, /*tag=*/8, comm_, &send_request));
    abort_->wait(send_request, recv_request);
    return;
  }
  ITERTIME_MPI_CHECK(MPI_Sendrecv(send, n, mpi_type(dtype), send_peer, /*tag=*/8, recv, n, mpi_type(dtype), recv_peer,
                                  /*tag=*/8, comm_, MPI_STATUS_IGNORE));
}

void MpiCommunicator::start_all_reduce_sum(void* buffer, std::size_t count, DType dtype) {
  MPI_Request& request = started_.emplace_back(MPI_REQUEST_NULL);
  ITERTIME_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer, checked_count(count), mpi_type(dtype), sum_op(dtype), comm_, &request));
}

void MpiCommunicator::start_reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType dtype) {
  MPI_Request& request = started_.emplace_back(MPI_REQUEST_NULL);
  ITERTIME_MPI_CHECK(
      MPI_Ireduce_scatter_block(send, recv, checked_count(count), mpi_type(dtype), sum_op(dtype), comm_, &request));
}

std::size_t MpiCommunicator::start_all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
  const int n = checked_count(count);
  StartedGather& gather = gathers_.emplace_back();
  gather.id = next_gather_id_++;
  gather.bytes = static_cast<long long>(count * dtype_bytes(dtype)) * size_;
  ITERTIME_MPI_CHECK(MPI_Iallgather(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_, &gather.request));
  return gather.id;
}

void MpiCommunicator::wait_started_request(MPI_Request& request) {
  if (abort_ != nullptr) {
    abort_->wait_collective(request);
  } else {
    ITERTIME_MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
  }
}

void MpiCommunicator::wait_started(std::size_t id) {
  ITERTIME_CHECK(id < next_gather_id_, "wait_started for an all-gather that was never started");
  const auto found = std::find_if(gathers_.begin(), gathers_.end(), [id](const StartedGather& g) { return g.id == id; });
  if (found == gathers_.end()) return;  // waited for already
  WatchedOperation watched("wait_started (overlapped all-gather)", found->bytes, size_);
  wait_started_request(found->request);
  gathers_.erase(found);
}

void MpiCommunicator::finish_started() {
  WatchedOperation watched("finish_started (overlapped reductions and all-gathers)", -1, size_);
  for (MPI_Request& request : started_) wait_started_request(request);
  started_.clear();
  for (StartedGather& gather : gathers_) wait_started_request(gather.request);
  gathers_.clear();
}

void MpiCommunicator::progress() {
  if (!started_.empty()) {
    int done = 0;
    ITERTIME_MPI_CHECK(MPI_Testall(static_cast<int>(started_.size()), started_.data(), &done, MPI_STATUSES_IGNORE));
  }
  if (gathers_.empty()) return;
  for (StartedGather& gather : gathers_) {
    int done = 0;
    ITERTIME_MPI_CHECK(MPI_Test(&gather.request, &done, MPI_STATUS_IGNORE));
  }
  gathers_.erase(
      std::remove_if(gathers_.begin(), gathers_.end(), [](const StartedGather& g) { return g.request == MPI_REQUEST_NULL; }),
      gathers_.end());
}

void MpiCommunicator::barrier() { ITERTIME_MPI_CHECK(MPI_Barrier(comm_)); }

}  // namespace itertime
