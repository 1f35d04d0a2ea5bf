# cluster_nodes: the pipeline on 2 emulated nodes, ground truth on 4, and the 4-node prediction from the
# 2-node calibration beside it (nodes_e2e.sh).
itertime_cluster_test(cluster_nodes 900
  ${CMAKE_CURRENT_SOURCE_DIR}/nodes_e2e.sh $<TARGET_FILE:itertime> $<TARGET_FILE:itertime_link_delay> ${PROJECT_SOURCE_DIR})
