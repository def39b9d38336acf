# The optional CUDA backend: src/backend/cuda's libraries (qwenrt_backend_cuda), linked by qwenrt_backend.
#
# Machine code for Hopper (sm_90a: wgmma and friends) and Ampere (sm_80, which Ada also runs), plus
# compute_80 PTX so newer GPUs can compile it at load. The host code that calls it needs no nvcc:
# QWENRT_HAVE_CUDA tells it the backend is there.
set(QWENRT_HAVE_CUDA OFF)
if(NOT QWENRT_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(QWENRT_HAVE_CUDA ON)
  elseif(QWENRT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "QWENRT_CUDA=ON but no CUDA compiler (nvcc) was found; install the CUDA toolkit or use -DQWENRT_CUDA=OFF")
  endif()
endif()

if(QWENRT_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90a-real)
  endif()
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
  endif()
  enable_language(CUDA)
  # CMake 3.25 (Debian 12) knows nvcc's flags only up to C++17; nvcc 12+ takes C++20.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  find_package(CUDAToolkit REQUIRED)
  # The kernels, one library per folder (src/backend/cuda/CMakeLists.txt); the host code that
  # drives them (src/model/cuda: needs the CUDA headers, not nvcc) is part of qwenrt_model.
  add_subdirectory(${CMAKE_SOURCE_DIR}/src/backend/cuda ${CMAKE_BINARY_DIR}/src/backend/cuda)
  message(STATUS "qwenrt: CUDA backend ON (${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "qwenrt: CUDA backend OFF")
endif()
