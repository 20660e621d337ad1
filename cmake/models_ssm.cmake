# The state-space family (spec/models-ssm.md sections 5 and 6): Mamba's selective scan,
# Mamba2's chunked SSD and gated RMSNorm, the column split, and the two layers. Included by
# the top-level CMakeLists.txt before the libraries are defined.
list(APPEND SB_NN_SOURCES
    src/nn/ops/split.c
    src/nn/ops/ssm_conv.c
    src/nn/ops/selective_scan.c
    src/nn/ops/ssd.c
    src/nn/ops/ssm_norm.c
    src/nn/layers/mamba.c
    src/nn/layers/mamba2.c
)
