// tests/fuzz/wire_oracle.hpp — what must hold for any bytes given to the bootstrap's parsers.
// Shared by the libFuzzer target (tests/fuzz/fuzz_wire.cpp) and the bounded random test that CI
// runs (tests/bootstrap/test_wire_random.cpp), so both check the same properties.
//
// check_input(data) runs every parser that reads bytes from outside the process:
//   - wire::parse / wire::decode_header on one message: ok only for a message that re-encodes to
//     exactly the same bytes, whose fields are in range and whose payload lies inside the input;
//     any other input gives a status other than ok. decode_header agrees with parse.
//   - a stream of messages read the way a socket reader does (header, then `length` bytes): no
//     message may claim more than wire::max_payload, and the reader stops cleanly at the end.
//   - unique_id::from_bytes / from_string (ids passed between processes by users): a
//     collcomm::error or an id that round-trips; never another exception.
//   - the environment's integer parser: a collcomm::error or a value inside its bounds.
// It returns nullptr when everything held, else what was violated (the fuzzer aborts on it).
//
// Input layout: byte 0 = flags (bit 0: expect the job id the message itself carries, so the
// fuzzer gets past the job check quickly), byte 1 = nranks - 1, the rest = the message.
#pragma once

#include <collcomm/bootstrap/env.hpp>
#include <collcomm/bootstrap/tcp.hpp>
#include <collcomm/bootstrap/wire.hpp>

#include <cstddef>
#include <span>
#include <string>

namespace wire_oracle {

namespace wire = collcomm::bootstrap::wire;
namespace bs = collcomm::bootstrap;

inline constexpr std::uint64_t fixed_job = 0x5eed5eed12345678ull;

inline const char* check_message(std::span<const std::byte> in, const wire::expect& e) {
  wire::header h{}, hd{};
  std::span<const std::byte> payload;
  const auto s = wire::parse(in, e, h, payload);
  const auto sd = wire::decode_header(in, e, hd);
  if (s == wire::status::ok) {
    if (sd != wire::status::ok) return "parse ok but decode_header not ok";
    if (hd.type != h.type || hd.job != h.job || hd.sender != h.sender || hd.peer != h.peer || hd.length != h.length)
      return "decode_header and parse disagree";
    if (h.job != e.job) return "ok with a foreign job id";
    if (h.sender < 0 || h.sender >= e.nranks) return "ok with sender out of range";
    if (h.peer < -1 || h.peer >= e.nranks) return "ok with peer out of range";
    if (static_cast<std::uint16_t>(h.type) < wire::msg_first || static_cast<std::uint16_t>(h.type) > wire::msg_last)
      return "ok with bad type";
    if (h.length > wire::max_payload) return "ok with an oversized length";
    if (in.size() != wire::header_bytes + h.length) return "ok but the input is not exactly one message";
    if (payload.size() != h.length || payload.data() != in.data() + wire::header_bytes)
      return "payload view outside the message";
    const auto again = wire::encode(h, payload);
    if (again.size() != in.size() || !std::equal(again.begin(), again.end(), in.begin()))
      return "ok message does not re-encode to its bytes";
  } else {
    // parse fails with decode_header's status, or (header ok) for the payload's size only.
    if (sd != wire::status::ok && sd != s) return "parse and decode_header give different errors";
    if (sd == wire::status::ok && s != wire::status::truncated && s != wire::status::trailing)
      return "header ok but parse failed otherwise";
    if (sd == wire::status::ok && hd.length > wire::max_payload) return "header ok with an oversized length";
    if (wire::to_string(s).empty()) return "status without text";
  }
  return nullptr;
}

// Reads consecutive messages as tcp's reader does: header, check, then take `length` bytes. The
// allocation a real reader makes is `length`; it must never exceed max_payload.
inline const char* check_stream(std::span<const std::byte> in, const wire::expect& e) {
  std::size_t at = 0;
  for (int guard = 0; guard < 1 << 20; ++guard) {
    if (in.size() - at < wire::header_bytes) return nullptr;  // needs more bytes: a reader waits, bounded
    wire::header h{};
    if (wire::decode_header(in.subspan(at, wire::header_bytes), e, h) != wire::status::ok)
      return nullptr;  // the connection is dropped
    if (h.length > wire::max_payload) return "stream: a header allows a payload over max_payload";
    at += wire::header_bytes;
    if (in.size() - at < h.length) return nullptr;
    at += static_cast<std::size_t>(h.length);
  }
  return "stream: reader did not progress";
}

inline const char* check_ids(std::span<const std::byte> in) {
  try {
    auto id = bs::unique_id::from_bytes(in.first(std::min(in.size(), bs::unique_id::size_bytes)));
    if (bs::unique_id::from_bytes(id.to_bytes()) != id) return "unique_id bytes do not round-trip";
    if (bs::unique_id::from_string(id.to_string()) != id) return "unique_id from bytes does not round-trip as text";
  } catch (const collcomm::error&) {
  } catch (...) {
    return "unique_id::from_bytes threw something other than collcomm::error";
  }
  const std::string text(reinterpret_cast<const char*>(in.data()), in.size());
  try {
    auto id = bs::unique_id::from_string(text);
    if (bs::unique_id::from_string(id.to_string()) != id) return "unique_id text does not round-trip";
    if (bs::unique_id::from_bytes(id.to_bytes()) != id) return "unique_id from text does not round-trip as bytes";
  } catch (const collcomm::error&) {
  } catch (...) {
    return "unique_id::from_string threw something other than collcomm::error";
  }
  try {
    const long long v = bs::detail::parse_int("X", text.substr(0, 40), 3, 1 << 24);
    if (v < 3 || v > (1 << 24)) return "parse_int out of its bounds";
  } catch (const collcomm::error&) {
  } catch (...) {
    return "parse_int threw something other than collcomm::error";
  }
  return nullptr;
}

inline const char* check_input(std::span<const std::byte> data) {
  if (data.size() < 2) return nullptr;
  const auto flags = static_cast<unsigned>(data[0]);
  const int nranks = 1 + static_cast<int>(data[1]);
  const auto msg = data.subspan(2);
  std::uint64_t job = fixed_job;
  if ((flags & 1) && msg.size() >= 16) job = wire::detail::get<std::uint64_t>(msg.data() + 8);
  const wire::expect e{job, nranks};
  if (auto r = check_message(msg, e)) return r;
  if (auto r = check_stream(msg, e)) return r;
  return check_ids(msg);
}

}  // namespace wire_oracle
