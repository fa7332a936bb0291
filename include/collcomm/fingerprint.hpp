// collcomm/fingerprint.hpp — call_fingerprint: what a rank says about the call a message or an
// exposed buffer belongs to, so that a peer making another call finds out instead of reading the
// wrong data.
//
// Ranks that disagree about a call — another root, algorithm, kind, op, count or element type, or
// a call one rank made and another did not — leave messages in the connections that a later call
// would take for its own. Every message and every exposure carries the sender's fingerprint; the
// receiver compares it with its own before it reads a byte (differing_fields), and names both
// calls when they differ (to_string, disagreement_text).
//
// What a fingerprint holds, each field comparable across processes (ids, not pointers):
//   seq    the call's number among the collective calls of this communicator rank, from 0. Every
//          rank makes every collective call, in the same order, so the numbers agree. Point-to-
//          point calls (kind send_recv: send, recv, send_recv, a group's calls) are made by some
//          ranks only; they are not counted and carry p2p_seq, so a collective's message is never
//          taken for a p2p one, nor the reverse (the kind differs too).
//   kind, algo, op   name_id of the policy's name (op_id: with_epilogue<sum> is not sum).
//   root   rooted kinds; -1 otherwise.
//   count  coll_args::count, the count the user passed.
//   elem   the element type.
// The peers of send_recv differ per rank by design and are not part of it.
//
// Trivially copyable and free of host-only types: the GPU executor puts the same struct in its
// slots and compares it in device code (make_fingerprint and differing_fields are COLLCOMM_HD).
// Only the text functions at the end are host code.
//
// Example:
//   const call_fingerprint mine = make_fingerprint<kind::broadcast, algo::ring, op::none, float>(12, a);
//   if (const unsigned d = differing_fields(mine, theirs))
//     throw ... to_string(mine) + " / " + to_string(theirs) + ": " + disagreement_text(d);
//   // to_string(mine) == "call #12: broadcast<ring> root 3, 1000 x f32, op none"
#pragma once

#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/linear.hpp>
#include <collcomm/algo/hierarchical.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/p2p.hpp>
#include <collcomm/algo/pairwise.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/config.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/types.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN

// A compact id of a policy's name: 32-bit FNV-1a of its characters, continuing from `h`.
COLLCOMM_HD constexpr std::uint32_t name_id(const char* s, std::uint32_t h = 2166136261u) noexcept {
  for (; *s != '\0'; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 16777619u;
  return h;
}

namespace detail {
// The id of an op's text, continuing from h: its name, or "with_epilogue<" inner ">".
template <class Op>
struct op_text_id {
  static constexpr std::uint32_t of(std::uint32_t h) noexcept { return name_id(op_name<Op>(), h); }
};
template <class Op, class E>
struct op_text_id<op::with_epilogue<Op, E>> {
  static constexpr std::uint32_t of(std::uint32_t h) noexcept {
    return name_id(">", op_text_id<Op>::of(name_id("with_epilogue<", h)));
  }
};
}  // namespace detail

// The id of an op: name_id of its name, where with_epilogue<Op, E> reads "with_epilogue<" Op ">"
// (its epilogue is a user functor and has no name). A user op without a name is "user".
template <class Op>
inline constexpr std::uint32_t op_id = detail::op_text_id<Op>::of(2166136261u);

// Kind send_recv (send, recv, send_recv, group): made by some ranks only, not counted.
template <class K>
inline constexpr bool is_point_to_point = std::is_same_v<K, kind::send_recv>;

struct call_fingerprint {
  static constexpr std::uint64_t p2p_seq = ~std::uint64_t{0};

  std::uint64_t seq = 0;    // collective call number of this communicator rank; p2p_seq for p2p
  std::uint64_t count = 0;  // coll_args::count
  std::uint32_t kind = 0;   // name_id(K::name)
  std::uint32_t algo = 0;   // name_id(Algo::name)
  std::uint32_t op = 0;     // op_id<Op>
  std::int32_t root = -1;   // rooted kinds; -1 otherwise
  element_kind elem = element_kind::f32;
  std::uint8_t reserved[7] = {};
};
static_assert(std::is_trivially_copyable_v<call_fingerprint> && sizeof(call_fingerprint) == 40);

// The fingerprint of a call of kind K with schedule Algo, op Op and element T, with arguments a
// (count, root), which is collective call number `seq` of this rank (ignored for p2p).
template <class K, class Algo, class Op, class T>
COLLCOMM_HD constexpr call_fingerprint make_fingerprint(std::uint64_t seq, const coll_args& a) noexcept {
  call_fingerprint f;
  f.seq = is_point_to_point<K> ? call_fingerprint::p2p_seq : seq;
  f.count = a.count;
  f.kind = name_id(K::name);
  f.algo = name_id(Algo::name);
  f.op = op_id<Op>;
  f.root = K::rooted ? a.root : -1;
  f.elem = element_traits<std::remove_cv_t<T>>::kind;
  return f;
}

// The fields in which two fingerprints differ, as a set of these bits (0: the same call).
namespace fingerprint_field {
inline constexpr unsigned seq = 1, kind = 2, algo = 4, op = 8, root = 16, count = 32, elem = 64;
}
COLLCOMM_HD constexpr unsigned differing_fields(const call_fingerprint& a, const call_fingerprint& b) noexcept {
  namespace f = fingerprint_field;
  return (a.seq != b.seq ? f::seq : 0u) | (a.kind != b.kind ? f::kind : 0u) | (a.algo != b.algo ? f::algo : 0u) |
         (a.op != b.op ? f::op : 0u) | (a.root != b.root ? f::root : 0u) | (a.count != b.count ? f::count : 0u) |
         (a.elem != b.elem ? f::elem : 0u);
}

// ---- text (host code) ----------------------------------------------------------------------------
namespace detail {

template <class... Policies>
struct named_policies {
  // The name whose id is `id`, or null.
  static const char* find(std::uint32_t id) noexcept {
    const char* found = nullptr;
    ((found = found != nullptr ? found : (name_id(Policies::name) == id ? Policies::name : nullptr)), ...);
    return found;
  }
  static constexpr bool distinct() noexcept {
    const std::uint32_t ids[] = {name_id(Policies::name)...};
    for (std::size_t i = 0; i < sizeof...(Policies); ++i)
      for (std::size_t j = i + 1; j < sizeof...(Policies); ++j)
        if (ids[i] == ids[j]) return false;
    return true;
  }
};

using known_kinds = named_policies<kind::all_reduce, kind::reduce_scatter, kind::all_gather, kind::broadcast,
                                   kind::reduce, kind::all_to_all, kind::gather, kind::scatter, kind::send_recv>;
using known_algorithms =
    named_policies<algo::ring, algo::tree, algo::one_shot, algo::two_shot, algo::direct, algo::pairwise,
                   algo::recursive_doubling, algo::p2p, algo::linear, algo::hierarchical<algo::ring, algo::ring>,
                   algo::hierarchical<algo::tree, algo::ring>, algo::hierarchical<algo::ring, algo::tree>>;
static_assert(known_kinds::distinct() && known_algorithms::distinct(),
              "collcomm: two kinds or two algorithms have names of the same name_id; rename one");

// An op's text from its id: a named op, or with_epilogue of one.
inline std::string op_text(std::uint32_t id) {
  static constexpr const char* names[] = {"sum",     "prod",   "min",     "max",  "avg", "premul_sum",
                                          "bit_and", "bit_or", "bit_xor", "none", "user"};
  for (const char* n : names) {
    if (name_id(n) == id) return n;
    if (name_id(">", name_id(n, name_id("with_epilogue<"))) == id) return std::string("with_epilogue<") + n + ">";
  }
  return "#" + std::to_string(id);
}

inline std::string id_text(const char* found, const char* axis, std::uint32_t id) {
  return found != nullptr ? std::string(found) : std::string(axis) + " #" + std::to_string(id);
}

}  // namespace detail

// "call #12: broadcast<ring> root 3, 1000 x f32, op none";
// "send_recv<p2p> (point-to-point), 1000 x f32, op none". Names of policies this header does not
// know are given by id ("algorithm #123456", "op #654321").
inline std::string to_string(const call_fingerprint& f) {
  std::string s = f.seq == call_fingerprint::p2p_seq ? std::string() : "call #" + std::to_string(f.seq) + ": ";
  s += detail::id_text(detail::known_kinds::find(f.kind), "kind", f.kind) + "<" +
       detail::id_text(detail::known_algorithms::find(f.algo), "algorithm", f.algo) + ">";
  if (f.seq == call_fingerprint::p2p_seq) s += " (point-to-point)";
  if (f.root >= 0) s += " root " + std::to_string(f.root);
  s += ", " + std::to_string(f.count) + " x " + element_kind_name(f.elem) + ", op " + detail::op_text(f.op);
  return s;
}

// "the root", "the kind, the algorithm and the count": what differing_fields found.
inline std::string disagreement_text(unsigned fields) {
  namespace f = fingerprint_field;
  static constexpr struct {
    unsigned bit;
    const char* text;
  } parts[] = {{f::seq, "the order of calls (a call one rank made and the other did not)"},
               {f::kind, "the kind"},
               {f::algo, "the algorithm"},
               {f::op, "the op"},
               {f::root, "the root"},
               {f::count, "the count"},
               {f::elem, "the element type"}};
  std::string s;
  int left = 0;
  for (const auto& p : parts) left += (fields & p.bit) != 0;
  for (const auto& p : parts) {
    if ((fields & p.bit) == 0) continue;
    if (!s.empty()) s += left == 1 ? " and " : ", ";
    s += p.text;
    --left;
  }
  return s;
}

COLLCOMM_NAMESPACE_END
