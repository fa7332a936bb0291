// Host correctness matrix: all_to_all, gather, scatter and send_recv (see matrix_driver.hpp for
// what is run and checked; send_recv runs shift, chain, self and random-permutation patterns).
#include "matrix_driver.hpp"

TEST_CASE("host matrix all_to_all") { collcomm_test::host_matrix::run_kind<collcomm::kind::all_to_all>(); }
TEST_CASE("host matrix gather") { collcomm_test::host_matrix::run_kind<collcomm::kind::gather>(); }
TEST_CASE("host matrix scatter") { collcomm_test::host_matrix::run_kind<collcomm::kind::scatter>(); }
TEST_CASE("host matrix send_recv") { collcomm_test::host_matrix::run_kind<collcomm::kind::send_recv>(); }
