# cmake/install.cmake — install rules and the CMake package (collcommConfig.cmake), so that a
# consumer can `find_package(collcomm CONFIG REQUIRED)` and link `collcomm::collcomm`.
#
# collcomm is header-only: what gets installed is include/collcomm, the exported INTERFACE target
# and a config file that finds the same dependencies the target names (CUDAToolkit, CCCL,
# Threads). Included from the top-level CMakeLists.txt, also when collcomm is a subproject
# (FetchContent): then `cmake --install` of the parent installs collcomm with it, unless the
# parent sets COLLCOMM_INSTALL=OFF.
include(CMakePackageConfigHelpers)

option(COLLCOMM_INSTALL "Generate collcomm's install rules" ON)
if(NOT COLLCOMM_INSTALL)
  return()
endif()

set(COLLCOMM_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/collcomm"
    CACHE STRING "Where collcommConfig.cmake is installed, relative to the prefix")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/collcomm"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.cuh" PATTERN "*.inl")

install(TARGETS collcomm EXPORT collcomm_targets)
install(EXPORT collcomm_targets
        NAMESPACE collcomm::
        FILE collcommTargets.cmake
        DESTINATION "${COLLCOMM_INSTALL_CMAKEDIR}")

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/collcommConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/collcommConfig.cmake"
  INSTALL_DESTINATION "${COLLCOMM_INSTALL_CMAKEDIR}")
# 0.x releases promise nothing across minor versions; SameMajorVersion is what 1.0 onwards will
# mean, and a header-only library has no architecture to check (ARCH_INDEPENDENT).
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/collcommConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion
  ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/collcommConfig.cmake" "${PROJECT_BINARY_DIR}/collcommConfigVersion.cmake"
        DESTINATION "${COLLCOMM_INSTALL_CMAKEDIR}")
