# cluster_links: the shaped links measured by `itertime calibrate comm` across 2 emulated nodes (links.sh).
itertime_cluster_test(cluster_links 300
  ${CMAKE_CURRENT_SOURCE_DIR}/links.sh $<TARGET_FILE:itertime> $<TARGET_FILE:itertime_link_delay>)
