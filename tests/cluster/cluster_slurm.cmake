# cluster_slurm: itertime's multi-node Slurm batch scripts on 2 emulated nodes, with a real slurmctld and
# one slurmd per node, srun and mpirun across the nodes, a requeue included (slurm_nodes.sh; installs
# slurm-wlm and munge with apt-get when missing, as the one-node slurm_cluster test does).
itertime_cluster_test(cluster_slurm 600
  ${CMAKE_CURRENT_SOURCE_DIR}/slurm_nodes.sh $<TARGET_FILE:itertime> ${PROJECT_SOURCE_DIR}
  $<TARGET_FILE:itertime_slurm_h5check> $<TARGET_FILE:itertime_link_delay>)
