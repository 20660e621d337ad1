# The flash-linear-attention family (spec/models-fla.md): the two recurrence kernels, the
# shared blocks and the layers GLA, DeltaNet, Gated DeltaNet and Gated DeltaProduct.
# Included by the top-level CMakeLists.txt before the libraries are defined.
list(APPEND SB_NN_SOURCES
    src/nn/ops/linear_attn.c
    src/nn/ops/delta_rule.c
    src/nn/ops/fla_blocks.c
    src/nn/layers/gla.c
    src/nn/layers/delta_net.c
    src/nn/layers/gated_delta_net.c
    src/nn/layers/gated_delta_product.c
)
