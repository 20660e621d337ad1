/*
 * rng_pcg64.c - numpy's SeedSequence, PCG64 and the Generator methods the reference uses.
 *
 * Every function here reproduces numpy (>= 1.17) bit for bit (docs/task.md,
 * "Grammar", names the streams); tests/unit/test_rng.c checks them against vectors recorded
 * from numpy.
 */
#include "core/rng.h"
#include "core/status.h"

/* ---- SeedSequence ---------------------------------------------------------------- */

#define SEEDSEQ_INIT_A 0x43b0d7e5u
#define SEEDSEQ_MULT_A 0x931e8875u
#define SEEDSEQ_INIT_B 0x8b51f9ddu
#define SEEDSEQ_MULT_B 0x58f38dedu
#define SEEDSEQ_MIX_MULT_L 0xca01f9ddu
#define SEEDSEQ_MIX_MULT_R 0x4973f715u
#define SEEDSEQ_POOL 4

/* hashmix with the running multiplier kept by the caller (it persists between calls). */
static uint32_t seedseq_hashmix(uint32_t value, uint32_t *hash_const)
{
    value ^= *hash_const;
    *hash_const *= SEEDSEQ_MULT_A;
    value *= *hash_const;
    value ^= value >> 16;
    return value;
}

static uint32_t seedseq_mix(uint32_t x, uint32_t y)
{
    uint32_t r = SEEDSEQ_MIX_MULT_L * x - SEEDSEQ_MIX_MULT_R * y;
    r ^= r >> 16;
    return r;
}

void sb_seedseq_generate(const uint32_t *entropy, size_t n_words, uint32_t out[8])
{
    uint32_t pool[SEEDSEQ_POOL];
    uint32_t hash_const = SEEDSEQ_INIT_A;
    for (size_t i = 0; i < SEEDSEQ_POOL; i++)
        pool[i] = seedseq_hashmix(i < n_words ? entropy[i] : 0u, &hash_const);
    for (size_t src = 0; src < SEEDSEQ_POOL; src++)
        for (size_t dst = 0; dst < SEEDSEQ_POOL; dst++)
            if (src != dst)
                pool[dst] = seedseq_mix(pool[dst], seedseq_hashmix(pool[src], &hash_const));
    for (size_t src = SEEDSEQ_POOL; src < n_words; src++)
        for (size_t dst = 0; dst < SEEDSEQ_POOL; dst++)
            pool[dst] = seedseq_mix(pool[dst], seedseq_hashmix(entropy[src], &hash_const));

    uint32_t h = SEEDSEQ_INIT_B;
    for (size_t i = 0; i < 8; i++) {
        uint32_t v = pool[i % SEEDSEQ_POOL];
        v ^= h;
        h *= SEEDSEQ_MULT_B;
        v *= h;
        v ^= v >> 16;
        out[i] = v;
    }
}

void sb_seedseq_generate_u64(uint64_t entropy, uint32_t out[8])
{
    uint32_t words[2] = {(uint32_t)entropy, (uint32_t)(entropy >> 32)};
    sb_seedseq_generate(words, words[1] != 0 ? 2 : 1, out);
}

/* ---- PCG64 (XSL-RR 128/64) --------------------------------------------------------- */

static inline sb_u128 pcg64_mult(void)
{
    return ((sb_u128)SB_PCG64_MULT_HI << 64) | SB_PCG64_MULT_LO;
}

static inline void pcg64_step(sb_pcg64 *rng)
{
    rng->state = rng->state * pcg64_mult() + rng->inc;
}

void sb_pcg64_seed_words(sb_pcg64 *rng, const uint32_t words[8])
{
    uint64_t q[4];
    for (int k = 0; k < 4; k++)
        q[k] = (uint64_t)words[2 * k] | ((uint64_t)words[2 * k + 1] << 32);
    sb_u128 initstate = ((sb_u128)q[0] << 64) | q[1];
    sb_u128 initseq = ((sb_u128)q[2] << 64) | q[3];
    rng->inc = (initseq << 1) | 1u;
    rng->state = 0;
    pcg64_step(rng);
    rng->state += initstate;
    pcg64_step(rng);
    rng->has32 = 0;
    rng->buf32 = 0;
}

void sb_pcg64_init(sb_pcg64 *rng, uint64_t seed)
{
    uint32_t words[8];
    sb_seedseq_generate_u64(seed, words);
    sb_pcg64_seed_words(rng, words);
}

void sb_pcg64_advance(sb_pcg64 *rng, uint64_t delta)
{
    /* Brown's algorithm: compose the affine map x -> a x + c with itself. */
    sb_u128 cur_mult = pcg64_mult(), cur_plus = rng->inc;
    sb_u128 acc_mult = 1, acc_plus = 0;
    while (delta > 0) {
        if (delta & 1u) {
            acc_mult *= cur_mult;
            acc_plus = acc_plus * cur_mult + cur_plus;
        }
        cur_plus = (cur_mult + 1) * cur_plus;
        cur_mult *= cur_mult;
        delta >>= 1;
    }
    rng->state = acc_mult * rng->state + acc_plus;
}

uint32_t sb_pcg64_interval(sb_pcg64 *rng, uint32_t max)
{
    if (max == 0)
        return 0;
    uint32_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t v;
    while ((v = (sb_pcg64_next32(rng) & mask)) > max) {
    }
    return v;
}

void sb_pcg64_permutation(sb_pcg64 *rng, int n, int *out)
{
    for (int i = 0; i < n; i++)
        out[i] = i;
    for (int i = n - 1; i >= 1; i--) {
        int j = (int)sb_pcg64_interval(rng, (uint32_t)i);
        int tmp = out[i];
        out[i] = out[j];
        out[j] = tmp;
    }
}

void sb_pcg64_choice_noreplace(sb_pcg64 *rng, int pop, int k, int *out)
{
    SB_ASSERT(k >= 0 && k <= pop);
    /* Floyd's algorithm; membership by linear search (k is tiny in every use). */
    for (int i = 0; i < k; i++) {
        int j = pop - k + i;
        int v = (int)sb_pcg64_bounded(rng, (uint32_t)j);
        for (int s = 0; s < i; s++) {
            if (out[s] == v) {
                v = j;
                break;
            }
        }
        out[i] = v;
    }
    for (int i = k - 1; i >= 1; i--) {
        int j = (int)sb_pcg64_bounded(rng, (uint32_t)i);
        int tmp = out[i];
        out[i] = out[j];
        out[j] = tmp;
    }
}
