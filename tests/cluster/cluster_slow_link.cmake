# cluster_slow_link: a node with a slower link named by the node-pair report, on 3 emulated nodes (slow_link.sh).
itertime_cluster_test(cluster_slow_link 300
  ${CMAKE_CURRENT_SOURCE_DIR}/slow_link.sh $<TARGET_FILE:itertime> $<TARGET_FILE:itertime_link_delay>)
