# Cross-compiling for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu, against the arm64
# libraries installed through multiarch (dpkg --add-architecture arm64): see
# scripts/test_aarch64.sh. Tests run under qemu-aarch64, which ctest (and gtest's test
# discovery at build time) calls through CMAKE_CROSSCOMPILING_EMULATOR.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(KAEL_CROSS_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${KAEL_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${KAEL_CROSS_TRIPLE}-g++)

# Headers-only packages (nlohmann-json, CLI11, Boost.Beast) live under /usr and their CMake files
# under /usr/share; the arm64 libraries (gtest) under /usr/lib/aarch64-linux-gnu.
# Programs are the build machine's, everything else the target's.
set(CMAKE_FIND_ROOT_PATH /usr/${KAEL_CROSS_TRIPLE} /usr)
set(CMAKE_LIBRARY_ARCHITECTURE ${KAEL_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# The arm64 loader and libraries come from the multiarch packages (libc6:arm64 and
# libstdc++6:arm64, which scripts/test_aarch64.sh installs) under /lib/aarch64-linux-gnu, where
# qemu finds them through the host's /lib/ld-linux-aarch64.so.1. Not `-L /usr/aarch64-linux-gnu`:
# mixing that cross-compiler copy of glibc with the multiarch libraries hung every
# pthread_create under Debian 12's qemu 7.2.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
