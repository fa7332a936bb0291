// collcomm/tuning.hpp — the call-site policies of a collective besides its algorithm: the
// protocol, and the tuning type that carries it with channels, slot bytes and threads.
//
//   collcomm::all_reduce(comm, send, recv, count, op, stream);                          // tuning<>
//   collcomm::all_reduce<collcomm::algo::ring, collcomm::tuning<collcomm::protocol::ll>>(comm, ...);
//   collcomm::all_reduce<collcomm::algo::ring, collcomm::tuning<collcomm::protocol::simple, 8, 1 << 20>>(comm, ...);
//
// A protocol says how the GPU executor moves FIFO messages (DESIGN.md, "The GPU data path"):
//   simple — bulk data in the slot, then a fence and the tail counter; ~100 % payload.
//   ll     — 16-byte lines of (4 B data, 4 B flag, 4 B data, 4 B flag), each half written and read
//            as one 8-byte access, the flag being the message number: no fence, no tail to wait
//            for, the lowest latency; 50 % payload (kernels/ll_fifo.cuh).
//   ll128  — 128-byte lines of 120 B data and an 8-byte flag, each written and read by 8 lanes of
//            one warp; relies on a warp's 128-byte store reaching a reader whole, so transport::nvlink
//            only; 94 % payload, latency near ll's (kernels/ll128_fifo.cuh).
// Protocol and threads pick the kernel (compile time: no run-time dispatch over them); channels
// and slot bytes are launch parameters of that kernel, bounded by what the world allocated.
// The host executor honors channels and slot bytes and ignores protocol and threads; the symbolic
// executor takes none. Every rank of a call passes the same tuning (as it passes the same
// algorithm): the ranks of one GPU that do not are refused before the launch.
#pragma once

#include <collcomm/config.hpp>

#include <concepts>
#include <cstddef>

COLLCOMM_NAMESPACE_BEGIN
namespace protocol {

struct simple {
  static constexpr const char* name = "simple";
};
struct ll {
  static constexpr const char* name = "ll";
};
struct ll128 {
  static constexpr const char* name = "ll128";
};

}  // namespace protocol

template <class P>
concept protocol_tag =
    std::same_as<P, protocol::simple> || std::same_as<P, protocol::ll> || std::same_as<P, protocol::ll128>;

// Protocol: how FIFO messages move (above).
// Channels: thread blocks (GPU) or channel passes (host) per rank and call; 0 takes the world's
//   options::channels, and more than that is refused (connections exist for those only).
// SlotBytes: bytes of one FIFO message; 0 takes the world's options::slot_bytes, and more than
//   that is refused. Smaller messages start the pipeline sooner and cost more steps.
// Threads: threads per block (GPU); 512 moves 8 KiB per pass with 16-byte vectors.
template <class Protocol = protocol::simple, int Channels = 0, std::size_t SlotBytes = 0, int Threads = 512>
struct tuning {
  static_assert(protocol_tag<Protocol>,
                "collcomm tuning: the protocol is collcomm::protocol::simple, ll or ll128");
  static_assert(Channels >= 0, "collcomm tuning: Channels is at least 1 (or 0: the world's options::channels)");
  static_assert(
      SlotBytes % 16 == 0 && SlotBytes <= (std::size_t{1} << 31),
      "collcomm tuning: SlotBytes is a multiple of 16, at most 2 GiB (or 0: the world's options::slot_bytes)");
  static_assert(Threads >= 32 && Threads <= 1024 && Threads % 32 == 0,
                "collcomm tuning: Threads is a multiple of 32 in [32, 1024]");
  using protocol = Protocol;
  static constexpr int channels = Channels;
  static constexpr std::size_t slot_bytes = SlotBytes;
  static constexpr int threads = Threads;
};

// The default of every collective's Tuning argument.
using default_tuning = tuning<>;

template <class Tu>
concept tuning_like = protocol_tag<typename Tu::protocol> && requires {
  { Tu::channels } -> std::convertible_to<int>;
  { Tu::slot_bytes } -> std::convertible_to<std::size_t>;
  { Tu::threads } -> std::convertible_to<int>;
};

// The part of a tuning that changes the generated code (protocol, threads): tunings that differ
// only in launch parameters share one kernel.
template <tuning_like Tu>
using kernel_tuning = tuning<typename Tu::protocol, 0, 0, Tu::threads>;

// The channels and slot bytes a call with tuning Tu runs with on a world of `channels` and
// `slot_bytes`: the tuning's, or the world's where it names none (0). A tuning that asks for more
// than the world allocated is refused by the executor, except an arm of algo::automatic
// (Tu::capped_to_world, algo/automatic.hpp), which runs with the world's.
template <tuning_like Tu>
inline constexpr bool capped_to_world = [] {
  if constexpr (requires { Tu::capped_to_world; })
    return static_cast<bool>(Tu::capped_to_world);
  else
    return false;
}();
template <tuning_like Tu>
constexpr int tuned_channels(int world_channels) noexcept {
  const int c = Tu::channels ? Tu::channels : world_channels;
  return capped_to_world<Tu> && c > world_channels ? world_channels : c;
}
template <tuning_like Tu>
constexpr std::size_t tuned_slot_bytes(std::size_t world_slot_bytes) noexcept {
  const std::size_t b = Tu::slot_bytes ? Tu::slot_bytes : world_slot_bytes;
  return capped_to_world<Tu> && b > world_slot_bytes ? world_slot_bytes : b;
}

COLLCOMM_NAMESPACE_END
