/* fla_mixer.h - the fla token mixers as functions of their configuration, so that both
 * wrappers can build them: RecNet with the benchmark's constructor arguments
 * (docs/models/fla_layers.md; gla.c, delta_net.c, gated_delta_net.c register those layer types)
 * and the LM stack with the defaults of the fla model configs (docs/models/layered.md;
 * layered.c registers the *_layered types). Internal to src/layers/.
 *
 * Every function takes the mixer's parameters as sb_model_param(m, l, k), k in registration
 * order, like a layer type's forward. state == NULL: whole sequences (recorded when the graph
 * records); state != NULL: streaming evaluation (per sample *_stream_floats reals, laid out
 * field by field over the batch as the layer files describe). */
#ifndef SELECTIVBENCH_FLA_MIXER_H
#define SELECTIVBENCH_FLA_MIXER_H

#include <stddef.h>

#include "layers/layer.h"

typedef struct sb_fla_mixer {
    int H;           /* heads */
    int K, V;        /* key and value width per head (FoX: K = V = head width) */
    int short_conv;  /* SiLU short convolutions (size 4) on q, k and v */
    double norm_eps; /* eps of the output (gated) RMSNorm */
} sb_fla_mixer;

/* gla.c: GatedLinearAttention (low-rank key-channel gate, gated RMSNorm output) */
int sb_gla_mixer_params(sb_params *ps, const char *prefix, int D, const sb_fla_mixer *mx);
sb_tensor *sb_gla_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state,
                        const sb_fla_mixer *mx);
size_t sb_gla_mixer_stream_floats(const sb_fla_mixer *mx);
double sb_gla_mixer_flops(int D, const sb_fla_mixer *mx, int T);

/* delta_net.c: DeltaNet (L2-normalised q, k; beta; plain RMSNorm output) */
int sb_delta_net_mixer_params(sb_params *ps, const char *prefix, int D, const sb_fla_mixer *mx);
sb_tensor *sb_delta_net_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state,
                              const sb_fla_mixer *mx);
size_t sb_delta_net_mixer_stream_floats(const sb_fla_mixer *mx);
double sb_delta_net_mixer_flops(int D, const sb_fla_mixer *mx, int T);

/* gated_delta_net.c: Gated DeltaNet (decay per head, gated RMSNorm output) */
int sb_gdn_mixer_params(sb_params *ps, const char *prefix, int D, const sb_fla_mixer *mx);
sb_tensor *sb_gdn_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state,
                        const sb_fla_mixer *mx);
size_t sb_gdn_mixer_stream_floats(const sb_fla_mixer *mx);
double sb_gdn_mixer_flops(int D, const sb_fla_mixer *mx, int T);

/* fox.c: ForgettingAttention (softmax attention with a forget gate; no recurrent form) */
int sb_fox_mixer_params(sb_params *ps, const char *prefix, int D, const sb_fla_mixer *mx);
sb_tensor *sb_fox_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                        const sb_fla_mixer *mx);
double sb_fox_mixer_flops(int D, const sb_fla_mixer *mx, int T);

/* probe (docs/probe.md): each mixer's input-dependent gates recomputed from its input x, as
 * sb_layer_type.probe_gates returns them ([B, T, n_kinds * H], desc filled):
 *   GLA: alpha = exp(gk) averaged over the K key channels of each head;
 *   DeltaNet: beta; Gated DeltaNet: the decay exp(g) and beta; FoX: the forget gate exp(f). */
sb_tensor *sb_gla_mixer_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                              const sb_fla_mixer *mx, sb_gate_desc *desc);
sb_tensor *sb_delta_net_mixer_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                    const sb_fla_mixer *mx, sb_gate_desc *desc);
sb_tensor *sb_gdn_mixer_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                              const sb_fla_mixer *mx, sb_gate_desc *desc);
sb_tensor *sb_fox_mixer_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                              const sb_fla_mixer *mx, sb_gate_desc *desc);

/* probe: where the recurrent state lies in one sample's stream state of the GLA, DeltaNet and
 * Gated DeltaNet mixers: after the q, k (H K) and v (H V) conv histories (when the mixer has
 * them), H K V reals. */
static inline void sb_fla_mixer_stream_recurrent(const sb_fla_mixer *mx, size_t *history,
                                                 size_t *count)
{
    const size_t H = (size_t)mx->H, K = (size_t)mx->K, V = (size_t)mx->V;
    *history = mx->short_conv ? 3 * H * (2 * K + V) : 0; /* conv size 4: 3 frames kept */
    *count = H * K * V;
}

#endif
