# The reference's *_layered models (spec/models-fla-stacks.md): the LM stack (a second wrapper
# beside RecNet), its two new ops (kernel K4 forgetting attention, fla's GatedMLP), the FoX
# mixer and the four registrations. The GLA, DeltaNet and Gated DeltaNet mixers are the
# RecNet layers' code (models_fla.cmake). Included by the top-level CMakeLists.txt.
list(APPEND SB_NN_SOURCES
    src/nn/lm_stack.c
    src/nn/ops/forgetting_attn.c
    src/nn/ops/gated_mlp.c
    src/nn/layers/fox.c
    src/nn/layers/layered.c
)
