/*
 * rng_mt19937.c - MT19937 as CPython's `random` module and numpy's legacy RandomState
 * use it (docs/task.md).
 */
#include "core/alloc.h"
#include "core/rng.h"
#include "core/status.h"

#define MT_N 624
#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void sb_mt19937_init_genrand(sb_mt19937 *mt, uint32_t seed)
{
    mt->mt[0] = seed;
    for (int i = 1; i < MT_N; i++)
        mt->mt[i] = 1812433253u * (mt->mt[i - 1] ^ (mt->mt[i - 1] >> 30)) + (uint32_t)i;
    mt->mti = MT_N;
}

void sb_mt19937_init_by_array(sb_mt19937 *mt, const uint32_t *key, size_t key_len)
{
    uint32_t *s = mt->mt;
    sb_mt19937_init_genrand(mt, 19650218u);
    int i = 1;
    size_t j = 0;
    size_t k = key_len > MT_N ? key_len : MT_N;
    for (; k > 0; k--) {
        s[i] = (s[i] ^ ((s[i - 1] ^ (s[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++;
        j++;
        if (i >= MT_N) {
            s[0] = s[MT_N - 1];
            i = 1;
        }
        if (j >= key_len)
            j = 0;
    }
    for (k = MT_N - 1; k > 0; k--) {
        s[i] = (s[i] ^ ((s[i - 1] ^ (s[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= MT_N) {
            s[0] = s[MT_N - 1];
            i = 1;
        }
    }
    s[0] = 0x80000000u;
    mt->mti = MT_N;
}

static void mt19937_regenerate(sb_mt19937 *mt)
{
    uint32_t *s = mt->mt;
    for (int kk = 0; kk < MT_N; kk++) {
        uint32_t y = (s[kk] & MT_UPPER) | (s[(kk + 1) % MT_N] & MT_LOWER);
        s[kk] = s[(kk + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    }
    mt->mti = 0;
}

uint32_t sb_mt19937_next32(sb_mt19937 *mt)
{
    if (mt->mti >= MT_N)
        mt19937_regenerate(mt);
    uint32_t y = mt->mt[mt->mti++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

double sb_mt19937_res53(sb_mt19937 *mt)
{
    uint32_t a = sb_mt19937_next32(mt) >> 5;
    uint32_t b = sb_mt19937_next32(mt) >> 6;
    return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

/* ---- CPython random ------------------------------------------------------------- */

void sb_pyrandom_seed(sb_mt19937 *mt, uint64_t x)
{
    uint32_t key[2] = {(uint32_t)x, (uint32_t)(x >> 32)};
    sb_mt19937_init_by_array(mt, key, key[1] != 0 ? 2 : 1);
}

uint32_t sb_pyrandom_getrandbits(sb_mt19937 *mt, int k)
{
    SB_ASSERT(k >= 1 && k <= 32);
    return sb_mt19937_next32(mt) >> (32 - k);
}

uint32_t sb_pyrandom_randbelow(sb_mt19937 *mt, uint32_t n)
{
    SB_ASSERT(n >= 1);
    int k = 0; /* bit length of n */
    for (uint32_t v = n; v != 0; v >>= 1)
        k++;
    uint32_t r = sb_pyrandom_getrandbits(mt, k);
    while (r >= n)
        r = sb_pyrandom_getrandbits(mt, k);
    return r;
}

int sb_pyrandom_sample(sb_mt19937 *mt, int n, int k, int *out)
{
    SB_ASSERT(k >= 0 && k <= n);
    /* CPython chooses between a pool copy and a set of selected indices by size. */
    long setsize = 21;
    if (k > 5) {
        /* 4 ** ceil(log(3k) / log(4)), with the exponent computed by integer search: the
         * smallest e with 4^e >= 3k equals ceil(log_4(3k)) (exact for these small k). */
        long p = 1;
        while (p < 3L * k)
            p *= 4;
        setsize += p;
    }
    if ((long)n <= setsize) {
        /* pool strategy: a shrinking copy of range(n) */
        int local[64];
        int *tmp = n <= 64 ? local : NULL;
        if (tmp == NULL) {
            tmp = (int *)sb_malloc((size_t)n * sizeof *tmp);
            if (tmp == NULL)
                return -1;
        }
        for (int i = 0; i < n; i++)
            tmp[i] = i;
        for (int i = 0; i < k; i++) {
            int j = (int)sb_pyrandom_randbelow(mt, (uint32_t)(n - i));
            out[i] = tmp[j];
            tmp[j] = tmp[n - i - 1];
        }
        if (tmp != local)
            sb_free(tmp);
    } else {
        for (int i = 0; i < k; i++) {
            int j;
            int again;
            do {
                j = (int)sb_pyrandom_randbelow(mt, (uint32_t)n);
                again = 0;
                for (int s = 0; s < i; s++)
                    if (out[s] == j)
                        again = 1;
            } while (again);
            out[i] = j;
        }
    }
    return 0;
}

/* ---- numpy legacy RandomState ------------------------------------------------------- */

void sb_legacy_seed(sb_mt19937 *mt, uint32_t seed)
{
    sb_mt19937_init_genrand(mt, seed);
}

double sb_legacy_uniform(sb_mt19937 *mt, double low, double high)
{
    return low + (high - low) * sb_mt19937_res53(mt);
}

uint32_t sb_legacy_choice_index(sb_mt19937 *mt, uint32_t m)
{
    SB_ASSERT(m >= 1);
    uint32_t max = m - 1;
    if (max == 0)
        return 0;
    uint32_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t v;
    while ((v = (sb_mt19937_next32(mt) & mask)) > max) {
    }
    return v;
}
