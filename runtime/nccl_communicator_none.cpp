// nccl_communicator_none.cpp: builds without CUDA have no device and cannot construct an NCCL communicator.
#include "common/errors.hpp"
#include "runtime/nccl_communicator.hpp"

namespace itertime {

bool cuda_device_available() { return false; }

int bind_cuda_device(int) {
  throw UserError("this itertime was built without CUDA; rebuild with -DITERTIME_WITH_CUDA=ON, or use --backend cpu");
}

struct NcclCommunicator::State {};

NcclCommunicator::NcclCommunicator(MPI_Comm bootstrap) : MpiGroupCommunicator(bootstrap), bootstrap_(bootstrap) {
  throw UserError("this itertime was built without CUDA/NCCL; rebuild with -DITERTIME_WITH_CUDA=ON, or use --backend cpu");
}
NcclCommunicator::~NcclCommunicator() = default;
std::unique_ptr<CommBuffer> NcclCommunicator::allocate(std::size_t) { return nullptr; }
void NcclCommunicator::copy_in(CommBuffer&, const void*, std::size_t) {}
void NcclCommunicator::copy_out(void*, const CommBuffer&, std::size_t) {}
void NcclCommunicator::all_reduce_sum(const void*, void*, std::size_t, DType) {}
void NcclCommunicator::all_gather(const void*, void*, std::size_t, DType) {}
void NcclCommunicator::reduce_scatter_sum(const void*, void*, std::size_t, DType) {}
void NcclCommunicator::broadcast(void*, std::size_t, DType, int) {}
void NcclCommunicator::all_to_all(const void*, void*, std::size_t, DType) {}
void NcclCommunicator::send(const void*, std::size_t, DType, int) {}
void NcclCommunicator::recv(void*, std::size_t, DType, int) {}
void NcclCommunicator::send_recv(const void*, int, void*, int, std::size_t, DType) {}
void NcclCommunicator::synchronize() {}
void NcclCommunicator::barrier() {}
void NcclCommunicator::abandon() {}
void NcclCommunicator::start_all_reduce_sum(void*, std::size_t, DType) {}
std::size_t NcclCommunicator::start_all_gather(const void*, void*, std::size_t, DType) { return 0; }
void NcclCommunicator::wait_started(std::size_t) {}
void NcclCommunicator::finish_started() {}

}  // namespace itertime
