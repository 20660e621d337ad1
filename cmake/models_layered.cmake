# The reference's *_layered models (spec/models-fla-stacks.md): the LM stack (a second wrapper
# beside RecNet) and its two new ops (kernel K4 forgetting attention, fla's GatedMLP). The FoX
# mixer and the four registrations are layer files (fox.c, layered.c), globbed from
# src/nn/layers/; the GLA, DeltaNet and Gated DeltaNet mixers are the RecNet layers' code.
# Included by the top-level CMakeLists.txt.
list(APPEND SB_NN_SOURCES
    src/nn/lm_stack.c
    src/nn/ops/forgetting_attn.c
    src/nn/ops/gated_mlp.c
)
