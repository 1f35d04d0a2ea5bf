# The Python module `import itertime` (python/, docs/python.md): ITERTIME_WITH_PYTHON=AUTO|ON|OFF.
# AUTO builds it when pybind11 (Debian: pybind11-dev) and Python 3's development files (python3-dev) are
# found; ON requires them; OFF never looks. Sets ITERTIME_HAVE_PYTHON.
# Invariants:
#  - The interpreter is Debian's /usr/bin/python3 unless Python3_EXECUTABLE is given: its headers are the
#    ones python3-dev installs, and a pyenv or venv python3 earlier on PATH would be found otherwise.
#  - With the module, every library is compiled position-independent (CMAKE_POSITION_INDEPENDENT_CODE):
#    the static libraries are linked into a shared object. Included before the first library is defined.
#  - AUTO leaves it out of a sanitizer build (ITERTIME_SANITIZE): python3 cannot load a sanitized module.
#  - Only what both Debian 12 (pybind11 2.10, Python 3.11) and Debian 13 (pybind11 2.13, Python 3.13) have.
set(ITERTIME_WITH_PYTHON "AUTO" CACHE STRING "Build the Python module (python/): AUTO (when pybind11 and Python 3 development files are found), ON or OFF")
set_property(CACHE ITERTIME_WITH_PYTHON PROPERTY STRINGS AUTO ON OFF)

set(ITERTIME_HAVE_PYTHON OFF)
if(ITERTIME_WITH_PYTHON STREQUAL "AUTO" AND ITERTIME_SANITIZE)
  # A sanitized extension loads only into an interpreter started with the sanitizer's runtime preloaded.
  message(STATUS "ITERTIME_SANITIZE=${ITERTIME_SANITIZE}: no Python module (ITERTIME_WITH_PYTHON=ON builds it anyway)")
elseif(ITERTIME_WITH_PYTHON STREQUAL "ON" OR ITERTIME_WITH_PYTHON STREQUAL "AUTO")
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python 3 interpreter the module is built for")
  endif()
  if(ITERTIME_WITH_PYTHON STREQUAL "ON")
    find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
    find_package(pybind11 CONFIG REQUIRED)
    set(ITERTIME_HAVE_PYTHON ON)
  else()
    find_package(Python3 COMPONENTS Interpreter Development.Module)
    if(Python3_FOUND)
      find_package(pybind11 CONFIG QUIET)
    endif()
    if(Python3_FOUND AND pybind11_FOUND)
      set(ITERTIME_HAVE_PYTHON ON)
    else()
      message(STATUS "pybind11 or Python 3 development files not found: no Python module (apt-get install pybind11-dev python3-dev; docs/python.md)")
    endif()
  endif()
elseif(NOT ITERTIME_WITH_PYTHON STREQUAL "OFF")
  message(FATAL_ERROR "ITERTIME_WITH_PYTHON=${ITERTIME_WITH_PYTHON}: use AUTO, ON or OFF")
endif()
if(ITERTIME_HAVE_PYTHON)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
endif()
