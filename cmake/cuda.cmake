# The optional CUDA backend (src/backend/cuda/*.cu) inside qwenrt_lib.
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
  # Kernels (.cu) and the host code that drives them (.cpp: needs the CUDA headers, not nvcc).
  file(GLOB QWENRT_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu
       ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cpp ${CMAKE_SOURCE_DIR}/src/model/cuda/*.cpp)
  target_sources(qwenrt_lib PRIVATE ${QWENRT_CUDA_SOURCES})
  # The static runtime: the binaries run wherever a driver is, with no toolkit installed.
  # (qwenrt_lib exists already, so its properties are set here rather than inherited.)
  set_target_properties(qwenrt_lib PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}" CUDA_STANDARD 20
                        CUDA_RUNTIME_LIBRARY Static CUDA_SEPARABLE_COMPILATION OFF)
  target_compile_definitions(qwenrt_lib PUBLIC QWENRT_HAVE_CUDA)
  target_link_libraries(qwenrt_lib PUBLIC CUDA::cudart_static ${CMAKE_DL_LIBS})
  target_include_directories(qwenrt_lib PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_options(qwenrt_lib PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
  # A diagnostic build whose chained kernels record when each block waited and started
  # (src/backend/cuda/launch_trace.h; QWENRT_CUDA_LAUNCH_TRACE=file.csv at run time).
  option(QWENRT_CUDA_LAUNCH_TRACE "Build the CUDA kernels with the launch trace (diagnostics)" OFF)
  if(QWENRT_CUDA_LAUNCH_TRACE)
    target_compile_definitions(qwenrt_lib PRIVATE QWENRT_CUDA_LAUNCH_TRACE)
  endif()
  message(STATUS "qwenrt: CUDA backend ON (${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "qwenrt: CUDA backend OFF")
endif()
