# Cross-builds for arm64 (aarch64) on a Debian machine of another architecture, with Debian's cross toolchain
# (crossbuild-essential-arm64) and the :arm64 multiarch -dev packages: scripts/build with HOIST_TARGET_ARCH=arm64
# uses it, and scripts/deps builds sdbus-c++ and libarchive with it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# find_library and find_package look in /usr/lib/aarch64-linux-gnu (and the architecture-independent /usr/lib/cmake,
# where the header-only packages keep their CMake files), never in the machine's own /usr/lib/x86_64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# glibc from libc6-dev:arm64 (the archive's current point and security release), not from the cross toolchain's
# libc6-dev-arm64-cross, which Debian rebuilds only with the toolchain: its libc.a and start files come first.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-B/usr/lib/aarch64-linux-gnu/ -L/usr/lib/aarch64-linux-gnu")
# ctest, catch_discover_tests and try_run run the target's programs under qemu-user (static binaries need no binfmt).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
# pkg-config reads the target's .pc files only (the deps prefix comes first through PKG_CONFIG_PATH).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
