# The git revision is baked in at configure time and recorded in every HDF5 file's /meta.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
  OUTPUT_VARIABLE ITERTIME_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT ITERTIME_GIT_REVISION)
  set(ITERTIME_GIT_REVISION "unknown")
endif()
