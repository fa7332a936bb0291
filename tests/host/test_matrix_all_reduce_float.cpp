// Host correctness matrix: all_reduce over the six floating-point elements (see matrix_driver.hpp
// for what is run and checked). all_reduce has the most algorithms, so its elements are split over
// two executables, which build and run in parallel.
#include "matrix_driver.hpp"

TEST_CASE("host matrix all_reduce (floating-point elements)") {
  using namespace collcomm_test::host_matrix;
  run_kind<collcomm::kind::all_reduce, float_elements>();
}
