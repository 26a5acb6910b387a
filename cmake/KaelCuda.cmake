# The CUDA backend (KAEL_CUDA): AUTO builds it when CMake finds the CUDA toolkit (nvcc on PATH,
# CUDACXX, or /usr/local/cuda), ON requires it, OFF leaves it out. Sets KAEL_WITH_CUDA.
# A CUDA build runs on a machine without a GPU as a CPU build does: only to("cuda") fails there,
# naming the cause (src/core/cuda_runtime.cpp).
set(KAEL_WITH_CUDA OFF)
string(TOUPPER "${KAEL_CUDA}" KAEL_CUDA_MODE)
if(KAEL_CUDA_MODE STREQUAL "AUTO" AND (KAEL_SANITIZE OR KAEL_TSAN OR KAEL_FUZZ OR CMAKE_CROSSCOMPILING))
  # The sanitizers' runtimes do not instrument the CUDA runtime, and nvcc targets the host only.
  message(STATUS "kael: CUDA left out of a sanitizer, fuzz or cross build (KAEL_CUDA=ON to insist)")
  set(KAEL_CUDA_MODE OFF)
endif()
if(NOT KAEL_CUDA_MODE STREQUAL "AUTO" AND KAEL_CUDA AND (KAEL_SANITIZE OR KAEL_TSAN OR KAEL_FUZZ OR CMAKE_CROSSCOMPILING))
  message(FATAL_ERROR "KAEL_CUDA=ON cannot be combined with a sanitizer, fuzz or cross build")
endif()
if(KAEL_CUDA_MODE STREQUAL "AUTO" OR KAEL_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Machine code for the A100 (sm_80) and H100 (sm_90), and sm_90's PTX for newer GPUs.
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
    endif()
    enable_language(CUDA)
    # C++17 for the .cu files: CMake 3.25 knows no C++20 flag for nvcc (the headers they include
    # are written to C++17).
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(KAEL_WITH_CUDA ON)
  elseif(NOT KAEL_CUDA_MODE STREQUAL "AUTO")
    message(FATAL_ERROR "KAEL_CUDA=${KAEL_CUDA} but no CUDA toolkit was found (nvcc on PATH, CUDACXX, "
                        "or /usr/local/cuda); install one or configure with -DKAEL_CUDA=OFF")
  endif()
endif()
message(STATUS "kael: CUDA backend: ${KAEL_WITH_CUDA}")
