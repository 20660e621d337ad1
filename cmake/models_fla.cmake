# The flash-linear-attention family (spec/models-fla.md): the two recurrence kernels, the
# shared blocks of GLA, DeltaNet, Gated DeltaNet and Gated DeltaProduct (the layer files
# themselves are globbed from src/nn/layers/).
# Included by the top-level CMakeLists.txt before the libraries are defined.
list(APPEND SB_NN_SOURCES
    src/nn/ops/linear_attn.c
    src/nn/ops/delta_rule.c
    src/nn/ops/fla_blocks.c
)
