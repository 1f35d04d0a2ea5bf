# cluster_teardown: the emulated cluster leaves nothing behind on success, failure or SIGKILL (teardown.sh).
itertime_cluster_test(cluster_teardown 120 ${CMAKE_CURRENT_SOURCE_DIR}/teardown.sh $<TARGET_FILE:itertime_link_delay>)
