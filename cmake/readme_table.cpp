// readme_table — prints README.md's "Algorithms × kinds" table from algorithm_for, the predicate
// the compile-time checks use, so the README cannot claim a schedule that does not compile (the
// ctest test example.readme_table_matches compares; check_readme_example.cmake).
// A new algorithm goes into the list in main() (and into tests/common/matrix.hpp).
#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/hierarchical.hpp>
#include <collcomm/algo/linear.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/p2p.hpp>
#include <collcomm/algo/pairwise.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/compose.hpp>

#include <cstdio>

namespace cc = collcomm;

template <class... Ks>
struct kinds {};
using table_kinds =
    kinds<cc::kind::all_reduce, cc::kind::reduce_scatter, cc::kind::all_gather, cc::kind::broadcast, cc::kind::reduce,
          cc::kind::all_to_all, cc::kind::gather, cc::kind::scatter, cc::kind::send_recv>;

template <class... Ks>
void header(kinds<Ks...>) {
  std::printf("| algorithm | primitives |");
  (std::printf(" %s |", Ks::name), ...);
  std::printf("\n|---|---|");
  (std::printf("%s", sizeof(Ks) ? "---|" : ""), ...);
  std::printf("\n");
}

template <class A, class... Ks>
void row(kinds<Ks...>) {
  std::printf("| `%s` | %s |", A::name, A::needs_direct ? "direct" : "FIFO");
  (std::printf(" %s |", cc::algorithm_for<A, Ks> ? "✓" : ""), ...);
  std::printf("\n");
}

template <class... As>
void table() {
  header(table_kinds{});
  (row<As>(table_kinds{}), ...);
}

int main() {
  table<cc::algo::ring, cc::algo::tree, cc::algo::recursive_doubling, cc::algo::one_shot, cc::algo::two_shot,
        cc::algo::direct, cc::algo::pairwise, cc::algo::linear, cc::algo::p2p,
        cc::algo::hierarchical<cc::algo::ring, cc::algo::ring>, cc::algo::hierarchical<cc::algo::tree, cc::algo::ring>,
        cc::algo::hierarchical<cc::algo::ring, cc::algo::tree>>();
  return 0;
}
