/*
 * assemble.c - from a state sequence to what the model sees: gaps, distractor symbols,
 * one-hot frames with noise, targets (docs/task.md, "Samples").
 *
 * Per element k of a sample: its symbol frame, then g_k gap frames. Whether there is a
 * gap is drawn once per element at or after gap_start (u > gap_prob: none); its duration
 * is drawn from the training distribution and rounded to 0.1 s, or fixed for the test
 * set. Zero gaps last ceil(delay / 0.1) frames; non-grammatical gaps show
 * round(delay / 0.1) symbols the grammar forbids after the element's state. Every frame
 * of the element (symbol and gap) has the element's state id as its target and belongs
 * to the element's accuracy window.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/rng.h"
#include "task/task.h"

#define STREAM_TAG_GAPS 0x53424750u  /* "SBGP" */
#define STREAM_TAG_NOISE 0x53424e5au /* "SBNZ" */
#define STREAM_TAG_WALKS 0x5342574bu /* "SBWK" */

sb_status sb_sample_alloc(const sb_task *task, sb_sample *s, sb_error *err)
{
    memset(s, 0, sizeof *s);
    int e_max =
        task->n_elements[0] > task->n_elements[1] ? task->n_elements[0] : task->n_elements[1];
    s->state = sb_malloc((size_t)e_max * sizeof *s->state);
    s->gap = sb_malloc((size_t)e_max * sizeof *s->gap);
    s->frame_start = sb_malloc((size_t)e_max * sizeof *s->frame_start);
    s->capacity_gap_classes = task->cfg.grammar_gap ? 4 * e_max : 1;
    s->gap_class = sb_malloc((size_t)s->capacity_gap_classes);
    s->walk = sb_calloc((size_t)e_max, sizeof *s->walk);
    if (task->cfg.walk_len > 0)
        s->walk_state =
            sb_malloc((size_t)task->walk_stride * (size_t)e_max * sizeof *s->walk_state);
    if (!s->state || !s->gap || !s->frame_start || !s->gap_class || !s->walk ||
        (task->cfg.walk_len > 0 && !s->walk_state)) {
        sb_sample_free(s);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory allocating a sample");
    }
    return SB_OK;
}

void sb_sample_free(sb_sample *s)
{
    sb_free(s->state);
    sb_free(s->gap);
    sb_free(s->frame_start);
    sb_free(s->gap_class);
    sb_free(s->walk);
    sb_free(s->walk_state);
    memset(s, 0, sizeof *s);
}

/* A PCG64 stream private to (task seed, split, sample index, purpose). */
static void derived_stream(sb_pcg64 *rng, uint32_t tag, uint64_t seed, sb_split split, int64_t i)
{
    uint32_t entropy[6] = {tag,
                           (uint32_t)seed,
                           (uint32_t)(seed >> 32),
                           (uint32_t)split,
                           (uint32_t)(uint64_t)i,
                           (uint32_t)((uint64_t)i >> 32)};
    uint32_t words[8];
    sb_seedseq_generate(entropy, 6, words);
    sb_pcg64_seed_words(rng, words);
}

/* The random sources of one sample's gaps. */
typedef struct gap_source {
    sb_gap_rng mode;
    sb_pcg64 decide;   /* gap decisions; in derived mode also durations and symbols */
    sb_mt19937 legacy; /* reference mode: numpy's legacy global generator */
    int has_gauss;     /* cached second normal of the polar method (legacy_gauss) */
    double gauss;
} gap_source;

static double gap_uniform01(gap_source *src)
{
    if (src->mode == SB_GAP_RNG_REFERENCE)
        return sb_mt19937_res53(&src->legacy);
    return sb_pcg64_random(&src->decide);
}

/* Standard normal by the polar method with a cached second value, as numpy's legacy
 * RandomState.standard_normal does. */
static double gap_gauss(gap_source *src)
{
    if (src->has_gauss) {
        src->has_gauss = 0;
        return src->gauss;
    }
    double x1, x2, r2;
    do {
        x1 = 2.0 * gap_uniform01(src) - 1.0;
        x2 = 2.0 * gap_uniform01(src) - 1.0;
        r2 = x1 * x1 + x2 * x2;
    } while (r2 >= 1.0 || r2 == 0.0);
    double f = sqrt(-2.0 * log(r2) / r2);
    src->gauss = f * x1;
    src->has_gauss = 1;
    return f * x2;
}

/* Training gap duration in seconds, rounded to 0.1 s as numpy.round(x, 1) does. */
static double gap_draw_duration(const sb_task_config *cfg, gap_source *src)
{
    double x;
    if (cfg->dist_dur == SB_GAP_DIST_UNIFORM)
        x = cfg->train_gap_min + (cfg->train_gap_max - cfg->train_gap_min) * gap_uniform01(src);
    else
        x = exp(cfg->train_gap_min + cfg->train_gap_max * gap_gauss(src));
    double d = rint(x * 10.0) / 10.0;
    return d < SB_MAX_GAP_SECONDS ? d : SB_MAX_GAP_SECONDS;
}

/* Uniform choice among m >= 1 eligible classes. */
static uint32_t gap_draw_choice(gap_source *src, uint32_t m)
{
    if (src->mode == SB_GAP_RNG_REFERENCE)
        return sb_legacy_choice_index(&src->legacy, m);
    return sb_pcg64_bounded(&src->decide, m - 1);
}

static sb_status gap_source_init(const sb_task *task, sb_split split, int64_t i, uint64_t seq_idx,
                                 gap_source *src, sb_error *err)
{
    const sb_task_config *cfg = &task->cfg;
    uint64_t seed = cfg->grammar.seed;
    src->mode = cfg->gap_rng;
    src->has_gauss = 0;
    if (cfg->gap_rng == SB_GAP_RNG_DERIVED) {
        derived_stream(&src->decide, STREAM_TAG_GAPS, seed, split, i);
        return SB_OK;
    }
    /* The reference's dataset object owns default_rng(seed) and draws one uniform per
     * element from gap_start on, for the samples in request order 0, 1, 2, ... The
     * reference has no validation split: its samples continue the test's stream after the
     * last test sample, so that their gaps are not the test's again. */
    int elements = task->n_elements[split];
    uint64_t per_sample = elements > cfg->gap_start ? (uint64_t)(elements - cfg->gap_start) : 0;
    uint64_t position = (uint64_t)i;
    if (split == SB_SPLIT_VALID)
        position += (uint64_t)cfg->test_size;
    sb_pcg64_init(&src->decide, seed);
    sb_pcg64_advance(&src->decide, per_sample * position);
    sb_u128 legacy_seed = (sb_u128)seed * seq_idx;
    if (legacy_seed > 0xffffffffu)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--gap_rng reference needs seed * index < 2^32 (numpy's legacy "
                            "seed limit); sample %lld of seed %llu is beyond it: use the "
                            "default --gap_rng derived",
                            (long long)i, (unsigned long long)seed);
    sb_legacy_seed(&src->legacy, (uint32_t)legacy_seed);
    return SB_OK;
}

/* Gap decisions, durations and distractors of a sample whose states are already set. */
static sb_status sample_gaps(const sb_task *task, sb_split split, int64_t i, uint64_t seq_idx,
                             sb_sample *s, sb_error *err)
{
    const sb_task_config *cfg = &task->cfg;
    const sb_grammar *g = task->grammar;
    int n = task->n_elements[split];
    gap_source src;
    sb_status st = gap_source_init(task, split, i, seq_idx, &src, err);
    if (st != SB_OK)
        return st;

    double test_delay = sb_task_test_duration(task);
    int frame = 0, n_gap_classes = 0;
    for (int k = 0; k < n; k++) {
        double delay = 0.0;
        if (k >= cfg->gap_start) {
            double u = sb_pcg64_random(&src.decide);
            if (!(u > cfg->gap_prob))
                delay = split == SB_SPLIT_TRAIN ? gap_draw_duration(cfg, &src) : test_delay;
        }
        int gap;
        if (!cfg->grammar_gap) {
            gap = (int)ceil(delay / SB_TIMESTEP);
        } else {
            uint64_t eligible = g->forbidden_classes[s->state[k]];
            int m = __builtin_popcountll(eligible);
            int count = (int)rint(delay / SB_TIMESTEP);
            gap = m > 0 ? count : 0;
            if (n_gap_classes + gap > s->capacity_gap_classes) {
                int cap = 2 * (n_gap_classes + gap);
                uint8_t *grown = sb_realloc(s->gap_class, (size_t)cap);
                if (grown == NULL)
                    return sb_error_set(err, SB_ERR_NOMEM, "out of memory for gap symbols");
                s->gap_class = grown;
                s->capacity_gap_classes = cap;
            }
            for (int r = 0; r < gap; r++) {
                /* the v-th eligible class in ascending order */
                uint32_t v = gap_draw_choice(&src, (uint32_t)m);
                uint64_t bits = eligible;
                for (uint32_t skip = 0; skip < v; skip++)
                    bits &= bits - 1;
                s->gap_class[n_gap_classes++] = (uint8_t)__builtin_ctzll(bits);
            }
        }
        s->gap[k] = gap;
        s->frame_start[k] = frame;
        frame += 1 + gap;
    }
    s->n_elements = n;
    s->n_frames = frame;
    s->n_gap_classes = n_gap_classes;
    return SB_OK;
}

#define SAMPLE_GROUP 64 /* samples whose sequences are walked together */

/* Interleaved walks: each element's walk from the sample's own stream (uniform over the
 * split's K walks), then walk j's first n_j elements (the prefix of sequence
 * seq_idx * walk_stride + j, all K walked together) in the order the elements take them. */
static sb_status sample_walks(const sb_task *task, sb_split split, int64_t i, uint64_t seq_idx,
                              sb_sample *s, sb_error *err)
{
    const int E = task->n_elements[split], K = task->n_walks[split];
    sb_pcg64 rng;
    derived_stream(&rng, STREAM_TAG_WALKS, task->cfg.grammar.seed, split, i);
    int count[SB_MAX_WALKS] = {0}, longest = 1;
    for (int k = 0; k < E; k++) {
        int j = K > 1 ? (int)sb_pcg64_bounded(&rng, (uint32_t)(K - 1)) : 0;
        s->walk[k] = (uint8_t)j;
        if (++count[j] > longest)
            longest = count[j];
    }
    uint64_t idx[SB_MAX_WALKS];
    uint16_t *rows[SB_MAX_WALKS];
    for (int j = 0; j < K; j++) {
        idx[j] = seq_idx * (uint64_t)task->walk_stride + (uint64_t)j;
        rows[j] = s->walk_state + (size_t)j * (size_t)E;
    }
    sb_status st = sb_sampler_generate_prefix(&task->sampler[split], idx, K, rows, longest, err);
    if (st != SB_OK)
        return st;
    int taken[SB_MAX_WALKS] = {0};
    for (int k = 0; k < E; k++) {
        int j = s->walk[k];
        s->state[k] = rows[j][taken[j]++];
    }
    return SB_OK;
}

sb_status sb_task_sample_many(const sb_task *task, sb_split split, const int64_t *i, int n,
                              sb_sample *samples, sb_error *err)
{
    uint64_t seq_idx[SAMPLE_GROUP];
    uint16_t *rows[SAMPLE_GROUP];
    if (task->cfg.walk_len > 0) {
        for (int r = 0; r < n; r++) {
            uint64_t seq = sb_task_sequence_index(task, split, i[r]);
            sb_status st = sample_walks(task, split, i[r], seq, &samples[r], err);
            if (st == SB_OK)
                st = sample_gaps(task, split, i[r], seq, &samples[r], err);
            if (st != SB_OK)
                return st;
        }
        return SB_OK;
    }
    for (int first = 0; first < n; first += SAMPLE_GROUP) {
        int count = n - first < SAMPLE_GROUP ? n - first : SAMPLE_GROUP;
        for (int r = 0; r < count; r++) {
            seq_idx[r] = sb_task_sequence_index(task, split, i[first + r]);
            rows[r] = samples[first + r].state;
        }
        sb_status st = sb_sampler_generate_many(&task->sampler[split], seq_idx, count, rows, err);
        if (st != SB_OK)
            return st;
        for (int r = 0; r < count; r++) {
            st = sample_gaps(task, split, i[first + r], seq_idx[r], &samples[first + r], err);
            if (st != SB_OK)
                return st;
        }
    }
    return SB_OK;
}

sb_status sb_task_sample(const sb_task *task, sb_split split, int64_t i, sb_sample *s,
                         sb_error *err)
{
    return sb_task_sample_many(task, split, &i, 1, s, err);
}

void sb_task_sample_frames(const sb_task *task, sb_split split, int64_t i, const sb_sample *s,
                           float *data, int32_t *target)
{
    sb_task_sample_frames_range(task, split, i, s, 0, s->n_frames, data, target);
}

/* Adds the noise of frames [t0, t1) (all real frames) to data (frame t0 first). The noise
 * is one stream of two 24-bit uniforms per 64-bit draw over the sample's entries in frame
 * order; a range starts at its first entry's draw (pcg advance), so any split of the
 * frames into ranges adds the same floats. */
static void add_noise(const sb_task *task, sb_split split, int64_t i, int t0, int t1, float *data)
{
    const size_t V = (size_t)task->n_inputs;
    const size_t first = (size_t)t0 * V, last = (size_t)t1 * V;
    sb_pcg64 rng;
    derived_stream(&rng, STREAM_TAG_NOISE, task->cfg.grammar.seed, split, i);
    sb_pcg64_advance(&rng, (uint64_t)(first / 2));
    /* U[0, noise) on every entry, float32 as torch.rand_like(data) * noise */
    float amp = (float)task->cfg.train_noise;
    size_t e = first;
    if (e % 2 == 1 && e < last) {
        /* the range starts on the upper half of a draw */
        uint64_t bits = sb_pcg64_next64(&rng);
        data[0] += (float)((uint32_t)(bits >> 32) >> 8) * (1.0f / 16777216.0f) * amp;
        e++;
    }
    for (; e < last; e += 2) {
        uint64_t bits = sb_pcg64_next64(&rng);
        float u0 = (float)((uint32_t)bits >> 8) * (1.0f / 16777216.0f);
        float u1 = (float)((uint32_t)(bits >> 32) >> 8) * (1.0f / 16777216.0f);
        data[e - first] += u0 * amp;
        if (e + 1 < last)
            data[e + 1 - first] += u1 * amp;
    }
}

void sb_task_sample_frames_range(const sb_task *task, sb_split split, int64_t i, const sb_sample *s,
                                 int t0, int len, float *data, int32_t *target)
{
    const sb_grammar *g = task->grammar;
    const int V = task->n_inputs;
    const int t1 = t0 + len;
    memset(data, 0, (size_t)len * (size_t)V * sizeof *data);
    memset(target, 0, (size_t)len * sizeof *target);
    for (int k = 0; k < s->n_elements; k++) {
        /* element k covers its symbol frame and its gap frames: [start, end] */
        int start = s->frame_start[k], end = start + s->gap[k];
        if (end < t0)
            continue;
        if (start >= t1)
            break;
        int state = s->state[k];
        int32_t id = g->state_id[state];
        if (start >= t0) {
            data[(size_t)(start - t0) * (size_t)V + g->state_class[state]] = 1.0f;
            if (task->cfg.walk_len > 0) /* the walk's tag, after the letters */
                data[(size_t)(start - t0) * (size_t)V + g->n_classes + s->walk[k]] = 1.0f;
        }
        int from = start > t0 ? start : t0, to = end < t1 - 1 ? end : t1 - 1;
        for (int t = from; t <= to; t++)
            target[t - t0] = id;
        if (task->cfg.grammar_gap) {
            /* one distractor per gap frame, in frame order: element k's come after the
             * frame_start[k] - k gap frames of the elements before it */
            const uint8_t *cls = s->gap_class + (start - k);
            for (int t = from > start + 1 ? from : start + 1; t <= to; t++)
                data[(size_t)(t - t0) * (size_t)V + cls[t - start - 1]] = 1.0f;
        }
    }
    int real_end = t1 < s->n_frames ? t1 : s->n_frames;
    if (task->cfg.train_noise > 0.0 && real_end > t0)
        add_noise(task, split, i, t0, real_end, data);
}

/* FNV-1a over 64-bit words. */
static uint64_t hash_word(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull;
}

uint64_t sb_sample_hash(const sb_task *task, const sb_sample *s, uint64_t seq_idx)
{
    const sb_grammar *g = task->grammar;
    uint64_t h = 0xcbf29ce484222325ull;
    h = hash_word(h, seq_idx);
    h = hash_word(h, (uint64_t)s->n_elements);
    for (int k = 0; k < s->n_elements; k++) {
        int state = s->state[k];
        uint64_t w = (uint64_t)state | ((uint64_t)g->state_class[state] << 16) |
                     ((uint64_t)g->state_id[state] << 24) | ((uint64_t)(uint32_t)s->gap[k] << 40);
        h = hash_word(h, w);
    }
    for (int r = 0; r < s->n_gap_classes; r++)
        h = hash_word(h, s->gap_class[r]);
    if (task->cfg.walk_len > 0)
        for (int k = 0; k < s->n_elements; k++)
            h = hash_word(h, s->walk[k]);
    return h;
}
