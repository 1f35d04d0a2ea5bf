// point_buffers.hpp: where the send and receive buffers of a point of `calibrate comm` lie.
// Invariants:
//  - point_buffer_bytes(point) is what the point's calls touch: send_elements/recv_elements (comm_collectives.hpp)
//    times the element size, the send buffer at least one element (broadcast sends from its receive buffer).
//  - largest_buffer_bytes(points) maximises send and receive separately over the points (both 0 for none).
//  - BlockBuffers, in both timing modes: one send and one receive buffer for all the points of a block (one
//    communicator), allocated in the constructor and only there (two allocate calls), sized for the block's
//    largest point plus kBufferAlignment - 1 bytes, so that both views start on a kBufferAlignment (page)
//    boundary whatever address the communicator returned; every point gets views of its exact bytes at those
//    two aligned addresses. The buffers of a point thus never depend on the heap's state, and the receive
//    buffer never sits a few bytes after the send buffer modulo a page, as two consecutive exact-size heap
//    allocations do (malloc's 16-byte header: 1.2-1.3x the time of an all-reduce of 16-256 KiB over Open MPI
//    shared memory, docs/comm.md). This is what osu_allreduce (one page-aligned pair for every size) and
//    nccl-tests (one pair for the largest size) do. Latency mode had fresh exact-size pairs until issue 14
//    showed that they charged the trainer's TP all-reduces (in place, one buffer) for that penalty.
//  - Views never own memory: they are valid while the BlockBuffers that made them lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "commbench/comm_sweep.hpp"
#include "runtime/comm.hpp"

namespace itertime::calibrate {

constexpr std::size_t kBufferAlignment = 4096;  // a page: what osu_allreduce aligns its buffers to

struct BufferBytes {
  std::size_t send = 0;
  std::size_t recv = 0;
};

BufferBytes point_buffer_bytes(const PointSpec& point);
BufferBytes largest_buffer_bytes(const std::vector<PointSpec>& points);

// Bytes from `address` to the next multiple of `alignment` (0 when already aligned); alignment > 0.
std::size_t bytes_to_alignment(std::uintptr_t address, std::size_t alignment);

// A non-owning CommBuffer over bytes [offset, offset + bytes) of another, so that copy_in/copy_out and the
// calls work on it unchanged.
class BufferView final : public CommBuffer {
 public:
  BufferView(CommBuffer& base, std::size_t offset, std::size_t bytes);
  void* data() override;
  std::size_t bytes() const override { return bytes_; }

 private:
  CommBuffer* base_;
  std::size_t offset_;
  std::size_t bytes_;
};

// How the buffers are obtained: Communicator::allocate in the sweep, a fake in the tests.
using AllocateBuffer = std::function<std::unique_ptr<CommBuffer>(std::size_t bytes)>;

struct PointBuffers {
  std::unique_ptr<CommBuffer> send;  // point_buffer_bytes(point).send bytes
  std::unique_ptr<CommBuffer> recv;  // point_buffer_bytes(point).recv bytes
};

class BlockBuffers {
 public:
  // `points`: those of the block that will be measured (the shared pair is sized for the largest of them).
  BlockBuffers(const std::vector<PointSpec>& points, AllocateBuffer allocate);
  BlockBuffers(const BlockBuffers&) = delete;
  BlockBuffers& operator=(const BlockBuffers&) = delete;

  // Views of the shared pair; a point larger than the pair is an InternalError.
  PointBuffers for_point(const PointSpec& point);

 private:
  AllocateBuffer allocate_;
  BufferBytes capacity_;  // usable (aligned) bytes of the shared pair
  std::unique_ptr<CommBuffer> shared_send_;
  std::unique_ptr<CommBuffer> shared_recv_;
  std::size_t send_offset_ = 0;  // from the start of the shared buffer to its first aligned byte
  std::size_t recv_offset_ = 0;
};

}  // namespace itertime::calibrate
