# The state-space family (spec/models-ssm.md sections 5 and 6): Mamba's selective scan,
# Mamba2's chunked SSD and gated RMSNorm and the column split (the two layers are globbed from
# src/nn/layers/). Included by the top-level CMakeLists.txt before the libraries are defined.
list(APPEND SB_NN_SOURCES
    src/nn/ops/split.c
    src/nn/ops/ssm_conv.c
    src/nn/ops/selective_scan.c
    src/nn/ops/ssd.c
    src/nn/ops/ssm_norm.c
)
