// point_buffers.cpp: the buffers of the points of a block, shared and page-aligned (point_buffers.hpp).
#include "commbench/point_buffers.hpp"

#include <algorithm>
#include <utility>

#include "commbench/comm_collectives.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {

BufferBytes point_buffer_bytes(const PointSpec& point) {
  const std::size_t element = dtype_bytes(point.dtype);
  BufferBytes bytes;
  bytes.send = std::max(send_elements(point.collective, point.count, point.group_size) * element, element);
  bytes.recv = recv_elements(point.collective, point.count, point.group_size) * element;
  return bytes;
}

BufferBytes largest_buffer_bytes(const std::vector<PointSpec>& points) {
  BufferBytes largest;
  for (const PointSpec& point : points) {
    const BufferBytes bytes = point_buffer_bytes(point);
    largest.send = std::max(largest.send, bytes.send);
    largest.recv = std::max(largest.recv, bytes.recv);
  }
  return largest;
}

std::size_t bytes_to_alignment(std::uintptr_t address, std::size_t alignment) {
  ITERTIME_CHECK(alignment > 0, "alignment must be positive");
  return (alignment - address % alignment) % alignment;
}

BufferView::BufferView(CommBuffer& base, std::size_t offset, std::size_t bytes) : base_(&base), offset_(offset), bytes_(bytes) {
  ITERTIME_CHECK(offset <= base.bytes() && bytes <= base.bytes() - offset, "buffer view past the end of its buffer");
}

void* BufferView::data() { return static_cast<unsigned char*>(base_->data()) + offset_; }

BlockBuffers::BlockBuffers(const std::vector<PointSpec>& points, AllocateBuffer allocate) : allocate_(std::move(allocate)) {
  if (points.empty()) return;
  capacity_ = largest_buffer_bytes(points);
  shared_send_ = allocate_(capacity_.send + kBufferAlignment - 1);
  shared_recv_ = allocate_(capacity_.recv + kBufferAlignment - 1);
  ITERTIME_CHECK(shared_send_ && shared_recv_, "the communicator allocated no buffer");
  send_offset_ = bytes_to_alignment(reinterpret_cast<std::uintptr_t>(shared_send_->data()), kBufferAlignment);
  recv_offset_ = bytes_to_alignment(reinterpret_cast<std::uintptr_t>(shared_recv_->data()), kBufferAlignment);
}

PointBuffers BlockBuffers::for_point(const PointSpec& point) {
  const BufferBytes bytes = point_buffer_bytes(point);
  PointBuffers buffers;
  ITERTIME_CHECK(shared_send_ && bytes.send <= capacity_.send && bytes.recv <= capacity_.recv,
                 "point " + point.key() + " is larger than the buffers of its block");
  buffers.send = std::make_unique<BufferView>(*shared_send_, send_offset_, bytes.send);
  buffers.recv = std::make_unique<BufferView>(*shared_recv_, recv_offset_, bytes.recv);
  return buffers;
}

}  // namespace itertime::calibrate
