// collcomm/tables.hpp — the tables algo::automatic<> picks from (algo/automatic.hpp): one per
// transport, each in its own header under collcomm/tables/, written by bench/tune.py from a sweep
// of the named algorithms (the header says which run). A transport without a table runs each
// kind's classic algorithm with the world's options (ring, pairwise, linear, p2p).
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/compose.hpp>
#include <collcomm/config.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/tables/host_shm.hpp>
#include <collcomm/tables/nvlink.hpp>
#include <collcomm/tables/pcie_staged.hpp>
#include <collcomm/transport/tags.hpp>

#include <type_traits>

COLLCOMM_NAMESPACE_BEGIN

template <class Tr>
struct default_table_for {
  using type = rule_table<>;
};
template <>
struct default_table_for<transport::host_shm> {
  using type = tables::host_shm;
};
template <>
struct default_table_for<transport::nvlink> {
  using type = tables::nvlink;
};
template <>
struct default_table_for<transport::pcie_staged> {
  using type = tables::pcie_staged;
};

namespace detail {
// Whether every rule of a table names an arm that runs over Tr (f32, sum or none): a rule that
// cannot would be passed over at every call, a mistake in the table rather than a choice.
template <class Tr, class... R>
constexpr bool every_arm_runs(rule_table<R...>) {
  return (valid_composition<typename R::kind, typename R::algo, Tr,
                            std::conditional_t<R::kind::reduces, op::sum, op::none>, float> &&
          ...);
}
}  // namespace detail

static_assert(detail::every_arm_runs<transport::host_shm>(tables::host_shm{}),
              "collcomm/tables/host_shm.hpp names an arm that cannot run over transport::host_shm");
static_assert(detail::every_arm_runs<transport::nvlink>(tables::nvlink{}),
              "collcomm/tables/nvlink.hpp names an arm that cannot run over transport::nvlink");
static_assert(detail::every_arm_runs<transport::pcie_staged>(tables::pcie_staged{}),
              "collcomm/tables/pcie_staged.hpp names an arm that cannot run over transport::pcie_staged");

COLLCOMM_NAMESPACE_END
