# Tests of the flash-linear-attention family (included by tests/CMakeLists.txt).
sb_add_gradtest(test_fla_ops)     # ops and kernels: gradients, chunked vs step-by-step, threads
sb_add_gradtest(test_fla_layers)  # layers in RecNet: reference mimic, gradients, streaming
sb_add_test(test_fla_float)       # float build: kernels vs double recurrences, threads, counts
