// collcomm/ops.hpp — the op axis: reduction operators.
//
// An op is a small trivially copyable value (it travels to the GPU by value). It models
// `reduction_op<Op, T>` when, for the accumulation type A = accum_t<T>:
//
//   A op(A a, A b) const        combine two partial results; must be associative and commutative
//                               (algorithms reduce in different orders on different schedules)
//   A op.pre(A x) const         optional: applied once to each rank's own input element when it
//                               is first loaded (premul_sum's scale)
//   A op.post(A x, int n) const optional: applied once to each fully reduced element, fused with
//                               its final store (avg's divide by the number of ranks n)
//   static constexpr bool integer_only   optional: true for ops that need an integer element
//
// Integer sum and prod wrap (two's complement) as unsigned arithmetic does: the result is the
// exact result modulo 2^bits, the same in every reduction order, and never undefined behaviour.
//
// Example — a user functor (no pre/post) is enough:
//
//   struct abs_max {
//     template <class A> COLLCOMM_HD A operator()(A a, A b) const {
//       A x = a < 0 ? -a : a, y = b < 0 ? -b : b; return x < y ? y : x; }
//   };
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/types.hpp>

#include <concepts>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN

namespace detail {
template <class A>
COLLCOMM_HD constexpr A wrapping_add(A a, A b) noexcept {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(a + b);  // promotion of u8 is fine: the cast truncates mod 2^8
  } else {
    return a + b;
  }
}
template <class A>
COLLCOMM_HD constexpr A wrapping_mul(A a, A b) noexcept {
  if constexpr (std::is_integral_v<A>) {
    // Multiply in an unsigned type at least as wide as unsigned int: u8*u8 promoted to int could
    // overflow int (UB) for u16; for our widths (8, 32, 64) this is exact modulo 2^bits.
    using U = std::make_unsigned_t<std::common_type_t<A, unsigned>>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}
}  // namespace detail

namespace op {

struct sum {
  static constexpr const char* name = "sum";
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return detail::wrapping_add(a, b);
  }
};

struct prod {
  static constexpr const char* name = "prod";
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return detail::wrapping_mul(a, b);
  }
};

struct min {
  static constexpr const char* name = "min";
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return b < a ? b : a;
  }
};

struct max {
  static constexpr const char* name = "max";
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return a < b ? b : a;
  }
};

// Sum, then divide by the number of ranks once at the end. Integers: the wrapped sum divided
// with C++ truncation (as NCCL's ncclAvg does for integers).
struct avg {
  static constexpr const char* name = "avg";
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return detail::wrapping_add(a, b);
  }
  template <class A>
  COLLCOMM_HD constexpr A post(A x, int nranks) const noexcept {
    return static_cast<A>(x / static_cast<A>(nranks));
  }
};

// Each rank's input is multiplied by `scalar` (converted to the accumulation type), then summed.
template <class S = double>
struct premul_sum {
  static constexpr const char* name = "premul_sum";
  S scalar{1};
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return detail::wrapping_add(a, b);
  }
  template <class A>
  COLLCOMM_HD constexpr A pre(A x) const noexcept {
    return detail::wrapping_mul(x, static_cast<A>(scalar));
  }
};
template <class S>
premul_sum(S) -> premul_sum<S>;

struct bit_and {
  static constexpr const char* name = "bit_and";
  static constexpr bool integer_only = true;
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return static_cast<A>(a & b);
  }
};
struct bit_or {
  static constexpr const char* name = "bit_or";
  static constexpr bool integer_only = true;
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return static_cast<A>(a | b);
  }
};
struct bit_xor {
  static constexpr const char* name = "bit_xor";
  static constexpr bool integer_only = true;
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return static_cast<A>(a ^ b);
  }
};

// The op of the kinds that do not reduce (all_gather, broadcast, ...): never combines.
struct none {
  static constexpr const char* name = "none";
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A) const noexcept {
    return a;
  }
};

// An op followed by a user epilogue: `epilogue(x)` is applied to each fully reduced element, in the
// accumulation type, right after the op's own post step and before the store — fused into the
// same kernel (scale, bias, clamp, an activation). Every rank stores the epilogue's result; it
// runs once per element. Example:
//   struct scale_bias { float s, b; COLLCOMM_HD float operator()(float x) const { return x * s + b; } };
//   collcomm::all_reduce(comm, send, recv, count, collcomm::op::with_epilogue{collcomm::op::sum{}, scale_bias{0.5f, 1.f}}, stream);
// The result is stored as the element type (a cast from the accumulation type); an epilogue that
// changes the stored type is not supported yet.
template <class Op, class E>
struct with_epilogue {
  Op op;
  E epilogue;
  static constexpr const char* name = "with_epilogue";
  static constexpr bool integer_only = [] {
    if constexpr (requires { Op::integer_only; })
      return static_cast<bool>(Op::integer_only);
    else
      return false;
  }();
  template <class A>
  COLLCOMM_HD constexpr A operator()(A a, A b) const noexcept {
    return static_cast<A>(op(a, b));
  }
  template <class A>
  COLLCOMM_HD constexpr A pre(A x) const noexcept {
    if constexpr (requires { op.pre(x); })
      return static_cast<A>(op.pre(x));
    else
      return x;
  }
  template <class A>
  COLLCOMM_HD constexpr A post(A x, int nranks) const noexcept {
    if constexpr (requires { op.post(x, nranks); })
      return static_cast<A>(epilogue(static_cast<A>(op.post(x, nranks))));
    else
      return static_cast<A>(epilogue(x));
  }
};
template <class Op, class E>
with_epilogue(Op, E) -> with_epilogue<Op, E>;

}  // namespace op

// Whether Op demands an integer element (bit_and, bit_or, bit_xor, or a user op that says so).
template <class Op>
inline constexpr bool op_integer_only = [] {
  if constexpr (requires { Op::integer_only; })
    return static_cast<bool>(Op::integer_only);
  else
    return false;
}();

// The op axis concept, checked for one element type. The element condition of integer-only ops
// is checked separately (compose.hpp) so that its error message can say what to do.
template <class Op, class T>
concept reduction_op = element<T> && std::is_trivially_copyable_v<Op> && requires(const Op& op, accum_t<T> a) {
  { op(a, a) } -> std::convertible_to<accum_t<T>>;
};

// pre/post with identity defaults: the executors call these and never ask which op they hold.
template <class Op, class A>
COLLCOMM_HD constexpr A apply_pre(const Op& op, A x) noexcept {
  if constexpr (requires { op.pre(x); })
    return static_cast<A>(op.pre(x));
  else
    return x;
}
template <class Op, class A>
COLLCOMM_HD constexpr A apply_post(const Op& op, A x, int nranks) noexcept {
  if constexpr (requires { op.post(x, nranks); })
    return static_cast<A>(op.post(x, nranks));
  else
    return x;
}
template <class Op>
inline constexpr bool op_has_pre = requires(const Op& op, float x) {
  op.pre(x);
};
template <class Op>
inline constexpr bool op_has_post = requires(const Op& op, float x) {
  op.post(x, 1);
};

template <class Op>
constexpr const char* op_name() noexcept {
  if constexpr (requires { Op::name; })
    return Op::name;
  else
    return "user";
}

COLLCOMM_NAMESPACE_END
