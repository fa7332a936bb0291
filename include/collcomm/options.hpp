// collcomm/options.hpp — the options every world has, whichever executor runs it: the core that
// host::options (host/options.hpp) and gpu::options (gpu/options.hpp) share. Each executor's
// options derive from it, give the fields their own defaults and add their own fields;
// check_common_options is the one check of the shared fields, each executor adding its own rules
// after it. Nothing here reads the environment: gpu::with_environment and bootstrap/env.hpp are
// the places that do.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

COLLCOMM_NAMESPACE_BEGIN

struct common_options {
  // Channels each call is split over: thread blocks per rank on the GPU (0: automatic), passes
  // one after the other on the host. At most max_channels.
  int channels = 0;
  // Bytes of one FIFO slot: the largest message. A multiple of 16 in [16, max_slot_bytes].
  std::size_t slot_bytes = 0;
  // Slots of each connection (channel, sender -> receiver): how many messages a sender may run
  // ahead of its receiver. In [1, max_slots].
  int slots = 8;
  // The bound of every wait (a message, a free slot, a barrier, the launch rendezvous); a wait
  // that runs out is an error naming the waiting rank and the peer. > 0.
  std::chrono::milliseconds timeout{10000};
  // Worlds of processes: bytes of each rank's window through which the direct algorithms
  // (one_shot, two_shot, direct) stage a call's buffers. At most max_window_bytes.
  std::size_t window_bytes = 0;

  static constexpr int max_channels = 1024;
  static constexpr std::size_t max_slot_bytes = std::size_t{1} << 30;
  static constexpr int max_slots = 1 << 16;
  static constexpr std::size_t max_window_bytes = std::size_t{1} << 40;
};

// Throws errc::invalid_argument naming the first shared option out of its range, and `rank`
// (no_rank: the world's). Also bounds what a world allocates per connection, so that no size
// product of these options can wrap: channels x slots x slot_bytes <= 2^46.
//
// Upper bounds, all checked when a world is made (errc::invalid_argument naming the option):
//   channels                        1024 (host worlds: 64)
//   slot_bytes                      2^30
//   slots                           2^16
//   window_bytes                    2^40
//   channels x slots x slot_bytes   2^46
//   nranks                          host worlds: 1024
// A world of processes also lays its ranks' shared memory out from them: the host's segment holds
// nranks^2 x channels x slots x (slot_bytes + 64) bytes of connections and nranks x window_bytes
// of windows, a GPU rank nranks x channels x slots x (slot_bytes + 64) of connections and
// 4 x window_bytes of windows; a size past 2^64 is errc::invalid_argument naming the options, and
// one that fits in 64 bits but not in /dev/shm (or GPU memory) errc::system giving the size. Host
// worlds of threads also refuse a connection (slots x (slot_bytes + 64)) larger than the host's
// memory.
namespace detail {

// Sizes computed from options (a segment's offsets and size, an allocation), never wrapping: a
// result past SIZE_MAX throws errc::invalid_argument on `rank`, naming `options` (the options and
// arguments the size comes from).
class option_sizes {
 public:
  option_sizes(const char* where, int rank, const char* options) noexcept
      : where_(where), rank_(rank), options_(options) {}
  std::size_t mul(std::size_t a, std::size_t b) const {
    std::size_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) overflow(std::to_string(a) + " x " + std::to_string(b));
    return r;
  }
  std::size_t add(std::size_t a, std::size_t b) const {
    std::size_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) overflow(std::to_string(a) + " + " + std::to_string(b));
    return r;
  }
  // x rounded up to a multiple of `a` (> 0).
  std::size_t align_up(std::size_t x, std::size_t a) const { return mul(add(x, a - 1) / a, a); }

 private:
  [[noreturn]] void overflow(const std::string& op) const {
    fail(errc::invalid_argument, where_, rank_,
         std::string(options_) + " are too large: the size they make (" + op +
             " bytes) does not fit in 64 bits; lower them (bounds in collcomm/options.hpp)");
  }
  const char* where_;
  int rank_;
  const char* options_;
};

}  // namespace detail

inline void check_common_options(const common_options& o, const char* where, int rank) {
  auto bad = [&](const std::string& msg) { detail::fail(errc::invalid_argument, where, rank, msg); };
  if (o.channels < 0 || o.channels > common_options::max_channels)
    bad("option 'channels' = " + std::to_string(o.channels) + " is out of range [0, " +
        std::to_string(common_options::max_channels) + "]");
  if (o.slot_bytes < 16 || o.slot_bytes % 16 != 0 || o.slot_bytes > common_options::max_slot_bytes)
    bad("option 'slot_bytes' = " + std::to_string(o.slot_bytes) + " must be a multiple of 16 in [16, 2^30]");
  if (o.slots < 1 || o.slots > common_options::max_slots)
    bad("option 'slots' = " + std::to_string(o.slots) + " is out of range [1, " + std::to_string(common_options::max_slots) +
        "]");
  if (o.timeout.count() <= 0) bad("option 'timeout' = " + std::to_string(o.timeout.count()) + " ms must be > 0");
  if (o.window_bytes > common_options::max_window_bytes)
    bad("option 'window_bytes' = " + std::to_string(o.window_bytes) + " is more than 2^40");
  const std::uint64_t per_connection_set = static_cast<std::uint64_t>(o.channels > 0 ? o.channels : 1) *
                                           static_cast<std::uint64_t>(o.slots) * o.slot_bytes;
  if (per_connection_set > (std::uint64_t{1} << 46))
    bad("options 'channels' x 'slots' x 'slot_bytes' = " + std::to_string(per_connection_set) +
        " bytes per pair of ranks is more than 2^46");
}

COLLCOMM_NAMESPACE_END
