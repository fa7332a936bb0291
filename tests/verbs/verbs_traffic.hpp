// tests/verbs/verbs_traffic.hpp — ranks as threads running net<ibverbs> connections over the verbs
// double: every rank connects to every other rank on every channel through an exchange of
// local_info() blobs, then sends `messages` messages of random sizes and random bytes to each
// (peer, channel) and checks each one it receives (size, bytes, order). Every loop is bounded by a
// deadline; a hook lets a fault test act from inside a rank's loop.
#pragma once

#include "verbs/verbs_double.hpp"

#include <collcomm/transport/ibverbs/connection.hpp>

#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace verbs_test {

namespace tr = collcomm::transport;
using clock_type = std::chrono::steady_clock;

// A fresh seed per run, or COLLCOMM_TEST_SEED to replay one; printed once.
inline std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    std::uint64_t s;
    if (const char* e = std::getenv("COLLCOMM_TEST_SEED"); e != nullptr && *e != '\0')
      s = std::strtoull(e, nullptr, 10);
    else
      s = (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    std::printf("verbs tests: seed %llu (COLLCOMM_TEST_SEED=%llu replays)\n", static_cast<unsigned long long>(s),
                static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Message m from src to dst on channel ch: its size (0 and slot_bytes included) and bytes.
inline std::uint64_t message_key(std::uint64_t seed, int src, int dst, int ch, std::uint64_t m) {
  return mix(seed ^ mix((std::uint64_t(src) << 48) ^ (std::uint64_t(dst) << 32) ^ (std::uint64_t(ch) << 24) ^ mix(m)));
}
inline std::size_t message_size(std::uint64_t key, std::uint64_t m, std::size_t slot_bytes) {
  if (m % 17 == 5) return slot_bytes;
  if (m % 13 == 7) return 0;
  return mix(key) % (slot_bytes + 1);
}
inline void fill_message(std::byte* p, std::size_t n, std::uint64_t key) {
  std::uint64_t s = key;
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t v = mix(s++);
    std::memcpy(p + i, &v, std::min<std::size_t>(8, n - i));
  }
}
inline bool check_message(const std::byte* p, std::size_t n, std::uint64_t key) {
  std::uint64_t s = key;
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t v = mix(s++);
    if (std::memcmp(p + i, &v, std::min<std::size_t>(8, n - i)) != 0) return false;
  }
  return true;
}

struct peer_link {
  int peer;
  int channel;
  std::vector<std::byte> send_mem, recv_mem;  // external_slots: the slots conn was given (outlive it)
  std::unique_ptr<tr::ibverbs_connection> conn;
  std::uint64_t next_send = 0;
  std::uint64_t next_recv = 0;
};

// What a fault test can do from inside rank r's loop (iteration i); returning true makes the rank
// stop at once, as if it had died (its objects are destroyed at the end, after the others stop).
using hook_fn = std::function<bool(int rank, std::uint64_t iteration, std::vector<peer_link>& links)>;

struct traffic_options {
  int ranks = 2;
  int channels = 1;
  tr::ibverbs_connection_options conn{};
  // The slots in memory the rank gives each connection (conn.send_slots, recv_slots), not its own.
  bool external_slots = false;
  std::uint64_t messages = 200;
  int slow_permille = 0;  // per (arrived message, iteration): the chance a receiver leaves it for later
  std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  std::chrono::milliseconds deadline{60000};
  hook_fn hook;
  // Fault tests: stop every rank once this rank throws (any_rank: once any rank throws). A rank
  // that throws stops by itself either way.
  static constexpr int no_rank = -2, any_rank = -1;
  int stop_on_error_of = no_rank;
};

struct rank_result {
  std::optional<collcomm::error> error;
  std::string failure;  // a check of this test that failed (wrong data, deadline)
  bool finished = false;
  bool vanished = false;
  double seconds_to_error = 0;
};

inline std::vector<rank_result> run_traffic(const traffic_options& o, std::uint64_t seed) {
  auto& fab = verbs_double::fabric::instance();
  fab.reset(verbs_double::uniform_devices(o.ranks, o.link_layer));
  const tr::verbs_api api = fab.api();

  std::vector<rank_result> results(static_cast<std::size_t>(o.ranks));
  // (src, dst, channel) → the blob src made for dst
  std::vector<tr::ibverbs_qp_info> board(static_cast<std::size_t>(o.ranks * o.ranks * o.channels));
  auto slot = [&](int src, int dst, int ch) -> tr::ibverbs_qp_info& {
    return board[static_cast<std::size_t>((src * o.ranks + dst) * o.channels + ch)];
  };
  std::barrier sync(o.ranks);
  std::atomic<int> finished{0};
  std::atomic<bool> stop{false};
  const auto start = clock_type::now();
  const auto deadline = start + o.deadline;

  auto rank_main = [&](int r) {
    rank_result& res = results[static_cast<std::size_t>(r)];
    auto record = [&](const collcomm::error& e) {
      if (!res.error) {
        res.error = e;
        res.seconds_to_error = std::chrono::duration<double>(clock_type::now() - start).count();
      }
      if (o.stop_on_error_of == traffic_options::any_rank || o.stop_on_error_of == r) stop = true;
    };
    std::unique_ptr<tr::ibverbs_context> ctx;
    std::vector<peer_link> links;
    // Set-up: the context and one connection per (peer, channel); publish the blobs.
    try {
      ctx = std::make_unique<tr::ibverbs_context>(api, r, tr::ibverbs_context_options{"mockdev" + std::to_string(r), -1});
      for (int p = 0; p < o.ranks; ++p)
        for (int c = 0; c < o.channels; ++c)
          if (p != r) {
            peer_link l{p, c, {}, {}, nullptr};
            tr::ibverbs_connection_options co = o.conn;
            if (o.external_slots) {
              l.send_mem.assign(std::size_t{co.slots} * co.slot_bytes, std::byte{0});
              l.recv_mem.assign(std::size_t{co.slots} * co.slot_bytes, std::byte{0});
              co.send_slots = l.send_mem.data();
              co.recv_slots = l.recv_mem.data();
            }
            l.conn = std::make_unique<tr::ibverbs_connection>(*ctx, p, c, co);
            links.push_back(std::move(l));
            slot(r, p, c) = links.back().conn->local_info();
          }
    } catch (const collcomm::error& e) {
      record(e);
    }
    sync.arrive_and_wait();
    // Connect; no barrier after: a rank may write to a peer that is still connecting.
    try {
      if (!res.error)
        for (auto& l : links) l.conn->connect(slot(l.peer, r, l.channel));
    } catch (const collcomm::error& e) {
      record(e);
    }
    std::mt19937_64 rng(mix(seed ^ std::uint64_t(r)));
    bool counted = false;
    try {
      for (std::uint64_t it = 0; !res.error && !stop; ++it) {
        if (finished.load() == o.ranks) break;
        if (clock_type::now() > deadline) {
          res.failure = "deadline of " + std::to_string(o.deadline.count()) + " ms passed on rank " + std::to_string(r) + ":";
          for (auto& l : links)
            res.failure += " [peer " + std::to_string(l.peer) + " ch " + std::to_string(l.channel) + " sent " +
                           std::to_string(l.next_send) + " received " + std::to_string(l.next_recv) + "]";
          stop = true;
          break;
        }
        if (o.hook && o.hook(r, it, links)) {
          res.vanished = true;
          break;
        }
        bool all = true;
        bool moved = false;
        for (auto& l : links) {
          auto& c = *l.conn;
          for (int k = 0; k < 4 && l.next_send < o.messages && c.can_send(l.next_send); ++k) {
            const std::uint64_t key = message_key(seed, r, l.peer, l.channel, l.next_send);
            const std::size_t n = message_size(key, l.next_send, c.slot_bytes());
            fill_message(c.send_buffer(l.next_send), n, key);
            c.post(l.next_send, n, key);  // the tag (tagged connections): the message's key
            ++l.next_send;
            moved = true;
          }
          moved = c.progress() || moved;
          while (c.arrived(l.next_recv)) {
            if (o.slow_permille > 0 && static_cast<int>(rng() % 1000) < o.slow_permille) break;
            const std::uint64_t m = l.next_recv;
            const std::uint64_t key = message_key(seed, l.peer, r, l.channel, m);
            const std::size_t n = message_size(key, m, c.slot_bytes());
            if (o.conn.tagged && c.recv_tag(m) != key) {
              res.failure = "rank " + std::to_string(r) + " from peer " + std::to_string(l.peer) + " channel " +
                            std::to_string(l.channel) + ": message " + std::to_string(m) + " has tag " +
                            std::to_string(c.recv_tag(m)) + ", expected " + std::to_string(key);
              stop = true;
              break;
            }
            if (c.recv_bytes(m) != n || !check_message(c.recv_buffer(m), n, key)) {
              res.failure = "rank " + std::to_string(r) + " from peer " + std::to_string(l.peer) + " channel " +
                            std::to_string(l.channel) + ": message " + std::to_string(m) + " has " +
                            std::to_string(c.recv_bytes(m)) + " bytes (expected " + std::to_string(n) + ")" +
                            (c.recv_bytes(m) == n ? " and wrong bytes" : "");
              stop = true;
              break;
            }
            c.release(m);
            ++l.next_recv;
            moved = true;
          }
          all = all && l.next_send == o.messages && l.next_recv == o.messages;
        }
        if (all && !counted) {
          counted = true;
          res.finished = true;
          ++finished;
        }
        // Ranks outnumber cores in CI: one that waits gives its core to the one it waits for.
        if (!moved || (o.slow_permille > 0 && rng() % 64 == 0)) std::this_thread::yield();
      }
    } catch (const collcomm::error& e) {
      record(e);
    }
    // Everyone stops before anyone destroys: a destroyed queue pair is a vanished peer.
    sync.arrive_and_wait();
    links.clear();
    ctx.reset();
  };

  std::vector<std::thread> threads;
  for (int r = 0; r < o.ranks; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace verbs_test
