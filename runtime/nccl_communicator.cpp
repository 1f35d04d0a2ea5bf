// nccl_communicator.cpp: the Communicator over NCCL on device buffers, CUDA builds only (nccl_communicator.hpp).
#include "runtime/nccl_communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "runtime/job_abort.hpp"
#include "runtime/watchdog.hpp"

namespace itertime {
namespace {
// The one check of a CUDA or NCCL call's status: anything but `ok` is an InternalError naming the call,
// the library's description of the status and `hint` (what to look at).
template <typename Status, typename Describe>
void check_call(Status status, Status ok, Describe describe, const char* call, const char* hint, const char* file, int line) {
  if (status != ok) throw InternalError(std::string(call) + " failed: " + describe(status) + " " + hint, file, line);
}
}  // namespace
}  // namespace itertime

#define ITERTIME_CUDA_CALL(call)                                                      \
  ::itertime::check_call<cudaError_t>((call), cudaSuccess, cudaGetErrorString, #call, \
                                      "(check the device binding and CUDA_VISIBLE_DEVICES)", __FILE__, __LINE__)
#define ITERTIME_NCCL_CALL(call)                                                       \
  ::itertime::check_call<ncclResult_t>((call), ncclSuccess, ncclGetErrorString, #call, \
                                       "(rerun with NCCL_DEBUG=WARN for details)", __FILE__, __LINE__)

namespace itertime {
namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat64: return ncclFloat64;
    case DType::kInt8: return ncclInt8;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kBool: return ncclUint8;
  }
  throw InternalError("no NCCL type for " + to_string(dtype), __FILE__, __LINE__);
}

class DeviceBuffer final : public CommBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) { ITERTIME_CUDA_CALL(cudaMalloc(&data_, bytes == 0 ? 1 : bytes)); }
  ~DeviceBuffer() override { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() override { return data_; }
  std::size_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

}  // namespace

// The communicator is watched (watchdog.hpp) from its creation until it is destroyed or abandoned: the
// watchdog thread polls its asynchronous error and aborts it before ending the process.
struct NcclCommunicator::State final : WatchedResource {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<WatchedResourceRegistration> registration;  // while `comm` is live
  // The started all-gathers not yet waited for: (id, the event recorded after it on `stream`).
  std::vector<std::pair<std::size_t, cudaEvent_t>> gathers;
  std::size_t next_gather_id = 0;
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  void destroy_gather_events() noexcept {
    for (auto& gather : gathers) cudaEventDestroy(gather.second);
    gathers.clear();
  }
  ~State() override {
    destroy_gather_events();
    registration.reset();
    if (comm) ncclCommDestroy(comm);
    if (stream) cudaStreamDestroy(stream);
  }
  std::string async_error() override {
    ncclResult_t result = ncclSuccess;
    if (comm == nullptr || ncclCommGetAsyncError(comm, &result) != ncclSuccess) return "";
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    if (result == ncclInProgress) return "";
#endif
    return result == ncclSuccess ? "" : std::string("NCCL: ") + ncclGetErrorString(result);
  }
  void abort() noexcept override {
    if (comm) ncclCommAbort(comm);
  }
};

bool cuda_device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

int bind_cuda_device(int local_rank) {
  int count = 0;
  ITERTIME_CUDA_CALL(cudaGetDeviceCount(&count));
  ITERTIME_CHECK(count > 0, "no CUDA device visible to this rank");
  const int device = local_rank % count;
  ITERTIME_CUDA_CALL(cudaSetDevice(device));
  return device;
}

NcclCommunicator::NcclCommunicator(MPI_Comm bootstrap)
    : MpiGroupCommunicator(bootstrap), state_(std::make_unique<State>()), bootstrap_(bootstrap) {
  ncclUniqueId id{};
  if (rank_ == 0) ITERTIME_NCCL_CALL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, bootstrap_);
  ITERTIME_CUDA_CALL(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  ITERTIME_NCCL_CALL(ncclCommInitRank(&state_->comm, size_, id, rank_));
  state_->registration = std::make_unique<WatchedResourceRegistration>(state_.get());
}

NcclCommunicator::~NcclCommunicator() = default;

std::unique_ptr<CommBuffer> NcclCommunicator::allocate(std::size_t bytes) { return std::make_unique<DeviceBuffer>(bytes); }

void NcclCommunicator::copy_in(CommBuffer& buffer, const void* host, std::size_t bytes) {
  ITERTIME_CHECK(bytes <= buffer.bytes(), "copy_in past the end of a buffer");
  ITERTIME_CUDA_CALL(cudaMemcpy(buffer.data(), host, bytes, cudaMemcpyHostToDevice));
}

void NcclCommunicator::copy_out(void* host, const CommBuffer& buffer, std::size_t bytes) {
  ITERTIME_CHECK(bytes <= buffer.bytes(), "copy_out past the end of a buffer");
  ITERTIME_CUDA_CALL(cudaMemcpy(host, const_cast<CommBuffer&>(buffer).data(), bytes, cudaMemcpyDeviceToHost));
}

void NcclCommunicator::all_reduce_sum(const void* send, void* recv, std::size_t count, DType dtype) {
  ITERTIME_NCCL_CALL(ncclAllReduce(send, recv, count, nccl_type(dtype), ncclSum, state_->comm, state_->stream));
}

void NcclCommunicator::all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
  ITERTIME_NCCL_CALL(ncclAllGather(send, recv, count, nccl_type(dtype), state_->comm, state_->stream));
}

void NcclCommunicator::reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType dtype) {
  ITERTIME_NCCL_CALL(ncclReduceScatter(send, recv, count, nccl_type(dtype), ncclSum, state_->comm, state_->stream));
}

void NcclCommunicator::broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  ITERTIME_NCCL_CALL(ncclBroadcast(buffer, buffer, count, nccl_type(dtype), root, state_->comm, state_->stream));
}

void NcclCommunicator::all_to_all(const void* send, void* recv, std::size_t count, DType dtype) {
  // NCCL has no all-to-all primitive: grouped send/recv with every peer, as nccl-tests does.
  const std::size_t chunk_bytes = count * dtype_bytes(dtype);
  ITERTIME_NCCL_CALL(ncclGroupStart());
  for (int peer = 0; peer < size_; ++peer) {
    ITERTIME_NCCL_CALL(ncclSend(static_cast<const char*>(send) + peer * chunk_bytes, count, nccl_type(dtype), peer, state_->comm,
                                state_->stream));
    ITERTIME_NCCL_CALL(
        ncclRecv(static_cast<char*>(recv) + peer * chunk_bytes, count, nccl_type(dtype), peer, state_->comm, state_->stream));
  }
  ITERTIME_NCCL_CALL(ncclGroupEnd());
}

void NcclCommunicator::send(const void* buffer, std::size_t count, DType dtype, int peer) {
  ITERTIME_NCCL_CALL(ncclSend(buffer, count, nccl_type(dtype), peer, state_->comm, state_->stream));
}

void NcclCommunicator::recv(void* buffer, std::size_t count, DType dtype, int peer) {
  ITERTIME_NCCL_CALL(ncclRecv(buffer, count, nccl_type(dtype), peer, state_->comm, state_->stream));
}

void NcclCommunicator::send_recv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count, DType dtype) {
  ITERTIME_NCCL_CALL(ncclGroupStart());
  ITERTIME_NCCL_CALL(ncclSend(send, count, nccl_type(dtype), send_peer, state_->comm, state_->stream));
  ITERTIME_NCCL_CALL(ncclRecv(recv, count, nccl_type(dtype), recv_peer, state_->comm, state_->stream));
  ITERTIME_NCCL_CALL(ncclGroupEnd());
}

// One poll of a polled device wait (JobAbort::wait_until): `status` is the stream's or event's query;
// true once its work is done; an error of the query, or the communicator's asynchronous error, throws.
static bool device_work_done(cudaError_t status, ncclComm_t comm) {
  if (status == cudaSuccess) return true;
  if (status != cudaErrorNotReady) ITERTIME_CUDA_CALL(status);
  ncclResult_t async_error = ncclSuccess;
  ITERTIME_NCCL_CALL(ncclCommGetAsyncError(comm, &async_error));
  ITERTIME_NCCL_CALL(async_error);
  return false;
}

void NcclCommunicator::synchronize() {
  WatchedOperation watched("synchronize (NCCL stream)", -1, size_);
  if (abort_ == nullptr) {
    ITERTIME_CUDA_CALL(cudaStreamSynchronize(state_->stream));
    return;
  }
  abort_->wait_until([this] { return device_work_done(cudaStreamQuery(state_->stream), state_->comm); });
}

void NcclCommunicator::start_all_reduce_sum(void* buffer, std::size_t count, DType dtype) {
  // The gradients are written on the device's legacy default stream (LibTorch's default): the reduction
  // waits for what is queued there, then runs on this communicator's stream while the compute goes on.
  cudaEvent_t written = nullptr;
  ITERTIME_CUDA_CALL(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  ITERTIME_CUDA_CALL(cudaEventRecord(written, cudaStreamLegacy));
  ITERTIME_CUDA_CALL(cudaStreamWaitEvent(state_->stream, written, 0));
  ITERTIME_CUDA_CALL(cudaEventDestroy(written));  // released once recorded and waited on
  ITERTIME_NCCL_CALL(ncclAllReduce(buffer, buffer, count, nccl_type(dtype), ncclSum, state_->comm, state_->stream));
}

std::size_t NcclCommunicator::start_all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
  // `send` (the updated shard) is written on the legacy default stream: the gather waits for it there.
  cudaEvent_t written = nullptr;
  ITERTIME_CUDA_CALL(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  ITERTIME_CUDA_CALL(cudaEventRecord(written, cudaStreamLegacy));
  ITERTIME_CUDA_CALL(cudaStreamWaitEvent(state_->stream, written, 0));
  ITERTIME_CUDA_CALL(cudaEventDestroy(written));  // released once recorded and waited on
  ITERTIME_NCCL_CALL(ncclAllGather(send, recv, count, nccl_type(dtype), state_->comm, state_->stream));
  cudaEvent_t done = nullptr;
  ITERTIME_CUDA_CALL(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  state_->gathers.emplace_back(state_->next_gather_id, done);  // owned from here (destroy_gather_events)
  ITERTIME_CUDA_CALL(cudaEventRecord(done, state_->stream));
  return state_->next_gather_id++;
}

void NcclCommunicator::wait_started(std::size_t id) {
  ITERTIME_CHECK(id < state_->next_gather_id, "wait_started for an all-gather that was never started");
  auto& gathers = state_->gathers;
  const auto found = std::find_if(gathers.begin(), gathers.end(), [id](const auto& g) { return g.first == id; });
  if (found == gathers.end()) return;  // waited for already
  WatchedOperation watched("wait_started (overlapped all-gather, NCCL)", -1, size_);
  const cudaEvent_t done = found->second;
  if (abort_ == nullptr) {
    ITERTIME_CUDA_CALL(cudaEventSynchronize(done));
  } else {
    abort_->wait_until([this, done] { return device_work_done(cudaEventQuery(done), state_->comm); });
  }
  cudaEventDestroy(done);
  gathers.erase(found);
}

void NcclCommunicator::finish_started() {
  synchronize();  // every started operation is on the stream
  state_->destroy_gather_events();
}

void NcclCommunicator::abandon() {
  if (state_->comm == nullptr) return;
  state_->registration.reset();  // the watchdog no longer polls or aborts it
  ncclCommAbort(state_->comm);   // ends this communicator's kernels in flight; nothing to report if it fails
  state_->comm = nullptr;
}

void NcclCommunicator::barrier() {
  synchronize();
  MPI_Barrier(bootstrap_);
}

}  // namespace itertime
