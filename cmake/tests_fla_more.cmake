# Tests of RetNet and MesaNet (included by tests/CMakeLists.txt).
sb_add_gradtest(test_fla_more)  # K3 and the ridge: gradients, chunked vs step-by-step, CG vs
                                # exact, fla's chunk form; RecNets: mimic, gradients, streaming
sb_add_test(test_fla_more_float) # float build: kernels vs double, mimic, threads, counts, names
