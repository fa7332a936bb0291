// tests/host/reference.hpp — what every collective must produce, computed independently of
// collcomm's executors: a float64 (long double) reference for floating-point elements, an exact
// modulo-2^bits reference for integers, and the tolerance each floating-point result is held to.
//
// Nothing here is templated on the kind, the algorithm or the op: the matrix instantiates the
// collective once per (kind, algorithm, element, op) and every check runs through this one
// non-template code, so the tests cost little compile time beyond the collectives themselves.
//
// ## Tolerances (floating-point elements; integers and copies are always exact)
//
// Notation: T the element type, p its significand bits (implicit bit included), eps = 2^(1-p)
// its machine epsilon (u = eps/2 is the unit roundoff), denorm_min its smallest subnormal;
// t_1..t_N the terms of one output element (t_j = x_j, or scalar * x_j for premul_sum).
//
// * min, max and the user op max_magnitude are exact: the result is one of the inputs, and
//   T -> accumulation type -> T round-trips every finite value.
//
// * sum, premul_sum. Partial results are rounded to T on every hop (primitives.hpp: messages carry
//   T) and to the accumulation type inside a step; a schedule rounds one element's value at most
//   k = N + 2 times (N - 1 combining steps, the pre-multiplication, the final store, and one to
//   spare), each time by at most u * |partial| + denorm_min / 2, and every partial sum is at most
//   S = sum_j |t_j| in magnitude. So
//       |got - ref| <= k * eps * S + k * denorm_min          (a factor 2 of margin over k*u*S).
//   That bound is loose for the 3- and 4-bit significands of fp8 (e5m2, N = 16: 4.5 * S), so most
//   elements are also drawn such that the result is EXACT in any reduction order: when every
//   term is a multiple of one power of two g >= denorm_min and both the sum of the positive terms
//   and the sum of the negative ones are at most 2^p * g, every partial sum of every subset of the
//   terms is a multiple of g of magnitude <= 2^p * g, hence representable in T: no rounding ever
//   happens and the tolerance is 0 (checked per element by `sum_is_exact`).
//
// * avg = sum / N, divided once in the accumulation type and rounded once to T:
//       tol = tol_sum / N + (ref representable in T ? 0 : eps * |ref| + denorm_min).
//   (When the sum is exact and ref is representable, the one division is exact too.)
//
// * prod. Each rounding multiplies the value by (1 + d), |d| <= u, so with k roundings and no
//   overflow or underflow the relative error is below k * eps:
//       tol = k * eps * |ref| + k * denorm_min.
//   Inputs stay near 1 (0.8 .. 1.25, |product| within 1.25^16 = 36 < 448, e4m3's largest) so fp8
//   and f16 never overflow. Exact elements: terms are +-2^e or +-3 * 2^e; when the product of the
//   terms' odd significand parts is below 2^p and every subset product stays within
//   [min normal, max finite], every partial product is representable: tolerance 0
//   (`prod_is_exact`).
//
// Integer references are computed in unsigned 64-bit arithmetic masked to the element's width:
// sum, prod and premul_sum wrap modulo 2^bits and are exact in any order; avg is the wrapped sum,
// read as T, divided by N with C++ truncation (ops.hpp's integer avg); min, max and the bitwise
// ops are exact.
#pragma once

#include <collcomm/host.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace collcomm_test::host_matrix {

// ---- the user op of the matrix --------------------------------------------------------------

// A user functor that models collcomm's op concept without any of the library's op members (no
// name, no pre/post): the input of largest magnitude, ties broken towards the larger value, so
// that it is a maximum under a total order — associative and commutative, as the concept demands.
// Magnitudes of signed integers are taken in the unsigned type, so |INT_MIN| is no overflow.
struct max_magnitude {
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
      using U = std::make_unsigned_t<A>;
      const U ma = a < 0 ? static_cast<U>(U(0) - static_cast<U>(a)) : static_cast<U>(a);
      const U mb = b < 0 ? static_cast<U>(U(0) - static_cast<U>(b)) : static_cast<U>(b);
      if (ma != mb) return ma < mb ? b : a;
      return a < b ? b : a;
    } else if constexpr (std::is_integral_v<A>) {
      return a < b ? b : a;
    } else {
      const A ma = a < A(0) ? -a : a, mb = b < A(0) ? -b : b;
      if (ma != mb) return ma < mb ? b : a;
      return a < b ? b : a;
    }
  }
};

// ---- run-time names for the axes ------------------------------------------------------------

enum class op_id { sum, prod, min, max, avg, premul_sum, bit_and, bit_or, bit_xor, max_magnitude, none };

inline const char* op_id_name(op_id o) {
  switch (o) {
    case op_id::sum:
      return "sum";
    case op_id::prod:
      return "prod";
    case op_id::min:
      return "min";
    case op_id::max:
      return "max";
    case op_id::avg:
      return "avg";
    case op_id::premul_sum:
      return "premul_sum";
    case op_id::bit_and:
      return "bit_and";
    case op_id::bit_or:
      return "bit_or";
    case op_id::bit_xor:
      return "bit_xor";
    case op_id::max_magnitude:
      return "max_magnitude(user)";
    case op_id::none:
      return "none";
  }
  return "?";
}

template <class Op>
constexpr op_id op_id_of() {
  namespace o = collcomm::op;
  if constexpr (std::is_same_v<Op, o::sum>)
    return op_id::sum;
  else if constexpr (std::is_same_v<Op, o::prod>)
    return op_id::prod;
  else if constexpr (std::is_same_v<Op, o::min>)
    return op_id::min;
  else if constexpr (std::is_same_v<Op, o::max>)
    return op_id::max;
  else if constexpr (std::is_same_v<Op, o::avg>)
    return op_id::avg;
  else if constexpr (std::is_same_v<Op, o::premul_sum<double>>)
    return op_id::premul_sum;
  else if constexpr (std::is_same_v<Op, o::bit_and>)
    return op_id::bit_and;
  else if constexpr (std::is_same_v<Op, o::bit_or>)
    return op_id::bit_or;
  else if constexpr (std::is_same_v<Op, o::bit_xor>)
    return op_id::bit_xor;
  else if constexpr (std::is_same_v<Op, max_magnitude>)
    return op_id::max_magnitude;
  else
    return op_id::none;
}

enum class kind_id {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  reduce,
  all_to_all,
  gather,
  scatter,
  send_recv
};

template <class K>
constexpr kind_id kind_id_of() {
  namespace k = collcomm::kind;
  if constexpr (std::is_same_v<K, k::all_reduce>)
    return kind_id::all_reduce;
  else if constexpr (std::is_same_v<K, k::reduce_scatter>)
    return kind_id::reduce_scatter;
  else if constexpr (std::is_same_v<K, k::all_gather>)
    return kind_id::all_gather;
  else if constexpr (std::is_same_v<K, k::broadcast>)
    return kind_id::broadcast;
  else if constexpr (std::is_same_v<K, k::reduce>)
    return kind_id::reduce;
  else if constexpr (std::is_same_v<K, k::all_to_all>)
    return kind_id::all_to_all;
  else if constexpr (std::is_same_v<K, k::gather>)
    return kind_id::gather;
  else if constexpr (std::is_same_v<K, k::scatter>)
    return kind_id::scatter;
  else
    return kind_id::send_recv;
}

inline bool kind_reduces(kind_id k) {
  return k == kind_id::all_reduce || k == kind_id::reduce_scatter || k == kind_id::reduce;
}

// ---- the element axis at run time -----------------------------------------------------------

// One element as the checks see it: its raw bits (zero-extended; what copies must reproduce)
// and its value (exact: every element type converts to double without rounding).
struct value {
  std::uint64_t bits = 0;
  double f = 0;
};

struct type_desc {
  const char* name;
  std::size_t size;  // sizeof(T)
  bool is_int;
  bool is_signed;  // integers
  int bits;        // 8 * sizeof(T)
  int digits;      // floats: significand bits p, the implicit one included
  double eps;      // floats: 2^(1-p)
  double min_normal, denorm_min, max_finite;
  void (*encode)(double f, std::uint64_t bits, void* dst);  // floats round f to T; integers take bits
  value (*decode)(const void* src);
  // For a double that T might not represent: the value T rounds it to (floats only).
  double (*round)(double f);
};

namespace detail {

template <class T>
void encode_elem(double f, std::uint64_t bits, void* dst) {
  T x;
  if constexpr (collcomm::is_integer_element<T>) {
    (void)f;
    x = static_cast<T>(bits);
  } else if constexpr (std::is_same_v<T, double>) {
    (void)bits;
    x = f;
  } else {
    (void)bits;
    // Via float: the accumulation type of every narrow float, and its rounding is what the
    // executors apply (from_accum).
    x = collcomm::from_accum<T>(static_cast<float>(f));
  }
  std::memcpy(dst, &x, sizeof(T));
}

template <class T>
value decode_elem(const void* src) {
  T x;
  std::memcpy(&x, src, sizeof(T));
  value v;
  if constexpr (sizeof(T) == 1)
    v.bits = *static_cast<const std::uint8_t*>(src);
  else if constexpr (sizeof(T) == 2) {
    std::uint16_t b;
    std::memcpy(&b, src, 2);
    v.bits = b;
  } else if constexpr (sizeof(T) == 4) {
    std::uint32_t b;
    std::memcpy(&b, src, 4);
    v.bits = b;
  } else
    std::memcpy(&v.bits, src, 8);
  if constexpr (collcomm::is_integer_element<T>)
    v.f = static_cast<double>(x);
  else
    v.f = static_cast<double>(collcomm::to_accum(x));
  return v;
}

template <class T>
double round_elem(double f) {
  if constexpr (collcomm::is_integer_element<T> || std::is_same_v<T, double>)
    return f;
  else if constexpr (std::is_same_v<T, float>)
    return static_cast<double>(static_cast<float>(f));
  else {
    // Rounding through float first is a double rounding, but only representability is asked of
    // it here (ref == round(ref)), and a double T represents is a float that rounds to itself.
    return static_cast<double>(collcomm::to_accum(collcomm::from_accum<T>(static_cast<float>(f))));
  }
}

}  // namespace detail

template <class T>
type_desc make_type_desc() {
  type_desc d{};
  d.name = collcomm::element_name<T>;
  d.size = sizeof(T);
  d.is_int = collcomm::is_integer_element<T>;
  d.bits = static_cast<int>(8 * sizeof(T));
  d.encode = &detail::encode_elem<T>;
  d.decode = &detail::decode_elem<T>;
  d.round = &detail::round_elem<T>;
  if constexpr (collcomm::is_integer_element<T>) {
    d.is_signed = std::is_signed_v<T>;
  } else {
    // Significand bits and ranges of the six float formats (IEEE 754; OCP FP8 for e4m3/e5m2).
    struct fmt {
      int p;
      double min_normal, denorm_min, max_finite;
    };
    constexpr fmt f = std::is_same_v<T, float>           ? fmt{24, 0x1p-126, 0x1p-149, 3.4028234663852886e38}
                      : std::is_same_v<T, double>        ? fmt{53, 0x1p-1022, 0x1p-1074, 1.7976931348623157e308}
                      : std::is_same_v<T, __half>        ? fmt{11, 0x1p-14, 0x1p-24, 65504.0}
                      : std::is_same_v<T, __nv_bfloat16> ? fmt{8, 0x1p-126, 0x1p-133, 3.3895313892515355e38}
                      : std::is_same_v<T, __nv_fp8_e4m3> ? fmt{4, 0x1p-6, 0x1p-9, 448.0}
                                                         : fmt{3, 0x1p-14, 0x1p-16, 57344.0};  // e5m2
    d.digits = f.p;
    d.eps = std::ldexp(1.0, 1 - f.p);
    d.min_normal = f.min_normal;
    d.denorm_min = f.denorm_min;
    d.max_finite = f.max_finite;
  }
  return d;
}

// ---- integer helpers ------------------------------------------------------------------------

inline std::uint64_t width_mask(int bits) { return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1; }

// The element's bits read as a signed value of its width.
inline std::int64_t sign_extend(std::uint64_t b, int bits) {
  if (bits >= 64) return static_cast<std::int64_t>(b);
  const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  b &= width_mask(bits);
  return static_cast<std::int64_t>((b ^ sign) - sign);  // two's complement, no UB
}

// a < b for integer elements of type t.
inline bool int_less(const type_desc& t, std::uint64_t a, std::uint64_t b) {
  if (t.is_signed) return sign_extend(a, t.bits) < sign_extend(b, t.bits);
  return (a & width_mask(t.bits)) < (b & width_mask(t.bits));
}

// ---- expectations ---------------------------------------------------------------------------

// What one output element must hold: either exactly these bits (integers, copies, untouched
// memory), or a floating-point value within `tol`.
struct expectation {
  bool exact_bits = true;
  std::uint64_t bits = 0;
  double value = 0;
  double tol = 0;
};

inline bool satisfies(const expectation& e, const value& got) {
  if (e.exact_bits) return got.bits == e.bits;
  if (std::isnan(got.f)) return false;
  return std::fabs(got.f - e.value) <= e.tol;
}

// The lowest power of two that divides x (x finite, non-zero): x = odd * 2^e  ->  2^e.
inline double lowest_bit(double x) {
  int e = 0;
  const double m = std::frexp(std::fabs(x), &e);                 // x = m * 2^e, m in [0.5, 1)
  const auto i = static_cast<std::uint64_t>(std::ldexp(m, 53));  // exact: m has at most 53 bits
  return std::ldexp(1.0, e - 53 + std::countr_zero(i));
}

// The odd integer part of x's significand: x = odd * 2^e  ->  odd.
inline double odd_part(double x) { return std::fabs(x) / lowest_bit(x); }

// Whether sum over any subset of terms, in any order, is representable in T (see the file comment).
inline bool sum_is_exact(const type_desc& t, const long double* terms, int n) {
  double g = 0;
  long double pos = 0, neg = 0;
  for (int j = 0; j < n; ++j) {
    const double x = static_cast<double>(terms[j]);
    if (static_cast<long double>(x) != terms[j] || !std::isfinite(x)) return false;
    if (x == 0) continue;
    const double lb = lowest_bit(x);
    g = g == 0 ? lb : std::min(g, lb);
    (x > 0 ? pos : neg) += std::fabs(x);
  }
  if (g == 0) return true;  // all zero
  if (g < t.denorm_min) return false;
  const long double limit = std::ldexp(static_cast<long double>(g), t.digits);
  return pos <= limit && neg <= limit && pos <= t.max_finite && neg <= t.max_finite;
}

// Whether every partial product of the terms is representable in T (see the file comment).
inline bool prod_is_exact(const type_desc& t, const long double* terms, int n) {
  long double odd = 1, hi = 1, lo = 1;
  for (int j = 0; j < n; ++j) {
    const double x = static_cast<double>(terms[j]);
    if (static_cast<long double>(x) != terms[j] || !std::isfinite(x) || x == 0) return false;
    odd *= odd_part(x);
    hi *= std::max(1.0, std::fabs(x));
    lo *= std::min(1.0, std::fabs(x));
  }
  return odd < std::ldexp(1.0L, t.digits) && hi <= t.max_finite && lo >= t.min_normal;
}

inline constexpr int max_reference_ranks = 64;

// The reference of one reduced element (n <= max_reference_ranks). xs: the N inputs (as loaded: value and bits); scalar:
// premul_sum's factor.
inline expectation reduce_reference(const type_desc& t, op_id op, const value* xs, int n, double scalar) {
  expectation e;
  if (t.is_int) {
    const std::uint64_t mask = width_mask(t.bits);
    const std::uint64_t s = static_cast<std::uint64_t>(static_cast<std::int64_t>(scalar)) & mask;
    std::uint64_t r = xs[0].bits & mask;
    if (op == op_id::premul_sum) r = (r * s) & mask;
    for (int j = 1; j < n; ++j) {
      const std::uint64_t x = xs[j].bits & mask;
      switch (op) {
        case op_id::sum:
        case op_id::avg:
          r = (r + x) & mask;
          break;
        case op_id::premul_sum:
          r = (r + x * s) & mask;
          break;
        case op_id::prod:
          r = (r * x) & mask;
          break;
        case op_id::min:
          r = int_less(t, x, r) ? x : r;
          break;
        case op_id::max:
          r = int_less(t, r, x) ? x : r;
          break;
        case op_id::bit_and:
          r &= x;
          break;
        case op_id::bit_or:
          r |= x;
          break;
        case op_id::bit_xor:
          r ^= x;
          break;
        case op_id::max_magnitude: {
          auto mag = [&](std::uint64_t v) {
            return t.is_signed && sign_extend(v, t.bits) < 0 ? (std::uint64_t{0} - v) & mask : v;
          };
          if (mag(r) != mag(x))
            r = mag(r) < mag(x) ? x : r;
          else
            r = int_less(t, r, x) ? x : r;
          break;
        }
        case op_id::none:
          break;
      }
    }
    if (op == op_id::avg) {
      if (t.is_signed)
        r = static_cast<std::uint64_t>(sign_extend(r, t.bits) / n) & mask;
      else
        r = r / static_cast<std::uint64_t>(n);
    }
    e.exact_bits = true;
    e.bits = r;
    return e;
  }

  e.exact_bits = false;
  long double terms[max_reference_ranks];
  n = std::min(n, max_reference_ranks);
  for (int j = 0; j < n; ++j)
    terms[j] = op == op_id::premul_sum ? static_cast<long double>(xs[j].f) * scalar : static_cast<long double>(xs[j].f);
  const double k = n + 2;  // roundings of one element's value along its path, one spare
  switch (op) {
    case op_id::sum:
    case op_id::premul_sum:
    case op_id::avg: {
      long double ref = 0, abs_sum = 0;
      for (int j = 0; j < n; ++j) {
        ref += terms[j];
        abs_sum += std::fabs(terms[j]);
      }
      double tol = sum_is_exact(t, terms, n) ? 0.0 : k * t.eps * static_cast<double>(abs_sum) + k * t.denorm_min;
      if (op == op_id::avg) {
        ref /= n;
        const auto r = static_cast<double>(ref);
        tol = tol / n + (t.round(r) == r ? 0.0 : t.eps * std::fabs(r) + t.denorm_min);
      }
      e.value = static_cast<double>(ref);
      e.tol = tol;
      return e;
    }
    case op_id::prod: {
      long double ref = 1;
      for (int j = 0; j < n; ++j) ref *= terms[j];
      e.value = static_cast<double>(ref);
      e.tol = prod_is_exact(t, terms, n) ? 0.0 : k * t.eps * std::fabs(e.value) + k * t.denorm_min;
      return e;
    }
    case op_id::min:
    case op_id::max:
    case op_id::max_magnitude: {
      double r = xs[0].f;
      for (int j = 1; j < n; ++j) {
        const double x = xs[j].f;
        if (op == op_id::min)
          r = x < r ? x : r;
        else if (op == op_id::max)
          r = r < x ? x : r;
        else if (std::fabs(r) != std::fabs(x))
          r = std::fabs(r) < std::fabs(x) ? x : r;
        else
          r = r < x ? x : r;
      }
      e.value = r;
      e.tol = 0;
      return e;
    }
    default:
      break;
  }
  e.value = std::numeric_limits<double>::quiet_NaN();  // bitwise ops on floats: never composed
  return e;
}

// ---- the kinds: who contributes what to which output element --------------------------------

// One rank's part in one call of a kind.
struct call_shape {
  kind_id kind;
  int nranks;
  collcomm::index_t count;  // as the user passes it (per peer for all_to_all, gather, scatter)
  int root;
  std::vector<int> send_peer;  // send_recv only: per rank (no_peer: none)
  std::vector<int> recv_peer;
};

// Elements of rank r's input and output that are significant (root-only buffers: 0 elsewhere).
inline collcomm::index_t significant_input(const call_shape& c, int r) {
  const auto n = static_cast<collcomm::index_t>(c.nranks);
  switch (c.kind) {
    case kind_id::reduce_scatter:
    case kind_id::all_to_all:
      return n * c.count;
    case kind_id::scatter:
      return r == c.root ? n * c.count : 0;
    case kind_id::broadcast:
      return r == c.root ? c.count : 0;
    case kind_id::send_recv:
      return c.send_peer[static_cast<std::size_t>(r)] != collcomm::no_peer ? c.count : 0;
    default:
      return c.count;
  }
}
inline collcomm::index_t significant_output(const call_shape& c, int r) {
  const auto n = static_cast<collcomm::index_t>(c.nranks);
  switch (c.kind) {
    case kind_id::all_gather:
    case kind_id::all_to_all:
      return n * c.count;
    case kind_id::gather:
      return r == c.root ? n * c.count : 0;
    case kind_id::reduce:
      return r == c.root ? c.count : 0;
    case kind_id::send_recv:
      return c.recv_peer[static_cast<std::size_t>(r)] != collcomm::no_peer ? c.count : 0;
    default:
      return c.count;
  }
}
// Full buffer sizes, as kinds.hpp's table has them at every rank.
inline collcomm::index_t input_size(const call_shape& c) {
  const auto n = static_cast<collcomm::index_t>(c.nranks);
  switch (c.kind) {
    case kind_id::reduce_scatter:
    case kind_id::all_to_all:
    case kind_id::scatter:
      return n * c.count;
    default:
      return c.count;
  }
}
inline collcomm::index_t output_size(const call_shape& c) {
  const auto n = static_cast<collcomm::index_t>(c.nranks);
  switch (c.kind) {
    case kind_id::all_gather:
    case kind_id::all_to_all:
    case kind_id::gather:
      return n * c.count;
    default:
      return c.count;
  }
}

// Whether rank r's call can be in place, and then the layout: one buffer of `size` elements, the
// input at `send_off`, the output at `recv_off` (kinds.hpp's in-place table).
struct in_place_layout {
  bool possible = false;
  collcomm::index_t size = 0, send_off = 0, recv_off = 0;
};
inline in_place_layout in_place(const call_shape& c, int r) {
  const auto n = static_cast<collcomm::index_t>(c.nranks);
  const auto cnt = c.count;
  const auto ur = static_cast<collcomm::index_t>(r), root = static_cast<collcomm::index_t>(c.root);
  switch (c.kind) {
    case kind_id::all_reduce:
    case kind_id::broadcast:
    case kind_id::reduce:
      return {true, cnt, 0, 0};
    case kind_id::reduce_scatter:
      return {true, n * cnt, 0, ur * cnt};
    case kind_id::all_gather:
      return {true, n * cnt, ur * cnt, 0};
    case kind_id::gather:
      return r == c.root ? in_place_layout{true, n * cnt, root * cnt, 0} : in_place_layout{};
    case kind_id::scatter:
      return r == c.root ? in_place_layout{true, n * cnt, 0, root * cnt} : in_place_layout{};
    default:
      return {};
  }
}

// A contribution: element `index` of rank `rank`'s (significant) input.
struct source {
  int rank;
  collcomm::index_t index;
};

// The sources of output element i of rank r: N of them for reducing kinds (in rank order), one
// for the others.
inline void sources_of(const call_shape& c, int r, collcomm::index_t i, std::vector<source>& out) {
  out.clear();
  const auto cnt = c.count;
  const auto ur = static_cast<collcomm::index_t>(r);
  switch (c.kind) {
    case kind_id::all_reduce:
    case kind_id::reduce:
      for (int j = 0; j < c.nranks; ++j) out.push_back({j, i});
      break;
    case kind_id::reduce_scatter:
      for (int j = 0; j < c.nranks; ++j) out.push_back({j, ur * cnt + i});
      break;
    case kind_id::all_gather:
    case kind_id::gather:
      out.push_back({static_cast<int>(i / cnt), i % cnt});
      break;
    case kind_id::broadcast:
      out.push_back({c.root, i});
      break;
    case kind_id::all_to_all:
      out.push_back({static_cast<int>(i / cnt), ur * cnt + i % cnt});
      break;
    case kind_id::scatter:
      out.push_back({c.root, ur * cnt + i});
      break;
    case kind_id::send_recv:
      out.push_back({c.recv_peer[static_cast<std::size_t>(r)], i});
      break;
  }
}

// ---- printing -------------------------------------------------------------------------------

inline std::string show(const type_desc& t, const value& v) {
  char buf[96];
  if (t.is_int) {
    if (t.is_signed)
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(sign_extend(v.bits, t.bits)));
    else
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v.bits));
  } else {
    std::snprintf(buf, sizeof buf, "%.17g (bits 0x%llx)", v.f, static_cast<unsigned long long>(v.bits));
  }
  return buf;
}

inline std::string show(const type_desc& t, const expectation& e) {
  if (e.exact_bits) {
    value v;
    v.bits = e.bits;
    if (!t.is_int) {
      // Floats with exact bits: a copy or untouched memory; decode for the reader.
      unsigned char raw[8] = {};
      std::memcpy(raw, &e.bits, t.size);  // little endian: the low bytes are the element
      v = t.decode(raw);
    }
    return show(t, v);
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.17g +- %.3g", e.value, e.tol);
  return buf;
}

}  // namespace collcomm_test::host_matrix
