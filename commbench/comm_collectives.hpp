// comm_collectives.hpp: each collective as a small plugin, in the manner of nccl-tests: how a labelled
// message size maps to element counts, its bus-bandwidth factor, how to run it, and how to fill and
// check its buffers.
// Invariants:
//  - `bytes` is the nccl-tests size: all_reduce/broadcast/P2P the buffer; all_gather the receive buffer
//    (count * n); reduce_scatter and all_to_all the send buffer (count * n).
//  - The collectives, their names and bus-bandwidth factors are common/collective.hpp's (one definition
//    shared with the comm model); this file adds what running and checking them needs.
//  - fill/check use values in {-1, 0, 1} (value(rank, i) = (rank + i) % 3 - 1), so every expected sum
//    is a small integer, exact in fp32, fp16, bf16 and int8 for groups of up to 127 ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/collective.hpp"
#include "common/dtype.hpp"
#include "runtime/comm.hpp"

namespace itertime::calibrate {

// The shared vocabulary (common/collective.hpp), named here as the sweep's code always has.
using itertime::all_collectives;
using itertime::busbw_factor;
using itertime::Collective;
using itertime::is_point_to_point;
using itertime::parse_collective;

// Elements per call (the `count` argument of the Communicator call); 0 when `bytes` is too small.
std::size_t element_count(Collective collective, std::size_t bytes, int group_size, DType dtype);
// Bytes the point really moves in nccl-tests terms, after rounding `bytes` down to whole elements.
std::size_t labelled_bytes(Collective collective, std::size_t count, int group_size, DType dtype);
std::size_t send_elements(Collective collective, std::size_t count, int group_size);
std::size_t recv_elements(Collective collective, std::size_t count, int group_size);

// Runs one call on `comm` (not synchronized). send/recv are buffers of send_elements/recv_elements.
void run_collective(Collective collective, Communicator& comm, void* send, void* recv, std::size_t count, DType dtype);

// The host contents of the send buffer and of the receive buffer before the call (broadcast works in
// place in the receive buffer).
void fill_buffers(Collective collective, DType dtype, int rank, int group_size, std::size_t count,
                  std::vector<uint8_t>& send_host, std::vector<uint8_t>& recv_host);

struct CheckResult {
  std::size_t errors = 0;   // elements that differ from the expected value
  std::string first_error;  // "element 12: got 3, want 1" or empty
};
// Checks the receive buffer after the call; a rank whose receive buffer carries no result (the sender of
// a one-way send) always passes.
CheckResult check_result(Collective collective, DType dtype, int rank, int group_size, std::size_t count,
                         const std::vector<uint8_t>& recv_host);

// Element encoding used by fill/check: a small integer value as `dtype`.
void encode_value(DType dtype, double value, uint8_t* destination);
double decode_value(DType dtype, const uint8_t* source);

}  // namespace itertime::calibrate
