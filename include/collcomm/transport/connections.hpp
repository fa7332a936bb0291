// collcomm/transport/connections.hpp — the layout of the GPU transports' FIFO connections in
// memory, shared by every way of placing them (a receiver's GPU memory, host memory, an IPC
// allocation, a shared segment): each receiver holds, for every (channel, src), one FIFO of
//   data (slots x slot_bytes) | sizes (slots x u64) | tail (u64) | head (u64)
// and every rank's kernels address them through a table of fifo_view, (channel, src, dst).
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/transport/device_handle.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

struct connection_layout {
  int nranks;
  int nchannels;
  int slots;
  std::size_t slot_bytes;

  // Each connection starts 128-byte aligned (protocol ll128's lines: kernels/ll128_fifo.cuh).
  std::size_t per_connection() const {
    return (slot_bytes * slots + sizeof(std::uint64_t) * (slots + 2) + 127) / 128 * 128;
  }
  // One receiver's connections: nchannels x nranks FIFOs.
  std::size_t per_receiver() const { return per_connection() * static_cast<std::size_t>(nchannels) * nranks; }

  // The (channel, src, dst) table, from each receiver's connections as this rank's kernels address
  // them (receiver_base[dst]).
  std::vector<fifo_view> table(const std::vector<char*>& receiver_base) const {
    std::vector<fifo_view> t(static_cast<std::size_t>(nchannels) * nranks * nranks);
    for (int dst = 0; dst < nranks; ++dst)
      for (int c = 0; c < nchannels; ++c)
        for (int src = 0; src < nranks; ++src) {
          char* b = receiver_base[static_cast<std::size_t>(dst)] +
                    per_connection() * (static_cast<std::size_t>(c) * nranks + src);
          auto* sizes = reinterpret_cast<std::uint64_t*>(b + slot_bytes * slots);
          t[(static_cast<std::size_t>(c) * nranks + src) * nranks + dst] = {b, sizes, sizes + slots, sizes + slots + 1};
        }
    return t;
  }
};

}  // namespace transport
COLLCOMM_NAMESPACE_END
