# More flash-linear-attention layers (spec/models-fla.md sections 11, 12): RetNet
# (MultiScaleRetention, on kernel K1 of linear_attn.c) and MesaNet (kernel K3, mesa.c); the
# layer files are globbed from src/nn/layers/.
# Included by the top-level CMakeLists.txt before the libraries are defined.
list(APPEND SB_NN_SOURCES
    src/nn/ops/mesa.c
)
