// Host correctness matrix: all_gather (see matrix_driver.hpp for what is run and checked).
#include "matrix_driver.hpp"

TEST_CASE("host matrix all_gather") { collcomm_test::host_matrix::run_kind<collcomm::kind::all_gather>(); }
