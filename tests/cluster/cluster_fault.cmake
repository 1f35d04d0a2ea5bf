# cluster_fault: node1's link taken down in the middle of a `calibrate comm` across 2 emulated nodes:
# every rank ends within the watchdog's limit, the job within 25 s, nothing in the file is lost,
# and --resume completes the sweep once the link is back (link_fault.sh). About 35 s.
itertime_cluster_test(cluster_fault 240
  ${CMAKE_CURRENT_SOURCE_DIR}/link_fault.sh $<TARGET_FILE:itertime> $<TARGET_FILE:itertime_link_delay>
  $<TARGET_FILE:itertime_read_rows> $<TARGET_FILE:itertime_fault_rows>)
