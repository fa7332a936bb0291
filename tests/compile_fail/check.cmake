# check.cmake — one compile-fail test: builds TARGET in BUILD_DIR and checks the outcome against
# the first line of SNIPPET:
#   // expect-error: <text>   the build must fail, the compiler output must contain a failed
#                             static_assert with <text>, and no other collcomm axis message
#                             (so the check that fired is the one the snippet is about)
#   // expect: compiles       the build must succeed
cmake_minimum_required(VERSION 3.25)

file(STRINGS "${SNIPPET}" first LIMIT_COUNT 1)
if(first MATCHES "^// expect-error: (.+)$")
  set(expect "${CMAKE_MATCH_1}")
elseif(first MATCHES "^// expect: compiles")
  set(expect "")
else()
  message(FATAL_ERROR "${SNIPPET}: first line must be `// expect-error: <text>` or `// expect: compiles`")
endif()

set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}" ${config_args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(ASCII 27 esc)
string(REGEX REPLACE "${esc}\\[[0-9;]*[mK]" "" out "${out}")

if(expect STREQUAL "")
  if(NOT rc EQUAL 0)
    message("${out}")
    message(FATAL_ERROR "${TARGET}: expected to compile, but the build failed")
  endif()
  message(STATUS "${TARGET}: compiles, as expected")
  return()
endif()

if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET}: expected a compile error containing\n  ${expect}\nbut it compiled")
endif()
string(FIND "${out}" "${expect}" at)
if(at EQUAL -1)
  message("${out}")
  message(FATAL_ERROR "${TARGET}: the build failed, but without the expected message\n  ${expect}")
endif()
# Every collcomm static_assert message starts "collcomm <axis> axis:". Only the expected one may fire.
string(REGEX MATCHALL "static assertion failed[^\n]*collcomm [a-z]+ axis:" fired "${out}")
string(REGEX MATCH "^collcomm [a-z]+ axis:" expected_axis "${expect}")
foreach(f IN LISTS fired)
  string(REGEX MATCH "collcomm [a-z]+ axis:" axis "${f}")
  if(expected_axis AND NOT axis STREQUAL expected_axis)
    message("${out}")
    message(FATAL_ERROR "${TARGET}: besides '${expected_axis}', '${axis}' fired too")
  endif()
endforeach()
message(STATUS "${TARGET}: fails to compile with the expected message:\n  ${expect}")
