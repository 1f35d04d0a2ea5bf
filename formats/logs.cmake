# formats/logs.cmake: the training-log readers of issue 34 part 2 (`itertime import`): Megatron-LM, NeMo 2
# and torchtitan logs into imported ground truth. A library of its own (itertime::formats_logs) beside
# formats/CMakeLists.txt's readers; SHA-256 of each log from OpenSSL's libcrypto (Debian libssl-dev).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
add_library(itertime_formats_logs STATIC
  ${CMAKE_CURRENT_LIST_DIR}/log_timings.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_log.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nemo_log.cpp
  ${CMAKE_CURRENT_LIST_DIR}/torchtitan_log.cpp
  ${CMAKE_CURRENT_LIST_DIR}/log_import.cpp
)
add_library(itertime::formats_logs ALIAS itertime_formats_logs)
target_link_libraries(itertime_formats_logs PUBLIC itertime::common itertime::predict PRIVATE OpenSSL::Crypto itertime::warnings)
# user_run_from_megatron (formats/megatron_arguments.hpp) is defined by formats/CMakeLists.txt's library.
if(TARGET itertime_formats)
  target_link_libraries(itertime_formats_logs PUBLIC itertime_formats)
endif()
