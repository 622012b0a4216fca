# The installable client: libtensord_client as a shared and a static library
# that carry the engine layers it is built on (common, dlpack, device, wire,
# the generated protos) inside them, its public headers, a CMake package
# (find_package(tensord CONFIG) -> tensord::client, tensord::client_static)
# and a pkg-config file. In-tree targets keep linking tensord_client.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# What the packaged libraries are made of: object files, so nothing of the
# source tree is left for a consumer to link.
set(_tensord_client_parts tensord_client tensord_common tensord_dlpack tensord_device tensord_wire
    tensord_proto tensord_health_proto)
set(_tensord_client_objects)
foreach(_part IN LISTS _tensord_client_parts)
  # The shared library needs position-independent objects; the server links
  # the same objects, and PIC costs it nothing measurable on x86-64.
  set_target_properties(${_part} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  list(APPEND _tensord_client_objects $<TARGET_OBJECTS:${_part}>)
endforeach()

# Libraries the parts call; a static consumer links them itself (the CMake
# package finds them), a shared one gets them through libtensord_client.so.
set(_tensord_client_deps gRPC::grpc++ protobuf::libprotobuf absl::status absl::statusor absl::strings
    absl::str_format absl::cord absl::time absl::synchronization absl::flat_hash_map
    absl::flat_hash_set Threads::Threads)
if(TENSORD_HAVE_CUDA)
  list(APPEND _tensord_client_deps CUDA::cudart_static)
endif()
# What a consumer's own code needs to compile against the public headers.
set(_tensord_client_interface absl::status absl::statusor absl::strings absl::time dlpack::dlpack)

foreach(_kind SHARED STATIC)
  string(TOLOWER ${_kind} _suffix)
  set(_target tensord_client_${_suffix})
  add_library(${_target} ${_kind} ${_tensord_client_objects})
  # Both are libtensord_client.{so,a} once installed; in the build tree they
  # sit apart from the in-tree archive of the same name.
  set_target_properties(${_target} PROPERTIES
    OUTPUT_NAME tensord_client
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/package/lib
    ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/package/lib
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  target_include_directories(${_target} INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/client/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${_target} INTERFACE cxx_std_20)
  target_link_libraries(${_target} PUBLIC ${_tensord_client_interface})
  if(_kind STREQUAL SHARED)
    target_link_libraries(${_target} PRIVATE ${_tensord_client_deps})
  else()
    target_link_libraries(${_target} PUBLIC ${_tensord_client_deps})
  endif()
endforeach()
set_target_properties(tensord_client_shared PROPERTIES EXPORT_NAME client)
set_target_properties(tensord_client_static PROPERTIES EXPORT_NAME client_static)

# Two export sets: the static library's link dependencies (gRPC, protobuf,
# CUDA's static runtime) need not be on a consumer's machine for the shared
# one to work, so tensordConfig.cmake loads tensord::client_static only when
# they are.
install(TARGETS tensord_client_shared EXPORT tensordTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client
        NAMELINK_COMPONENT client_dev)
install(TARGETS tensord_client_static EXPORT tensordStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client_dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/include/tensord
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT client_dev
        FILES_MATCHING PATTERN "*.h")
set(_tensord_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tensord)
install(EXPORT tensordTargets NAMESPACE tensord:: DESTINATION ${_tensord_cmake_dir}
        COMPONENT client_dev)
install(EXPORT tensordStaticTargets NAMESPACE tensord:: DESTINATION ${_tensord_cmake_dir}
        COMPONENT client_dev)
set(_tensord_cuda_note "")
if(TENSORD_HAVE_CUDA)
  set(_tensord_cuda_note " and the CUDA toolkit (cudart_static)")
endif()
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/tensordConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/tensordConfig.cmake
                              INSTALL_DESTINATION ${_tensord_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/tensordConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/tensordConfig.cmake
              ${PROJECT_BINARY_DIR}/package/tensordConfigVersion.cmake
        DESTINATION ${_tensord_cmake_dir} COMPONENT client_dev)

set(TENSORD_PC_CUDA_LIBS "")
if(TENSORD_HAVE_CUDA)
  # cudart_static's own needs (it loads libcuda.so.1 at run time).
  set(TENSORD_PC_CUDA_LIBS "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt")
endif()
file(RELATIVE_PATH TENSORD_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" TENSORD_PC_TO_PREFIX "${TENSORD_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/tensord.pc.in ${PROJECT_BINARY_DIR}/package/tensord.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/tensord.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT client_dev)
