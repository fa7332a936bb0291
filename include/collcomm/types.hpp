// collcomm/types.hpp — the element axis: the 12 element types and their accumulation types.
//
// | element | C++ type        | accumulates in |
// |---------|-----------------|----------------|
// | f32     | float           | float          |
// | f64     | double          | double         |
// | f16     | __half          | float          |
// | bf16    | __nv_bfloat16   | float          |
// | e4m3    | __nv_fp8_e4m3   | float          |
// | e5m2    | __nv_fp8_e5m2   | float          |
// | i8 u8 i32 u32 i64 u64 | <cstdint> types | themselves (two's-complement wrap) |
//
// The CUDA types come from the toolkit's cuda_fp16.h / cuda_bf16.h / cuda_fp8.h, which also compile
// in host-only code, so the host executor moves exactly the bits the GPU would.
#pragma once

#include <collcomm/config.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <concepts>
#include <cstdint>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN

enum class element_kind : std::uint8_t { f32, f64, f16, bf16, e4m3, e5m2, i8, u8, i32, u32, i64, u64 };

// element_traits<T>: defined only for the 12 element types. Members:
//   accum        the type reductions compute in
//   kind, name   for printing and for run-time checks (the opt-in shape exchange)
//   is_integer   bitwise ops need it
//   to_accum / from_accum   conversions (round to nearest even, fp8 saturates to finite)
template <class T>
struct element_traits;

namespace detail {
template <class T, element_kind K, class Acc, bool Int>
struct plain_element {
  using accum = Acc;
  static constexpr element_kind kind = K;
  static constexpr bool is_integer = Int;
  COLLCOMM_HD static constexpr Acc to_accum(T x) noexcept { return static_cast<Acc>(x); }
  COLLCOMM_HD static constexpr T from_accum(Acc x) noexcept { return static_cast<T>(x); }
};
}  // namespace detail

template <>
struct element_traits<float> : detail::plain_element<float, element_kind::f32, float, false> {
  static constexpr const char* name = "f32";
};
template <>
struct element_traits<double> : detail::plain_element<double, element_kind::f64, double, false> {
  static constexpr const char* name = "f64";
};
template <>
struct element_traits<std::int8_t> : detail::plain_element<std::int8_t, element_kind::i8, std::int8_t, true> {
  static constexpr const char* name = "i8";
};
template <>
struct element_traits<std::uint8_t> : detail::plain_element<std::uint8_t, element_kind::u8, std::uint8_t, true> {
  static constexpr const char* name = "u8";
};
template <>
struct element_traits<std::int32_t> : detail::plain_element<std::int32_t, element_kind::i32, std::int32_t, true> {
  static constexpr const char* name = "i32";
};
template <>
struct element_traits<std::uint32_t> : detail::plain_element<std::uint32_t, element_kind::u32, std::uint32_t, true> {
  static constexpr const char* name = "u32";
};
template <>
struct element_traits<std::int64_t> : detail::plain_element<std::int64_t, element_kind::i64, std::int64_t, true> {
  static constexpr const char* name = "i64";
};
template <>
struct element_traits<std::uint64_t> : detail::plain_element<std::uint64_t, element_kind::u64, std::uint64_t, true> {
  static constexpr const char* name = "u64";
};

template <>
struct element_traits<__half> {
  using accum = float;
  static constexpr element_kind kind = element_kind::f16;
  static constexpr bool is_integer = false;
  static constexpr const char* name = "f16";
  COLLCOMM_HD static float to_accum(__half x) noexcept { return __half2float(x); }
  COLLCOMM_HD static __half from_accum(float x) noexcept { return __float2half_rn(x); }
};
template <>
struct element_traits<__nv_bfloat16> {
  using accum = float;
  static constexpr element_kind kind = element_kind::bf16;
  static constexpr bool is_integer = false;
  static constexpr const char* name = "bf16";
  COLLCOMM_HD static float to_accum(__nv_bfloat16 x) noexcept { return __bfloat162float(x); }
  COLLCOMM_HD static __nv_bfloat16 from_accum(float x) noexcept { return __float2bfloat16_rn(x); }
};
template <>
struct element_traits<__nv_fp8_e4m3> {
  using accum = float;
  static constexpr element_kind kind = element_kind::e4m3;
  static constexpr bool is_integer = false;
  static constexpr const char* name = "e4m3";
  COLLCOMM_HD static float to_accum(__nv_fp8_e4m3 x) noexcept { return static_cast<float>(x); }
  COLLCOMM_HD static __nv_fp8_e4m3 from_accum(float x) noexcept { return __nv_fp8_e4m3(x); }
};
template <>
struct element_traits<__nv_fp8_e5m2> {
  using accum = float;
  static constexpr element_kind kind = element_kind::e5m2;
  static constexpr bool is_integer = false;
  static constexpr const char* name = "e5m2";
  COLLCOMM_HD static float to_accum(__nv_fp8_e5m2 x) noexcept { return static_cast<float>(x); }
  COLLCOMM_HD static __nv_fp8_e5m2 from_accum(float x) noexcept { return __nv_fp8_e5m2(x); }
};

// The element axis concept: T is one of the 12 element types.
template <class T>
concept element = requires {
  typename element_traits<std::remove_cv_t<T>>::accum;
  { element_traits<std::remove_cv_t<T>>::name } -> std::convertible_to<const char*>;
};

template <element T>
using accum_t = typename element_traits<std::remove_cv_t<T>>::accum;

template <element T>
inline constexpr bool is_integer_element = element_traits<std::remove_cv_t<T>>::is_integer;

template <element T>
COLLCOMM_HD constexpr accum_t<T> to_accum(T x) noexcept {
  return element_traits<std::remove_cv_t<T>>::to_accum(x);
}
template <element T>
COLLCOMM_HD constexpr T from_accum(accum_t<T> x) noexcept {
  return element_traits<std::remove_cv_t<T>>::from_accum(x);
}

// The name of an element kind (element_traits<T>::name of its type), for messages.
COLLCOMM_HD constexpr const char* element_kind_name(element_kind k) noexcept {
  constexpr const char* names[] = {"f32", "f64", "f16", "bf16", "e4m3", "e5m2", "i8", "u8", "i32", "u32", "i64", "u64"};
  const auto i = static_cast<unsigned>(k);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "an unknown type";
}

template <element T>
inline constexpr const char* element_name = element_traits<std::remove_cv_t<T>>::name;

COLLCOMM_NAMESPACE_END
