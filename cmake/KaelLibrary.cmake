# The library others build on: libkael.a and libkael.so, both made of the object files of every
# layer (kael_layer() in src/CMakeLists.txt adds each layer to the global list KAEL_LAYERS, so a
# new layer needs no edit here), the install rules, and the CMake and pkg-config packages.
# The layer static libraries stay as they are for the tests and the `kael` command.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Libraries the layer objects need when linked. Header-only dependencies (nlohmann_json) need
# nothing here: only kael/core/json.hpp includes one, and kael/kael.hpp does not include it. A layer that uses a compiled library adds it here.
set(KAEL_LINK_DEPS Threads::Threads)
if(KAEL_WITH_CUDA)
  list(APPEND KAEL_LINK_DEPS CUDA::cudart_static)
endif()
if(KAEL_WITH_MPI)  # by path, so a consumer of libkael.a needs no FindMPI (nor a C compiler) of its own
  list(APPEND KAEL_LINK_DEPS ${MPI_C_LIBRARIES})
endif()

get_property(KAEL_LAYER_TARGETS GLOBAL PROPERTY KAEL_LAYERS)
target_link_libraries(kael INTERFACE ${KAEL_LAYER_TARGETS})

set(KAEL_LAYER_OBJECTS "")
foreach(layer IN LISTS KAEL_LAYER_TARGETS)
  list(APPEND KAEL_LAYER_OBJECTS $<TARGET_OBJECTS:${layer}>)
endforeach()

foreach(kind IN ITEMS static shared)
  string(TOUPPER ${kind} type)
  add_library(kael_${kind} ${type} ${KAEL_LAYER_OBJECTS})
  add_dependencies(kael_${kind} ${KAEL_LAYER_TARGETS})  # the objects come from building the layers
  set_target_properties(kael_${kind} PROPERTIES
    OUTPUT_NAME kael
    EXPORT_NAME kael_${kind}
    LINKER_LANGUAGE CXX
    ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
  target_include_directories(kael_${kind} INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(kael_${kind} INTERFACE cxx_std_20)
  target_link_libraries(kael_${kind} PRIVATE ${KAEL_LINK_DEPS})
endforeach()
# Before 1.0 every minor version may change the ABI.
set_target_properties(kael_shared PROPERTIES VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
if(NOT KAEL_SANITIZE AND NOT KAEL_FUZZ)  # a sanitizer's runtime may come from the program instead
  target_link_options(kael_shared PRIVATE LINKER:--no-undefined)  # every symbol resolved at link time
endif()
add_library(kael::kael ALIAS kael_shared)  # what examples/ links, in the tree as when installed

# --- install: cmake --install build --prefix P ---
install(TARGETS kael_static kael_shared EXPORT kaelTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET kael_cli)
  install(TARGETS kael_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${KAEL_BUNDLED_MODEL_SOURCE_DIR} DESTINATION ${KAEL_BUNDLED_MODEL_INSTALL_DIR})  # kael finds it there
# The public headers: include/kael only (src/ holds the private ones), and the generated version.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kael DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/kael/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kael)

set(KAEL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kael)
install(EXPORT kaelTargets NAMESPACE kael:: DESTINATION ${KAEL_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kaelConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kaelConfig.cmake INSTALL_DESTINATION ${KAEL_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kaelConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kaelConfig.cmake ${PROJECT_BINARY_DIR}/kaelConfigVersion.cmake
  DESTINATION ${KAEL_CMAKE_DIR})

# pkg-config: the prefix is found from the .pc file's own place, so --prefix at install time works.
file(RELATIVE_PATH KAEL_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
# A static libkael.a built with MPI needs libmpi at the consumer's link.
set(KAEL_PC_LIBS_PRIVATE "-pthread")
foreach(library IN LISTS MPI_C_LIBRARIES)
  string(APPEND KAEL_PC_LIBS_PRIVATE " ${library}")
endforeach()
if(KAEL_WITH_CUDA)  # the CUDA runtime, linked statically, and what it needs
  string(APPEND KAEL_PC_LIBS_PRIVATE " ${CUDAToolkit_LIBRARY_DIR}/libcudart_static.a -ldl -lrt")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/kael.pc.in ${PROJECT_BINARY_DIR}/kael.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kael.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
