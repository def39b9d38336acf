# Precompiled headers: the standard, JSON and GoogleTest headers most files include, parsed once per
# target instead of once per file. Measured on a 2-core machine like CI's (clang, sanitizers): the library
# compiles in 40% less time, the tests in 46% less (gcc -O3: 5% and 17%). Only build speed: every file still includes what
# it uses (-DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON builds without them, to check that).
set(QWENRT_PCH_HEADERS <algorithm> <cmath> <cstring> <functional> <map> <memory> <sstream> <string> <vector>
    <nlohmann/json.hpp>)

# Library and CLI targets of more than a few files (small ones would spend more on the header than they save).
function(qwenrt_precompile_headers)
  foreach(target ${ARGN})
    target_precompile_headers(${target} PRIVATE ${QWENRT_PCH_HEADERS})
  endforeach()
endfunction()

# Test binaries: GoogleTest and what the tests include besides.
function(qwenrt_precompile_test_headers target)
  target_precompile_headers(${target} PRIVATE ${QWENRT_PCH_HEADERS} <gtest/gtest.h> <filesystem> <fstream> <random>
                            <thread>)
endfunction()
