# Sanitizers as an INTERFACE target (itertime::sanitizers), reached through itertime::warnings, which
# every itertime target links privately. ITERTIME_SANITIZE is a comma-separated -fsanitize= list, e.g.
# "address,undefined" (launcher/scripts/sanitize.sh, docs/build.md "Sanitizers"); empty (the default)
# adds nothing, so the default build is unchanged. Undefined behaviour aborts (no recovery), and frame
# pointers stay so that the sanitizers' stack traces are complete.
add_library(itertime_sanitizers INTERFACE)
add_library(itertime::sanitizers ALIAS itertime_sanitizers)
if(ITERTIME_SANITIZE)
  if(NOT ITERTIME_SANITIZE MATCHES "^[a-z,_-]+$")
    message(FATAL_ERROR "ITERTIME_SANITIZE=${ITERTIME_SANITIZE}: expected a comma-separated list such as address,undefined")
  endif()
  set(itertime_sanitize_flags -fsanitize=${ITERTIME_SANITIZE} -fno-omit-frame-pointer)
  if(ITERTIME_SANITIZE MATCHES "undefined")
    list(APPEND itertime_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  target_compile_options(itertime_sanitizers INTERFACE $<$<COMPILE_LANGUAGE:C,CXX>:${itertime_sanitize_flags}>)
  target_link_options(itertime_sanitizers INTERFACE ${itertime_sanitize_flags})
  message(STATUS "itertime: sanitizers ${ITERTIME_SANITIZE}")
endif()
