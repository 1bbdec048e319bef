# `symmoe bench <name>` with no usable GPU (the ctest sets CUDA_VISIBLE_DEVICES=-1) must refuse plainly: a non-zero
# exit and "bench needs a Hopper GPU" with the reason, before anything is allocated or written.
# usage: cmake -DCLI=<path of symmoe> -P bench_without_gpu.cmake
foreach(bench p2p ep gemm moe stream)
  execute_process(COMMAND ${CLI} bench ${bench} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "symmoe bench ${bench} without a GPU exited 0\n${out}${err}")
  endif()
  if(NOT err MATCHES "bench needs a Hopper GPU \\(sm_90\\): (no NVIDIA driver|no GPU visible|NVIDIA driver too old)")
    message(FATAL_ERROR "symmoe bench ${bench} without a GPU: unexpected message\n${out}${err}")
  endif()
endforeach()
# Its --help still works without a GPU.
execute_process(COMMAND ${CLI} bench --help RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "moe")
  message(FATAL_ERROR "symmoe bench --help failed (${rc})\n${out}")
endif()
message(STATUS "symmoe bench refuses without a GPU: ${err}")
