sb_add_gradtest(test_ssm_grad)
sb_add_test(test_ssm)
