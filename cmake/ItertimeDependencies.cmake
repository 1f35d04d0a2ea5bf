# Finds every dependency; all come from Debian 12 packages (see launcher/scripts/setup-debian.sh).
# Prediction needs only HDF5, Boost.Serialization, NLopt (the fits' solver) and the header libraries; MPI, and with it CUDA/NCCL
# and LibTorch, only the calibration parts (ITERTIME_HAVE_MPI; docs/build.md, "A prediction-only build").
find_package(HDF5 REQUIRED COMPONENTS C CXX)
find_package(Boost REQUIRED COMPONENTS serialization)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(NLopt REQUIRED)  # libnlopt-dev: common/regularized_fit's bounded minimizer

# HDF5 as an imported target (FindHDF5 of CMake 3.25 gives variables only for the C++ part).
add_library(itertime_hdf5 INTERFACE)
add_library(itertime::hdf5 ALIAS itertime_hdf5)
target_include_directories(itertime_hdf5 SYSTEM INTERFACE ${HDF5_INCLUDE_DIRS})
target_link_libraries(itertime_hdf5 INTERFACE ${HDF5_CXX_LIBRARIES} ${HDF5_LIBRARIES})
target_compile_definitions(itertime_hdf5 INTERFACE ${HDF5_DEFINITIONS})

# ---- MPI ---------------------------------------------------------------------------------------
# ON: required; AUTO: used when found; OFF: never. Without it: a prediction-only build.
set(ITERTIME_HAVE_MPI OFF)
if(ITERTIME_WITH_MPI STREQUAL "ON")
  find_package(MPI REQUIRED COMPONENTS C)
  set(ITERTIME_HAVE_MPI ON)
elseif(ITERTIME_WITH_MPI STREQUAL "AUTO")
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(ITERTIME_HAVE_MPI ON)
  else()
    message(STATUS "MPI not found: a prediction-only build (no calibrate, run or itertime-calibrate; docs/build.md)")
  endif()
elseif(NOT ITERTIME_WITH_MPI STREQUAL "OFF")
  message(FATAL_ERROR "ITERTIME_WITH_MPI=${ITERTIME_WITH_MPI}: use AUTO, ON or OFF")
endif()

# ---- CUDA and NCCL ---------------------------------------------------------------------------
# Only runtime/ uses them, so only with MPI.
set(ITERTIME_HAVE_CUDA OFF)
set(ITERTIME_HAVE_NCCL OFF)
if(ITERTIME_WITH_CUDA STREQUAL "ON" AND NOT ITERTIME_HAVE_MPI)
  message(FATAL_ERROR "ITERTIME_WITH_CUDA=ON needs MPI (the CUDA/NCCL parts are the runtime's communicators); "
                      "enable MPI or configure with -DITERTIME_WITH_CUDA=OFF")
endif()
if(ITERTIME_HAVE_MPI AND NOT ITERTIME_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib $ENV{NCCL_HOME}/lib)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    set(ITERTIME_HAVE_CUDA ON)
    set(ITERTIME_HAVE_NCCL ON)
    add_library(itertime_nccl INTERFACE)
    add_library(itertime::nccl ALIAS itertime_nccl)
    target_include_directories(itertime_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(itertime_nccl INTERFACE ${NCCL_LIBRARY} CUDA::cudart)
  elseif(ITERTIME_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ITERTIME_WITH_CUDA=ON but nvcc (${CMAKE_CUDA_COMPILER}), the CUDA toolkit or NCCL "
                        "(nccl.h: ${NCCL_INCLUDE_DIR}, libnccl: ${NCCL_LIBRARY}) was not found. "
                        "Set CMAKE_CUDA_COMPILER / NCCL_HOME, or configure with -DITERTIME_WITH_CUDA=OFF.")
  endif()
endif()

# ---- LibTorch --------------------------------------------------------------------------------
# Any LibTorch with a TorchConfig.cmake: Debian's libtorch-dev (CMake's default search finds it) or the
# one -DTorch_DIR=<folder holding TorchConfig.cmake> names (launcher/scripts/build.sh --torch sets it for
# a pip/conda PyTorch or an unpacked LibTorch archive; docs/build.md). TorchConfig.cmake puts
# TORCH_CXX_FLAGS (-D_GLIBCXX_USE_CXX11_ABI=0|1) on the `torch` target in ${TORCH_LIBRARIES} as
# INTERFACE_COMPILE_OPTIONS, so targets linking ${TORCH_LIBRARIES} compile with LibTorch's libstdc++ ABI.
# Only the C++11 ABI (=1) can work: the rest of itertime and the Debian C++ libraries it links (HDF5,
# Boost) use it and pass std::string across the calibrate boundary.
# Only calibrate/ uses it, so only with MPI: a prediction-only build never looks for it.
set(ITERTIME_HAVE_TORCH OFF)
if(ITERTIME_WITH_TORCH AND NOT ITERTIME_HAVE_MPI)
  message(STATUS "LibTorch not looked for: a prediction-only build (no MPI) has no calibrate/")
elseif(ITERTIME_WITH_TORCH)
  find_package(Torch REQUIRED)
  if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
    message(FATAL_ERROR "LibTorch ${Torch_VERSION} at ${Torch_DIR} is built with the pre-C++11 libstdc++ ABI "
                        "(TORCH_CXX_FLAGS: ${TORCH_CXX_FLAGS}); itertime and its Debian libraries use the C++11 ABI. "
                        "Use a C++11-ABI LibTorch: pip torch >= 2.7, or the cxx11-abi LibTorch archive.")
  endif()
  message(STATUS "LibTorch ${Torch_VERSION}: ${Torch_DIR} (TORCH_CXX_FLAGS: ${TORCH_CXX_FLAGS})")
  set(ITERTIME_HAVE_TORCH ON)
endif()
