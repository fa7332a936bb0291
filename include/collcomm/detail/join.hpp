// collcomm/detail/join.hpp — what both executors' worlds of processes use to join over a
// bootstrap: a random job token, fixed-size records all-gathered, per-rank statuses (an error on
// any rank becomes an error on every rank, naming it), and this machine's identity.
//
// This folder (detail/): what both executors share — CUDA helpers, shared-memory segments, join
// exchanges. It includes config and error only.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace detail {

inline std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 64 random bits, never 0: names a world's shared-memory segments.
inline std::uint64_t random_token() {
  std::random_device rd;
  std::uint64_t t = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  t ^= mix64(static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
             (static_cast<std::uint64_t>(::getpid()) << 32));
  return t == 0 ? 1 : t;
}

// Every rank's copy of a trivially copyable record, in rank order.
template <class Rec, class B>
std::vector<Rec> all_gather_records(B& boot, const Rec& mine) {
  std::vector<Rec> all(static_cast<std::size_t>(boot.size()));
  boot.all_gather(std::span<const std::byte>(reinterpret_cast<const std::byte*>(&mine), sizeof mine),
                  std::span<std::byte>(reinterpret_cast<std::byte*>(all.data()), sizeof(Rec) * all.size()));
  return all;
}

// A status record exchanged over the bootstrap: empty text = ok.
inline constexpr std::size_t status_bytes = 512;

template <class B>
std::vector<std::string> exchange_status(B& boot, const std::string& err) {
  std::vector<std::byte> mine(status_bytes, std::byte{0}), all(status_bytes * static_cast<std::size_t>(boot.size()));
  std::memcpy(mine.data(), err.data(), std::min(err.size(), status_bytes - 1));
  boot.all_gather(std::span<const std::byte>(mine), std::span<std::byte>(all));
  std::vector<std::string> out(static_cast<std::size_t>(boot.size()));
  for (std::size_t r = 0; r < out.size(); ++r) {
    const char* p = reinterpret_cast<const char*>(all.data() + r * status_bytes);
    out[r] = std::string(p, strnlen(p, status_bytes - 1));
  }
  return out;
}

// Throws errc::system on this rank when any rank's status is an error, naming those ranks:
// "rank(s) 2, 5 could not join <world>: <the first error>".
inline void check_statuses(const std::vector<std::string>& errs, const char* where, int rank, const char* world) {
  std::string ranks, first;
  for (std::size_t r = 0; r < errs.size(); ++r)
    if (!errs[r].empty()) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      if (first.empty()) first = errs[r];
    }
  if (!ranks.empty()) fail(errc::system, where, rank, "rank(s) " + ranks + " could not join " + world + ": " + first);
}

// This machine: its host name and boot id, hashed (pids are only comparable on one host).
inline std::uint64_t host_id() {
  std::string s(256, '\0');
  if (::gethostname(s.data(), s.size()) != 0) s = "?";
  s.resize(std::strlen(s.c_str()));
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string b;
  std::getline(boot_id, b);
  s += "/" + b;
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// "2, 5, 7"
inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// The bootstrap that a group of a parent bootstrap's ranks joins a world over, while every other
// group joins its own at the same time: each all_gather is one of the parent's, which every
// parent rank makes (a rank of no group, or whose join failed early, makes barriers until it made
// as many as the others), in frames of `frame_bytes` (a size word and the payload), so that the
// groups' records may differ in size. Keeps the members' payloads, in group-rank order. All-gathers
// only: send and recv are refused. Its errors name ranks of the parent.
template <class B>
class subset_bootstrap {
 public:
  static constexpr std::size_t frame_bytes = 512;
  // `members`: the group's parent ranks in group-rank order (empty: no group); `rank`: this
  // rank's place in it (-1: none).
  subset_bootstrap(B& parent, std::vector<int> members, int rank)
      : parent_(&parent), members_(std::move(members)), rank_(rank) {}
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return static_cast<int>(members_.size()); }
  int rounds() const noexcept { return rounds_; }
  void all_gather(std::span<const std::byte> in, std::span<std::byte> out) {
    if (in.size() > frame_bytes || out.size() != in.size() * members_.size())
      fail(errc::internal, "subset_bootstrap", parent_->rank(),
           "an all_gather of " + std::to_string(in.size()) + " bytes into " + std::to_string(out.size()) +
               " does not fit its frames");
    ++rounds_;
    constexpr std::size_t stride = 8 + frame_bytes;
    std::vector<std::byte> mine(stride, std::byte{0});
    const std::uint64_t size = in.size();
    std::memcpy(mine.data(), &size, 8);
    if (!in.empty()) std::memcpy(mine.data() + 8, in.data(), in.size());
    std::vector<std::byte> all(stride * static_cast<std::size_t>(parent_->size()));
    parent_->all_gather(std::span<const std::byte>(mine), std::span<std::byte>(all));
    for (std::size_t i = 0; i < members_.size(); ++i) {
      const std::byte* f = all.data() + stride * static_cast<std::size_t>(members_[i]);
      std::uint64_t k = 0;
      std::memcpy(&k, f, 8);
      if (k != in.size())
        fail(errc::invalid_usage, "subset_bootstrap", parent_->rank(),
             "rank " + std::to_string(members_[i]) + " gave " + std::to_string(k) + " bytes, this rank " +
                 std::to_string(in.size()) + " (the group's ranks are not in the same exchange)");
      if (!in.empty()) std::memcpy(out.data() + i * in.size(), f + 8, in.size());
    }
  }
  void barrier() { all_gather({}, {}); }
  void send(int, std::span<const std::byte>) { refuse(); }
  void recv(int, std::span<std::byte>) { refuse(); }

 private:
  [[noreturn]] void refuse() const {
    fail(errc::internal, "subset_bootstrap", parent_->rank(), "a group's bootstrap carries all-gathers only");
  }
  B* parent_;
  std::vector<int> members_;
  int rank_;
  int rounds_ = 0;
};

}  // namespace detail
COLLCOMM_NAMESPACE_END
