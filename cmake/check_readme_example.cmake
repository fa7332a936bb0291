# check_readme_example.cmake — README.md must show what the code does:
#
#   -DEXAMPLE=examples/00_readme_example.cpp   the usage example must be exactly that file (which
#       the build compiles and ctest runs). The README marks the block with a line
#       `<!-- example: examples/00_readme_example.cpp -->` right before its ```cpp fence.
#   -DTABLE_TOOL=<readme_table executable>     the algorithm x kind table must be, verbatim, what
#       that program prints (it asks algorithm_for, the predicate of the compile-time checks).
#
#   cmake -DREADME=README.md -DEXAMPLE=... -P cmake/check_readme_example.cmake
cmake_minimum_required(VERSION 3.25)

file(READ "${README}" readme)

if(TABLE_TOOL)
  execute_process(COMMAND "${TABLE_TOOL}" RESULT_VARIABLE rc OUTPUT_VARIABLE table)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TABLE_TOOL} failed (exit ${rc})")
  endif()
  string(FIND "${readme}" "${table}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md's algorithm x kind table is not what algorithm_for says; replace it "
                        "with the output of ${TABLE_TOOL}:\n${table}")
  endif()
  message(STATUS "README.md's algorithm x kind table matches algorithm_for")
  return()
endif()

file(READ "${EXAMPLE}" example)
get_filename_component(example_name "${EXAMPLE}" NAME)

string(FIND "${readme}" "<!-- example: examples/${example_name} -->" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README} has no line `<!-- example: examples/${example_name} -->` before the example")
endif()
string(SUBSTRING "${readme}" ${at} -1 rest)
string(FIND "${rest}" "```cpp\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "${README}: no ```cpp block after the example marker")
endif()
math(EXPR open "${open} + 7")
string(SUBSTRING "${rest}" ${open} -1 rest)
string(FIND "${rest}" "```" close)
if(close EQUAL -1)
  message(FATAL_ERROR "${README}: the example's ```cpp block is not closed")
endif()
string(SUBSTRING "${rest}" 0 ${close} block)

if(NOT block STREQUAL example)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/readme_block.cpp" "${block}")
  message(FATAL_ERROR "README.md's example differs from ${EXAMPLE}: copy the file into the README's "
                      "```cpp block (the README's version is in ${CMAKE_CURRENT_BINARY_DIR}/readme_block.cpp; "
                      "diff them)")
endif()
message(STATUS "README.md's example is ${EXAMPLE}, character for character")
