# Tests of the *_layered models and the LM stack (included by tests/CMakeLists.txt).
sb_add_gradtest(test_layered)  # K4, GatedMLP, stacked models' gradients, counts, mimic, init
sb_add_test(test_layered_float) # float build: init and logits vs torch, K4 in float, threads
