# S4D tests: gradient checks, FFT vs recurrence vs direct sums, streaming and the torch
# reference (double); threads, parameter counts, init, optimiser groups and schedule (float).
sb_add_gradtest(test_s4_grad)
sb_add_test(test_s4)
