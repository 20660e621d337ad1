/*
 * rng.h - random number generators that reproduce the reference's streams bit for bit.
 *
 * The reference (Python) draws from three generators; all are reproduced here
 * (docs/task.md):
 *   1. numpy's default_rng(seed): SeedSequence -> PCG64, with the Generator methods the
 *      reference calls (integers, random, permutation, choice without replacement);
 *   2. CPython's `random` module: MT19937 seeded by init_by_array, with getrandbits,
 *      randbelow and sample;
 *   3. numpy's legacy global generator (RandomState): MT19937 seeded by init_genrand,
 *      with uniform and choice.
 * All functions are pure state updates: no globals, safe to use one generator per thread.
 */
#ifndef SELECTIVBENCH_RNG_H
#define SELECTIVBENCH_RNG_H

#include <stddef.h>
#include <stdint.h>

__extension__ typedef unsigned __int128 sb_u128;

/* ---- numpy SeedSequence (pool size 4) ------------------------------------------ */

/* The 8 32-bit words SeedSequence(entropy).generate_state(8, uint32) returns, where the
 * entropy is given as 32-bit words, least significant first (n_words >= 1). */
void sb_seedseq_generate(const uint32_t *entropy, size_t n_words, uint32_t out[8]);

/* Same for an integer entropy (numpy splits it into 32-bit words). */
void sb_seedseq_generate_u64(uint64_t entropy, uint32_t out[8]);

/* ---- numpy PCG64 bit generator and Generator methods --------------------------- */

typedef struct sb_pcg64 {
    sb_u128 state;
    sb_u128 inc;
    int has32;      /* a buffered upper half of the last 64-bit word is pending */
    uint32_t buf32; /* that upper half */
} sb_pcg64;

/* Seeds from 8 SeedSequence words (as numpy's PCG64(SeedSequence) does). */
void sb_pcg64_seed_words(sb_pcg64 *rng, const uint32_t words[8]);

/* numpy.random.default_rng(seed) for a non-negative integer seed < 2^64. */
void sb_pcg64_init(sb_pcg64 *rng, uint64_t seed);

/* Moves the stream forward by `delta` 64-bit outputs in O(log delta) (pcg advance).
 * The 32-bit buffer is left as it is. */
void sb_pcg64_advance(sb_pcg64 *rng, uint64_t delta);

/* The draws below are inline: they sit on the hot path of string generation. */

#define SB_PCG64_MULT_HI 2549297995355413924ull
#define SB_PCG64_MULT_LO 4865540595714422341ull

/* Next 64-bit output: one LCG step, then XSL-RR of the new state. */
static inline uint64_t sb_pcg64_next64(sb_pcg64 *rng)
{
    const sb_u128 mult = ((sb_u128)SB_PCG64_MULT_HI << 64) | SB_PCG64_MULT_LO;
    rng->state = rng->state * mult + rng->inc;
    uint64_t x = (uint64_t)(rng->state >> 64) ^ (uint64_t)rng->state;
    unsigned rot = (unsigned)(rng->state >> 122);
    return (x >> rot) | (x << ((64u - rot) & 63u));
}

/* Next 32-bit output: the low half of a fresh 64-bit word, whose high half is kept for
 * the following 32-bit draw (numpy shares this buffer between all Generator methods). */
static inline uint32_t sb_pcg64_next32(sb_pcg64 *rng)
{
    if (rng->has32) {
        rng->has32 = 0;
        return rng->buf32;
    }
    uint64_t v = sb_pcg64_next64(rng);
    rng->buf32 = (uint32_t)(v >> 32);
    rng->has32 = 1;
    return (uint32_t)v;
}

/* Generator.random(): 53-bit double in [0, 1). Does not touch the 32-bit buffer. */
static inline double sb_pcg64_random(sb_pcg64 *rng)
{
    return (double)(sb_pcg64_next64(rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, max] by Lemire's method on 32-bit draws (numpy's
 * random_bounded_uint64 unmasked); max < 2^32 - 1. max == 0 draws nothing.
 * Generator.integers(n) == sb_pcg64_bounded(rng, n - 1). */
static inline uint32_t sb_pcg64_bounded(sb_pcg64 *rng, uint32_t max)
{
    if (max == 0)
        return 0;
    uint32_t range = max + 1;
    uint64_t m = (uint64_t)sb_pcg64_next32(rng) * range;
    uint32_t low = (uint32_t)m;
    if (low < range) {
        uint32_t threshold = (0xffffffffu - max) % range;
        while (low < threshold) {
            m = (uint64_t)sb_pcg64_next32(rng) * range;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Uniform integer in [0, max] by masked rejection (numpy's random_interval), max < 2^32. */
uint32_t sb_pcg64_interval(sb_pcg64 *rng, uint32_t max);

/* Generator.permutation(n): out[0..n-1] (a Fisher-Yates pass from the top). */
void sb_pcg64_permutation(sb_pcg64 *rng, int n, int *out);

/* Generator.choice(pop, k, replace=False) without weights for pop <= 10000 or k small
 * (Floyd's algorithm, then a shuffle): out[0..k-1] indices in numpy's order.
 * Requires 0 <= k <= pop. */
void sb_pcg64_choice_noreplace(sb_pcg64 *rng, int pop, int k, int *out);

/* ---- MT19937 (CPython random and numpy's legacy RandomState) ------------------- */

typedef struct sb_mt19937 {
    uint32_t mt[624];
    int mti;
} sb_mt19937;

void sb_mt19937_init_genrand(sb_mt19937 *mt, uint32_t seed);
void sb_mt19937_init_by_array(sb_mt19937 *mt, const uint32_t *key, size_t key_len);
uint32_t sb_mt19937_next32(sb_mt19937 *mt);
/* 53-bit double in [0, 1) from two words (random.random(), RandomState.random_sample()). */
double sb_mt19937_res53(sb_mt19937 *mt);

/* CPython random.seed(x) for an integer x >= 0. */
void sb_pyrandom_seed(sb_mt19937 *mt, uint64_t x);
/* random.getrandbits(k) for 1 <= k <= 32. */
uint32_t sb_pyrandom_getrandbits(sb_mt19937 *mt, int k);
/* random._randbelow(n) for n >= 1. */
uint32_t sb_pyrandom_randbelow(sb_mt19937 *mt, uint32_t n);
/* random.sample(range(n), k): out[0..k-1], in selection order. 0 <= k <= n <= 2^31.
 * Returns 0, or -1 when its scratch (n ints, for 64 < n <= 21 + 4^ceil(log4(3k))) could
 * not be allocated (nothing drawn then). */
int sb_pyrandom_sample(sb_mt19937 *mt, int n, int k, int *out);

/* numpy.random.seed(s) for the legacy global generator (s < 2^32). */
void sb_legacy_seed(sb_mt19937 *mt, uint32_t seed);
/* numpy.random.uniform(low, high). */
double sb_legacy_uniform(sb_mt19937 *mt, double low, double high);
/* Index drawn by numpy.random.choice(a) for len(a) == m >= 1 (masked rejection). */
uint32_t sb_legacy_choice_index(sb_mt19937 *mt, uint32_t m);

#endif
