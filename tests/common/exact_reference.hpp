// tests/common/exact_reference.hpp — inputs whose every reduction order is exact, and the
// expected outputs of each kind computed from them on the host.
//
// Inputs are small integers chosen per element type and op so that every partial result of
// every reduction order is exact in the element type (the nccl-tests idea): the reference — the
// same op applied on the host in rank order, with the same conversions — then matches a correct
// run bit for bit, whatever order the algorithm reduced in, and any lost, doubled or misplaced
// contribution shows. Integers wrap exactly in any order, so any integer value will do.
#pragma once

#include <collcomm/kinds.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/types.hpp>
#include <collcomm/algo/primitives.hpp>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace collcomm_test {
using namespace collcomm;

inline unsigned fresh_seed() {
  static const unsigned s = std::random_device{}();
  return s;
}

// Largest integer below which every integer is exact, per element type.
template <class T>
constexpr double exact_limit() {
  if constexpr (std::is_same_v<T, __half>)
    return 2048;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return 256;
  else if constexpr (std::is_same_v<T, __nv_fp8_e4m3>)
    return 16;
  else if constexpr (std::is_same_v<T, __nv_fp8_e5m2>)
    return 8;
  else if constexpr (std::is_same_v<T, float>)
    return 1 << 24;
  else
    return 1e15;  // f64 and the integers (integers wrap exactly anyway)
}

// Element `index` of rank `rank`'s input. Values are integers in [-span, span] with
// 2 * nranks * span <= exact_limit, so every partial sum of every order stays exact. Where even
// span = 1 is too much (16 ranks of e5m2, whose integers are exact only up to 8), the inputs are
// sparse instead: rank `rank` is nonzero at `index` only when (rank + index) % k == 0, which
// leaves at most exact_limit / 2 nonzero contributions per element while every rank still
// contributes to one element in k.
template <class T, class Op>
T random_value(std::mt19937_64& g, int nranks, int rank, index_t index) {
  using A = accum_t<T>;
  if constexpr (is_integer_element<T>) {
    // Integers are exact modulo 2^bits in any order: any value will do.
    (void)nranks, (void)rank, (void)index;
    return static_cast<T>(g());
  } else {
    const bool multiplies = std::is_same_v<Op, op::prod>;
    const double limit = exact_limit<T>();
    int span = multiplies ? 1 : static_cast<int>(limit / (2.0 * nranks));
    int v = 0;
    if (span >= 1) {
      std::uniform_int_distribution<int> d(-span, span);
      v = d(g);
    } else {
      const auto k = static_cast<index_t>(std::ceil(2.0 * nranks / limit));
      std::uniform_int_distribution<int> d(-1, 1);
      v = d(g);  // drawn every time, so the stream of values does not depend on the pattern
      if ((static_cast<index_t>(rank) + index) % k != 0) v = 0;
    }
    if (multiplies && v == 0) v = 1;  // products of +-1 are exact in every order
    return from_accum<T>(static_cast<A>(v));
  }
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
std::string show(T x) {
  std::ostringstream o;
  if constexpr (std::is_integral_v<T>)
    o << static_cast<long long>(x);
  else
    o << static_cast<double>(to_accum(x));
  return o.str();
}

struct case_config {
  int nranks = 2;
  index_t count = 0;
  int root = 0;
  bool in_place = false;
};

// Expected outputs per rank (nullopt: not significant, must stay poisoned).
template <class K, class T, class Op>
std::vector<std::optional<std::vector<T>>> reference(const std::vector<std::vector<T>>& x, const case_config& c,
                                                     const Op& op) {
  using A = accum_t<T>;
  const int n = c.nranks;
  const index_t cnt = c.count;
  auto reduced = [&](index_t idx) {
    A v{};
    for (int s = 0; s < n; ++s) {
      A e = apply_pre(op, to_accum(x[s][idx]));
      v = s == 0 ? e : static_cast<A>(op(v, e));
    }
    return from_accum<T>(apply_post(op, v, n));
  };
  std::vector<std::optional<std::vector<T>>> out(n);
  for (int r = 0; r < n; ++r) {
    std::vector<T> o;
    if constexpr (std::is_same_v<K, kind::all_reduce>) {
      for (index_t i = 0; i < cnt; ++i) o.push_back(reduced(i));
    } else if constexpr (std::is_same_v<K, kind::reduce_scatter>) {
      for (index_t i = 0; i < cnt; ++i) o.push_back(reduced(r * cnt + i));
    } else if constexpr (std::is_same_v<K, kind::all_gather>) {
      for (int s = 0; s < n; ++s)
        for (index_t i = 0; i < cnt; ++i) o.push_back(x[s][i]);
    } else if constexpr (std::is_same_v<K, kind::broadcast>) {
      o = std::vector<T>(x[c.root].begin(), x[c.root].begin() + cnt);
    } else if constexpr (std::is_same_v<K, kind::reduce>) {
      if (r != c.root) continue;
      for (index_t i = 0; i < cnt; ++i) o.push_back(reduced(i));
    } else if constexpr (std::is_same_v<K, kind::all_to_all>) {
      for (int s = 0; s < n; ++s)
        for (index_t i = 0; i < cnt; ++i) o.push_back(x[s][r * cnt + i]);
    } else if constexpr (std::is_same_v<K, kind::gather>) {
      if (r != c.root) continue;
      for (int s = 0; s < n; ++s)
        for (index_t i = 0; i < cnt; ++i) o.push_back(x[s][i]);
    } else if constexpr (std::is_same_v<K, kind::scatter>) {
      for (index_t i = 0; i < cnt; ++i) o.push_back(x[c.root][r * cnt + i]);
    } else if constexpr (std::is_same_v<K, kind::send_recv>) {
      const int from = mod(r - 1, n);
      o = std::vector<T>(x[from].begin(), x[from].begin() + cnt);
    }
    out[r] = std::move(o);
  }
  return out;
}

// Whether kind K has an in-place form (the table in kinds.hpp; all_to_all, scatter and
// send_recv have none that the tests and bench exercise).
template <class K>
constexpr bool has_in_place =
    std::is_same_v<K, kind::all_reduce> || std::is_same_v<K, kind::broadcast> || std::is_same_v<K, kind::reduce> ||
    std::is_same_v<K, kind::all_gather> || std::is_same_v<K, kind::gather> || std::is_same_v<K, kind::reduce_scatter>;

}  // namespace collcomm_test
