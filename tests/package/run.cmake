# tests/package/run.cmake — builds and runs tests/package/consumer against collcomm both ways a
# user gets it:
#   1. FetchContent from this source tree (SOURCE_DIR), collcomm as a subproject;
#   2. `cmake --install` of collcomm to a prefix, then find_package(collcomm CONFIG REQUIRED).
#
#   cmake -DWORK_DIR=/tmp/collcomm-package -P tests/package/run.cmake
#
# Optional: -DGENERATOR=Ninja (default: Ninja when found), -DCXX=<compiler>. Fails (non-zero exit)
# on the first step that fails, printing that step's output.
cmake_minimum_required(VERSION 3.25)

get_filename_component(source_dir "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
if(NOT WORK_DIR)
  set(WORK_DIR "${source_dir}/build-package")
endif()
if(NOT GENERATOR)
  find_program(ninja_exe ninja)
  if(ninja_exe)
    set(GENERATOR Ninja)
  else()
    set(GENERATOR "Unix Makefiles")
  endif()
endif()
set(extra)
if(CXX)
  list(APPEND extra "-DCMAKE_CXX_COMPILER=${CXX}")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(step name)
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(TIMESTAMP t1 "%s")
  math(EXPR dt "${t1} - ${t0}")
  if(NOT rc EQUAL 0)
    message("${out}")
    message(FATAL_ERROR "package test: step '${name}' failed (exit ${rc})")
  endif()
  message(STATUS "package test: ${name}: ok (${dt} s)")
  string(STRIP "${out}" out)
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(consumer "${CMAKE_CURRENT_LIST_DIR}/consumer")

# 1. FetchContent.
step("fetch: configure" ${CMAKE_COMMAND} -S "${consumer}" -B "${WORK_DIR}/fetch" -G "${GENERATOR}" ${extra}
     -DCOLLCOMM_CONSUME=fetch "-DCOLLCOMM_SOURCE_DIR=${source_dir}")
step("fetch: build" ${CMAKE_COMMAND} --build "${WORK_DIR}/fetch")
step("fetch: run" "${WORK_DIR}/fetch/consumer")
message(STATUS "  ${step_output}")

# 2. Install, then find_package. collcomm's own tests and examples stay off: only the package.
step("install: configure collcomm" ${CMAKE_COMMAND} -S "${source_dir}" -B "${WORK_DIR}/collcomm" -G "${GENERATOR}"
     ${extra} -DCOLLCOMM_BUILD_TESTS=OFF -DCOLLCOMM_BUILD_EXAMPLES=OFF "-DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix")
step("install: cmake --install" ${CMAKE_COMMAND} --install "${WORK_DIR}/collcomm")
foreach(f include/collcomm/collcomm.hpp include/collcomm/compose.hpp lib/cmake/collcomm/collcommConfig.cmake
          lib/cmake/collcomm/collcommConfigVersion.cmake lib/cmake/collcomm/collcommTargets.cmake)
  if(NOT EXISTS "${WORK_DIR}/prefix/${f}")
    file(GLOB_RECURSE got RELATIVE "${WORK_DIR}/prefix" "${WORK_DIR}/prefix/*")
    message(FATAL_ERROR "package test: the install lacks ${f}; it has: ${got}")
  endif()
endforeach()
step("find: configure" ${CMAKE_COMMAND} -S "${consumer}" -B "${WORK_DIR}/find" -G "${GENERATOR}" ${extra}
     -DCOLLCOMM_CONSUME=find "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
string(REGEX MATCH "found collcomm [^\n]*" found "${step_output}")
message(STATUS "  ${found}")
step("find: build" ${CMAKE_COMMAND} --build "${WORK_DIR}/find")
step("find: run" "${WORK_DIR}/find/consumer")
message(STATUS "  ${step_output}")

# A version the package does not promise must be refused (SameMajorVersion).
execute_process(COMMAND ${CMAKE_COMMAND} -S "${consumer}" -B "${WORK_DIR}/find-v1" -G "${GENERATOR}" ${extra}
                -DCOLLCOMM_CONSUME=find "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" -DCOLLCOMM_WANT_VERSION=1.0
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "package test: find_package(collcomm 1.0) accepted version 0.x")
elseif(NOT out MATCHES "compatible with requested version")
  message("${out}")
  message(FATAL_ERROR "package test: find_package(collcomm 1.0) failed, but not for its version")
endif()
message(STATUS "package test: find_package(collcomm 1.0) refused as it should be")
message(STATUS "package test: all passed")
