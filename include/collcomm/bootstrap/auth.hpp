// collcomm/bootstrap/auth.hpp — what the tcp bootstrap's handshake proves, and with what.
//
//   siphash24(key, bytes)   SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input
//                           PRF", 2012), written from the paper; a keyed hash, 64-bit output
//   random_bytes(out)       getrandom(2): the kernel's CSPRNG, for tokens and nonces
//   job_id(token)           the public id in every message header (wire.hpp): one-way from the
//                           token, so seeing it does not give the token
//   hello_mac / welcome_mac the MACs of the handshake, keyed by the token, over rank 0's nonce,
//                           the rank's nonce, the rank and nranks
//
// The job token is 64 bits, so the MACs are as strong as a 64-bit key: an online guess costs a
// connection and (a wrong MAC for a real rank) fails the job loudly; an offline search of 2^64
// keys from a captured handshake is the bound for a token that is a secret. A token derived from
// public facts (env.hpp without COLLCOMM_JOB_TOKEN) is no secret: anyone who can compute it can
// answer the challenge, so it only keeps jobs apart and makes a rank that is claimed twice fail
// the job.
#pragma once

#include <collcomm/bootstrap/wire.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

COLLCOMM_NAMESPACE_BEGIN
namespace bootstrap::auth {

using nonce = std::array<std::byte, wire::nonce_bytes>;

// SipHash-2-4 of `in` under the 128-bit key (k0, k1) (the paper's k as two little-endian words).
constexpr std::uint64_t siphash24(std::uint64_t k0, std::uint64_t k1, std::span<const std::byte> in) noexcept {
  auto rotl = [](std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); };
  std::uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  std::uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  auto round = [&] {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  };
  auto absorb = [&](std::uint64_t m) {
    v3 ^= m;
    round(), round();  // c = 2
    v0 ^= m;
  };
  const std::size_t whole = in.size() / 8 * 8;
  for (std::size_t i = 0; i < whole; i += 8) absorb(wire::detail::get<std::uint64_t>(in.data() + i));
  std::uint64_t last = std::uint64_t(in.size() & 0xff) << 56;  // the length mod 256 in the top byte
  for (std::size_t i = whole; i < in.size(); ++i) last |= std::uint64_t(in[i]) << (8 * (i - whole));
  absorb(last);
  v2 ^= 0xff;
  round(), round(), round(), round();  // d = 4
  return v0 ^ v1 ^ v2 ^ v3;
}

// Fills `out` from the kernel's CSPRNG; throws errc::system if it cannot.
inline void random_bytes(std::span<std::byte> out) {
  std::size_t done = 0;
  for (int tries = 0; done < out.size() && tries < 64; ++tries) {
    const ssize_t k = ::getrandom(out.data() + done, out.size() - done, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0)
      collcomm::detail::fail(errc::system, "bootstrap::auth", no_rank,
                             std::string("getrandom: ") + std::strerror(errno));
    done += static_cast<std::size_t>(k);
  }
  if (done < out.size()) collcomm::detail::fail(errc::system, "bootstrap::auth", no_rank, "getrandom: short reads");
}

inline std::uint64_t random_u64() {
  std::array<std::byte, 8> b;
  random_bytes(b);
  return wire::detail::get<std::uint64_t>(b.data());
}

namespace detail {
// The 128-bit key for one purpose: the token under a per-purpose constant, so the job id and
// the two MACs never share a key.
constexpr std::uint64_t purpose_hello = 0x6f6c6c6568434343ull, purpose_welcome = 0x6d6f636c65574343ull,
                        purpose_job = 0x64696f626a434343ull;

// SipHash over (rank 0's nonce, the rank's nonce, rank, nranks).
inline std::uint64_t handshake_mac(std::uint64_t token, std::uint64_t purpose, const nonce& root, const nonce& member,
                                   int rank, int nranks) noexcept {
  std::array<std::byte, 2 * wire::nonce_bytes + 8> m;
  std::memcpy(m.data(), root.data(), root.size());
  std::memcpy(m.data() + root.size(), member.data(), member.size());
  wire::detail::put<std::uint32_t>(m.data() + 2 * wire::nonce_bytes, static_cast<std::uint32_t>(rank));
  wire::detail::put<std::uint32_t>(m.data() + 2 * wire::nonce_bytes + 4, static_cast<std::uint32_t>(nranks));
  return siphash24(token, purpose, m);
}
}  // namespace detail

// The id that every header carries instead of the token.
constexpr std::uint64_t job_id(std::uint64_t token) noexcept {
  return siphash24(token, detail::purpose_job, std::span<const std::byte>{});
}

inline std::uint64_t hello_mac(std::uint64_t token, const nonce& root, const nonce& member, int rank, int nranks) {
  return detail::handshake_mac(token, detail::purpose_hello, root, member, rank, nranks);
}

inline std::uint64_t welcome_mac(std::uint64_t token, const nonce& root, const nonce& member, int rank, int nranks) {
  return detail::handshake_mac(token, detail::purpose_welcome, root, member, rank, nranks);
}

// Compares two MACs in time independent of where they differ.
constexpr bool mac_equal(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t d = a ^ b;
  d |= d >> 32, d |= d >> 16, d |= d >> 8;
  return (d & 0xff) == 0;
}

}  // namespace bootstrap::auth
COLLCOMM_NAMESPACE_END
