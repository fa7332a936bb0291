// Host correctness matrix: all_reduce over the six integer elements (see matrix_driver.hpp for
// what is run and checked).
#include "matrix_driver.hpp"

TEST_CASE("host matrix all_reduce (integer elements)") {
  using namespace collcomm_test::host_matrix;
  run_kind<collcomm::kind::all_reduce, integer_elements>();
}
