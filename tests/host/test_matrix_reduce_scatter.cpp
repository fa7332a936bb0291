// Host correctness matrix: reduce_scatter (see matrix_driver.hpp for what is run and checked).
#include "matrix_driver.hpp"

TEST_CASE("host matrix reduce_scatter") { collcomm_test::host_matrix::run_kind<collcomm::kind::reduce_scatter>(); }
