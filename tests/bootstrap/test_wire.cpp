// The bootstrap wire format: round trips, and a parser that rejects (never crashes on) every
// truncation, single-byte corruption and random input; the handshake's keyed hash (SipHash-2-4
// test vectors) and the rank-list summaries of error messages.
#include <collcomm/bootstrap/auth.hpp>
#include <collcomm/bootstrap/wire.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <random>

namespace wire = collcomm::bootstrap::wire;

namespace {
std::uint64_t fresh_seed() {
  std::random_device rd;
  auto s = (std::uint64_t(rd()) << 32) ^ rd();
  std::printf("test_wire seed = %llu\n", static_cast<unsigned long long>(s));
  return s;
}

std::vector<std::byte> random_bytes(std::mt19937_64& g, std::size_t n) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = std::byte(g() & 0xff);
  return v;
}
}  // namespace

TEST_CASE("wire: round trip of every message type, payload sizes 0..300") {
  std::mt19937_64 g(fresh_seed());
  const wire::expect e{g() | 1, 8};
  for (std::uint16_t t = wire::msg_first; t <= wire::msg_last; ++t)
    for (std::size_t n : {0, 1, 7, 31, 32, 33, 300}) {
      wire::header h{static_cast<wire::msg>(t), e.job, int(g() % 8), int(g() % 9) - 1, 0};
      auto payload = random_bytes(g, n);
      auto m = wire::encode(h, payload);
      REQUIRE(m.size() == wire::header_bytes + n);
      wire::header got;
      std::span<const std::byte> p;
      REQUIRE(wire::parse(m, e, got, p) == wire::status::ok);
      CHECK(got.type == h.type);
      CHECK(got.job == e.job);
      CHECK(got.sender == h.sender);
      CHECK(got.peer == h.peer);
      CHECK(got.length == n);
      CHECK(std::equal(p.begin(), p.end(), payload.begin(), payload.end()));
    }
}

TEST_CASE("wire: every truncation and an extra byte are errors") {
  std::mt19937_64 g(fresh_seed());
  const wire::expect e{g() | 1, 4};
  auto m = wire::encode({wire::msg::gather, e.job, 3, -1, 0}, random_bytes(g, 40));
  wire::header h;
  std::span<const std::byte> p;
  for (std::size_t k = 0; k < m.size(); ++k)
    CHECK(wire::parse(std::span(m).first(k), e, h, p) == wire::status::truncated);
  m.push_back(std::byte{0});
  CHECK(wire::parse(m, e, h, p) == wire::status::trailing);
}

TEST_CASE("wire: foreign, out-of-range and oversized headers are named") {
  const wire::expect e{0x1234, 4};
  wire::header h;
  std::span<const std::byte> p;
  auto bad = [&](wire::header x) { return wire::parse(wire::encode(x, {}), e, h, p); };
  CHECK(bad({wire::msg::hello, 0x1235, 1, -1, 0}) == wire::status::bad_job);
  CHECK(bad({wire::msg::hello, 0x1234, 4, -1, 0}) == wire::status::bad_rank);
  CHECK(bad({wire::msg::hello, 0x1234, -1, -1, 0}) == wire::status::bad_rank);
  CHECK(bad({wire::msg::p2p, 0x1234, 1, 4, 0}) == wire::status::bad_rank);
  CHECK(bad({wire::msg::p2p, 0x1234, 1, -2, 0}) == wire::status::bad_rank);
  CHECK(bad({static_cast<wire::msg>(0), 0x1234, 1, -1, 0}) == wire::status::bad_type);
  CHECK(bad({static_cast<wire::msg>(9), 0x1234, 1, -1, 0}) == wire::status::bad_type);
  // A header that claims more than 64 MiB is refused from the header alone.
  std::array<std::byte, wire::header_bytes> hb;
  wire::encode_header({wire::msg::gather, 0x1234, 1, -1, wire::max_payload + 1}, hb.data());
  CHECK(wire::decode_header(hb, e, h) == wire::status::oversized);
  wire::encode_header({wire::msg::gather, 0x1234, 1, -1, wire::max_payload}, hb.data());
  CHECK(wire::decode_header(hb, e, h) == wire::status::ok);
  wire::encode_header({wire::msg::gather, 0x1234, 1, -1, ~std::uint64_t{0}}, hb.data());
  CHECK(wire::decode_header(hb, e, h) == wire::status::oversized);
  auto m = wire::encode({wire::msg::hello, 0x1234, 1, -1, 0}, {});
  m[0] ^= std::byte{1};
  CHECK(wire::parse(m, e, h, p) == wire::status::bad_magic);
  m[0] ^= std::byte{1};
  m[4] = std::byte{1};  // version 1: the format before job ids
  CHECK(wire::parse(m, e, h, p) == wire::status::bad_version);
}

TEST_CASE("wire: every single-byte corruption of the header is caught or harmless") {
  std::mt19937_64 g(fresh_seed());
  const wire::expect e{g() | 1, 8};
  const wire::header orig{wire::msg::p2p, e.job, 2, 5, 0};
  const auto payload = random_bytes(g, 16);
  const auto m = wire::encode(orig, payload);
  int caught = 0, harmless = 0;
  for (std::size_t i = 0; i < wire::header_bytes; ++i)
    for (int bit = 1; bit < 256; ++bit) {
      auto c = m;
      c[i] ^= std::byte(bit);
      wire::header h;
      std::span<const std::byte> p;
      auto s = wire::parse(c, e, h, p);
      if (s != wire::status::ok) {
        ++caught;
        continue;
      }
      // Only the type, sender and peer fields can change into another valid value.
      ++harmless;
      CHECK(((i >= 6 && i < 8) || (i >= 16 && i < 24)));
      CHECK(h.length == payload.size());
    }
  // magic, version, job id and length bytes: every change is caught.
  CHECK(caught >= (4 + 2 + 8 + 8) * 255);
  MESSAGE("corruptions caught: " << caught << ", into another valid header: " << harmless);
}

TEST_CASE("wire: random inputs only ever give ok or an error") {
  std::mt19937_64 g(fresh_seed());
  const wire::expect e{g() | 1, 1 + int(g() % 16)};
  int ok = 0, err = 0;
  const auto valid = wire::encode({wire::msg::gather, e.job, 0, -1, 0}, random_bytes(g, 24));
  for (int i = 0; i < 300000; ++i) {
    std::vector<std::byte> in;
    switch (i % 3) {
      case 0:
        in = random_bytes(g, g() % 80);
        break;
      case 1: {  // a valid prefix with random tail fields: reaches the deeper checks
        in = valid;
        in.resize(g() % (valid.size() + 8));
        for (std::size_t k = 8 + g() % 24; k < in.size(); k += 1 + g() % 8) in[k] = std::byte(g());
        break;
      }
      default: {  // a valid message with one random byte
        in = valid;
        in[g() % in.size()] = std::byte(g());
      }
    }
    wire::header h;
    std::span<const std::byte> p;
    auto s = wire::parse(in, e, h, p);
    if (s == wire::status::ok) {
      ++ok;
      REQUIRE(in.size() == wire::header_bytes + h.length);
      REQUIRE(p.size() == h.length);
      REQUIRE(h.sender >= 0);
      REQUIRE(h.sender < e.nranks);
    } else {
      ++err;
    }
  }
  CHECK(ok + err == 300000);
  MESSAGE("random inputs: ok " << ok << ", errors " << err);
}

TEST_CASE("auth: SipHash-2-4 gives the paper's test vectors; MACs bind nonce, rank and nranks") {
  namespace auth = collcomm::bootstrap::auth;
  std::array<std::byte, 15> m;
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = std::byte(i);
  const std::uint64_t k0 = 0x0706050403020100ull, k1 = 0x0f0e0d0c0b0a0908ull;  // key bytes 00..0f
  CHECK(auth::siphash24(k0, k1, std::span(m).first(0)) == 0x726fdb47dd0e0e31ull);
  CHECK(auth::siphash24(k0, k1, m) == 0xa129ca6149be45e5ull);
  auth::nonce a{}, b{};
  b[3] = std::byte{1};
  const std::uint64_t t = 0x1234;
  CHECK(auth::hello_mac(t, a, a, 1, 4) != auth::hello_mac(t, b, a, 1, 4));
  CHECK(auth::hello_mac(t, a, a, 1, 4) != auth::hello_mac(t, a, b, 1, 4));
  CHECK(auth::hello_mac(t, a, a, 1, 4) != auth::hello_mac(t, a, a, 2, 4));
  CHECK(auth::hello_mac(t, a, a, 1, 4) != auth::hello_mac(t, a, a, 1, 5));
  CHECK(auth::hello_mac(t, a, a, 1, 4) != auth::hello_mac(t + 1, a, a, 1, 4));
  CHECK(auth::hello_mac(t, a, a, 1, 4) != auth::welcome_mac(t, a, a, 1, 4));
  CHECK(auth::job_id(t) != t);
  CHECK(auth::mac_equal(5, 5));
  CHECK(!auth::mac_equal(5, 5ull << 40));
}

TEST_CASE("bootstrap: rank lists read as ranges and are cut short") {
  namespace bd = collcomm::bootstrap::detail;
  CHECK(bd::ranks_text({3}) == "rank 3");
  CHECK(bd::ranks_text({1, 4, 5, 6, 7, 8, 9, 12}) == "ranks 1, 4-9, 12");
  CHECK(bd::ranks_text({1, 2}) == "ranks 1, 2");
  std::vector<int> many;
  for (int r = 0; r < 100; ++r) many.push_back(3 * r);
  CHECK(bd::ranks_text(many, 3) == "ranks 0, 3, 6 (and 97 more)");
}
