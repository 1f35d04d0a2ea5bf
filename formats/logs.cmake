# formats/logs.cmake: the training-log readers of issue 34 part 2 (`itertime import`): Megatron-LM, NeMo 2
# and torchtitan logs into imported ground truth, as itertime::formats_logs. SHA-256 of each log from
# OpenSSL's libcrypto (Debian libssl-dev). Included after formats/CMakeLists.txt: where that file's
# library globs formats/*.cpp (it does), the readers are compiled there and itertime::formats_logs is that
# library with libcrypto; else they are a library of their own.
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
if(TARGET itertime_formats)
  target_link_libraries(itertime_formats PRIVATE OpenSSL::Crypto)
  add_library(itertime_formats_logs INTERFACE)
  target_link_libraries(itertime_formats_logs INTERFACE itertime_formats)
else()
  add_library(itertime_formats_logs STATIC
    ${CMAKE_CURRENT_LIST_DIR}/log_timings.cpp
    ${CMAKE_CURRENT_LIST_DIR}/megatron_log.cpp
    ${CMAKE_CURRENT_LIST_DIR}/nemo_log.cpp
    ${CMAKE_CURRENT_LIST_DIR}/torchtitan_log.cpp
    ${CMAKE_CURRENT_LIST_DIR}/log_import.cpp
  )
  target_link_libraries(itertime_formats_logs PUBLIC itertime::common itertime::predict PRIVATE OpenSSL::Crypto itertime::warnings)
endif()
add_library(itertime::formats_logs ALIAS itertime_formats_logs)
