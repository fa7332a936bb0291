// collcomm/bootstrap/wire.hpp — the bootstrap's message format and its parser.
//
// Every bootstrap message is a 32-byte header followed by `length` payload bytes. All integers are
// little-endian, whatever the host:
//
//   offset size field
//   0      4    magic    0x54424343 ("CCBT" as bytes): not a collcomm bootstrap peer otherwise
//   4      2    version  wire::version; a peer speaking another version is refused
//   6      2    type     wire::msg
//   8      8    job      the job id, a public hash of the job token (auth.hpp): a peer of another
//                        job is refused; the token itself never travels
//   16     4    sender   the rank that wrote the message, in [0, nranks)
//   20     4    peer     the destination rank of a p2p message, else -1
//   24     8    length   payload bytes, at most wire::max_payload (64 MiB)
//
// The handshake (tcp.hpp) proves that a rank holds the job token without sending it: on accept,
// rank 0 sends `challenge` with a fresh random nonce; the rank answers `hello` with its own nonce
// and a MAC over both nonces, its rank and nranks (keyed by the token); rank 0 answers `welcome`
// with a MAC over the same, so the rank knows rank 0 holds the token too. A hello recorded in
// one run is worthless in another: the nonce differs.
//
// The parser never trusts its input: truncated, oversized, foreign (magic, version, job) or
// out-of-range (type, sender, peer) input yields a status other than `ok`, never a crash, and a
// reader never allocates more than max_payload because the length is checked before anything is
// read.
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace bootstrap::wire {

inline constexpr std::uint32_t magic = 0x54424343u;  // bytes 'C' 'C' 'B' 'T'
inline constexpr std::uint16_t version = 2;          // 2: job id instead of the token, challenge and MACs
inline constexpr std::size_t header_bytes = 32;
inline constexpr std::uint64_t max_payload = bootstrap::max_payload;
inline constexpr std::size_t nonce_bytes = 16;
inline constexpr std::size_t mac_bytes = 8;
// Payload sizes of the handshake's messages.
inline constexpr std::size_t challenge_bytes = nonce_bytes;
inline constexpr std::size_t hello_bytes = 4 + nonce_bytes + mac_bytes;
inline constexpr std::size_t welcome_bytes = mac_bytes;

enum class msg : std::uint16_t {
  hello = 1,      // non-root -> root: "I am rank `sender`"; payload: u32 nranks, its nonce, MAC
  welcome = 2,    // root -> non-root: every rank arrived; payload: MAC
  gather = 3,     // non-root -> root: this rank's all_gather contribution
  gathered = 4,   // root -> non-root: the concatenated all_gather result
  p2p = 5,        // a send() to rank `peer` (relayed by the root)
  bye = 6,        // non-root -> root: this rank is closing
  abort = 7,      // root -> non-root: the job failed; payload: u8 errc + message text
  challenge = 8,  // root -> a new connection: payload: rank 0's nonce for this connection
};
inline constexpr std::uint16_t msg_first = 1, msg_last = 8;

struct header {
  msg type{};
  std::uint64_t job = 0;
  std::int32_t sender = 0;
  std::int32_t peer = -1;
  std::uint64_t length = 0;
};

enum class status { ok, truncated, trailing, bad_magic, bad_version, bad_type, bad_job, bad_rank, oversized };

constexpr std::string_view to_string(status s) noexcept {
  switch (s) {
    case status::ok:
      return "ok";
    case status::truncated:
      return "truncated message";
    case status::trailing:
      return "bytes after the end of the message";
    case status::bad_magic:
      return "wrong magic (not a collcomm bootstrap peer)";
    case status::bad_version:
      return "unsupported bootstrap wire version";
    case status::bad_type:
      return "unknown message type";
    case status::bad_job:
      return "wrong job id (a peer of another job)";
    case status::bad_rank:
      return "sender or peer rank out of range";
    case status::oversized:
      return "payload longer than the 64 MiB bound";
  }
  return "unknown status";
}

// What a reader expects: the job id, and the number of ranks (sender must be in [0, nranks),
// peer -1 or in [0, nranks)).
struct expect {
  std::uint64_t job = 0;
  int nranks = 0;
};

namespace detail {
template <class U>
constexpr void put(std::byte* p, U v) noexcept {
  for (std::size_t i = 0; i < sizeof(U); ++i) p[i] = std::byte(static_cast<std::uint64_t>(v) >> (8 * i));
}
template <class U>
constexpr U get(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) v |= std::uint64_t(p[i]) << (8 * i);
  return static_cast<U>(v);
}
}  // namespace detail

// Writes the 32-byte header to out[0, header_bytes).
inline void encode_header(const header& h, std::byte* out) noexcept {
  detail::put<std::uint32_t>(out + 0, magic);
  detail::put<std::uint16_t>(out + 4, version);
  detail::put<std::uint16_t>(out + 6, static_cast<std::uint16_t>(h.type));
  detail::put<std::uint64_t>(out + 8, h.job);
  detail::put<std::uint32_t>(out + 16, static_cast<std::uint32_t>(h.sender));
  detail::put<std::uint32_t>(out + 20, static_cast<std::uint32_t>(h.peer));
  detail::put<std::uint64_t>(out + 24, h.length);
}

// A whole message: header (its length replaced by payload.size()) and payload.
inline std::vector<std::byte> encode(header h, std::span<const std::byte> payload) {
  h.length = payload.size();
  std::vector<std::byte> out(header_bytes + payload.size());
  encode_header(h, out.data());
  if (!payload.empty()) std::copy(payload.begin(), payload.end(), out.begin() + header_bytes);
  return out;
}

// Decodes the header at the start of `in` (bytes past the header are not looked at). `out` is
// written only when the result is ok.
inline status decode_header(std::span<const std::byte> in, const expect& e, header& out) noexcept {
  if (in.size() < header_bytes) return status::truncated;
  const std::byte* p = in.data();
  if (detail::get<std::uint32_t>(p) != magic) return status::bad_magic;
  if (detail::get<std::uint16_t>(p + 4) != version) return status::bad_version;
  const auto type = detail::get<std::uint16_t>(p + 6);
  if (type < msg_first || type > msg_last) return status::bad_type;
  if (detail::get<std::uint64_t>(p + 8) != e.job) return status::bad_job;
  const auto sender = static_cast<std::int32_t>(detail::get<std::uint32_t>(p + 16));
  const auto peer = static_cast<std::int32_t>(detail::get<std::uint32_t>(p + 20));
  if (sender < 0 || sender >= e.nranks || peer < -1 || peer >= e.nranks) return status::bad_rank;
  const auto length = detail::get<std::uint64_t>(p + 24);
  if (length > max_payload) return status::oversized;
  out = header{static_cast<msg>(type), e.job, sender, peer, length};
  return status::ok;
}

// Parses exactly one whole message: `in` must hold the header and exactly `length` payload bytes.
// On ok, `payload` views the payload inside `in`.
inline status parse(std::span<const std::byte> in, const expect& e, header& h,
                    std::span<const std::byte>& payload) noexcept {
  header tmp;
  if (auto s = decode_header(in, e, tmp); s != status::ok) return s;
  const std::size_t rest = in.size() - header_bytes;
  if (rest < tmp.length) return status::truncated;
  if (rest > tmp.length) return status::trailing;
  h = tmp;
  payload = in.subspan(header_bytes, static_cast<std::size_t>(tmp.length));
  return status::ok;
}

}  // namespace bootstrap::wire
COLLCOMM_NAMESPACE_END
