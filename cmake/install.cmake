# Installation: `cmake --install build --prefix P` puts
#   P/bin/kgate                          the command line
#   P/share/kgate/corpus/*.json          the committed corpora (kgate finds them there)
#   P/lib/python3/dist-packages/kgate/   the Python package (tools/python/CMakeLists.txt): kgate.driver
#                                        and kgate.backends.torch, what `verify --backend torch|python:...`
#                                        and bench's external arms run (kgate finds it there)
#   P/include/{reference,oracles}/...    the references' and the oracle's headers
#   P/lib/libkgate_*.a                   their static libraries
#   P/lib/cmake/kgate/                   a CMake package:
#       find_package(kgate REQUIRED)
#       target_link_libraries(app PRIVATE kgate::ref_ops kgate::oracles)
# kgate::reference is the value types (problems, tensors, fills, .npy, JSON),
# kgate::ref_ops the fp64/MPFR references, kgate::oracles the tolerance oracle.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# In the build the headers are found in the source tree; installed, in include/.
get_target_property(_kgate_ref_includes kgate_reference INTERFACE_INCLUDE_DIRECTORIES)
list(REMOVE_ITEM _kgate_ref_includes ${PROJECT_SOURCE_DIR})
set_property(TARGET kgate_reference PROPERTY INTERFACE_INCLUDE_DIRECTORIES
  "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>" "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>" ${_kgate_ref_includes})

set_target_properties(kgate_reference PROPERTIES EXPORT_NAME reference)
set_target_properties(kgate_ref_ops PROPERTIES EXPORT_NAME ref_ops)
set_target_properties(kgate_oracles PROPERTIES EXPORT_NAME oracles)
install(TARGETS kgate_reference kgate_ref_ops kgate_oracles EXPORT kgateTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS kgate RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/corpus/shapes.json ${PROJECT_SOURCE_DIR}/corpus/bitwise.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/kgate/corpus)
foreach(dir reference reference/conv3d reference/groupnorm oracles)
  file(GLOB _kgate_headers ${PROJECT_SOURCE_DIR}/${dir}/*.hpp)
  install(FILES ${_kgate_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${dir})
endforeach()

set(_kgate_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kgate)
install(EXPORT kgateTargets NAMESPACE kgate:: DESTINATION ${_kgate_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kgateConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kgateConfig.cmake INSTALL_DESTINATION ${_kgate_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kgateConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kgateConfig.cmake ${PROJECT_BINARY_DIR}/kgateConfigVersion.cmake
        DESTINATION ${_kgate_cmake_dir})
