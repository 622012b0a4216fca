# CPack: two Debian packages from one build (cpack -G DEB in the build dir;
# scripts/deb-test.sh installs them into a clean bookworm container).
#   tensord                 the server and tensorctl
#   libtensord-client-dev   libtensord_client.so and .a, headers, CMake
#                           package and pkg-config file
# Runtime dependencies come from dpkg-shlibdeps; the development package
# also depends on what its headers and CMake package need.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tensord)
set(CPACK_PACKAGE_VENDOR "tensord developers")
set(CPACK_PACKAGE_CONTACT "tensord developers <tensord@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "gRPC tensor server with zero-copy local handoff (DLPack)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_COMPONENTS_ALL server client client_dev)
set(CPACK_COMPONENT_SERVER_GROUP server)
set(CPACK_COMPONENT_CLIENT_GROUP client-dev)
set(CPACK_COMPONENT_CLIENT_DEV_GROUP client-dev)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME tensord)
set(CPACK_DEBIAN_SERVER_DESCRIPTION
    "gRPC tensor server with zero-copy local handoff\n tensord keeps named, versioned tensors (host and GPU) and serves them over\n gRPC and, on the same host, as memfds and device handles; tensorctl is its\n command-line client.")
set(CPACK_DEBIAN_CLIENT-DEV_PACKAGE_NAME libtensord-client-dev)
set(CPACK_DEBIAN_CLIENT-DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_CLIENT-DEV_DESCRIPTION
    "C++ client of tensord (development files)\n libtensord_client (shared and static), its headers, a CMake package\n (find_package(tensord) -> tensord::client) and a pkg-config file.")
# What a consumer compiles and links against besides the library itself.
set(CPACK_DEBIAN_CLIENT-DEV_PACKAGE_DEPENDS
    "libabsl-dev, libdlpack-dev, libgrpc++-dev, libprotobuf-dev, protobuf-compiler-grpc, pkg-config")

include(CPack)
