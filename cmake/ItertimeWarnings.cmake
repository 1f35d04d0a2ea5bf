# Warnings as an INTERFACE target: every itertime target links itertime::warnings privately; it carries
# itertime::sanitizers (cmake/ItertimeSanitizers.cmake, empty unless ITERTIME_SANITIZE is set).
add_library(itertime_warnings INTERFACE)
add_library(itertime::warnings ALIAS itertime_warnings)
target_compile_options(itertime_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Woverloaded-virtual -Wnull-dereference>)
if(ITERTIME_WARNINGS_AS_ERRORS)
  target_compile_options(itertime_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
target_link_libraries(itertime_warnings INTERFACE itertime_sanitizers)
