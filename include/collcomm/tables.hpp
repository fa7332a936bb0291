// collcomm/tables.hpp — the tables algo::automatic<> picks from (algo/automatic.hpp): one per
// transport, each in its own header under collcomm/tables/, written by bench/tune.py from a sweep
// of the named algorithms (the header says which run). A transport without a table runs each
// kind's classic algorithm with the world's options (ring, pairwise, linear, p2p).
#pragma once

#include <collcomm/algo/automatic.hpp>
#include <collcomm/config.hpp>
#include <collcomm/tables/host_shm.hpp>
#include <collcomm/tables/nvlink.hpp>
#include <collcomm/transport/tags.hpp>

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

COLLCOMM_NAMESPACE_END
