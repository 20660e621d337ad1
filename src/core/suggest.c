/* suggest.c - edit distance and the closest-name search behind "did you mean". */
#include <string.h>

#include "core/suggest.h"

/* Names are flag, model and command names: short. Longer words are simply not compared. */
#define SUGGEST_MAX_LEN 64

int sb_edit_distance(const char *a, const char *b, int cap)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN)
        return cap + 1;
    /* one row of the dynamic-programming table at a time: row[j] = distance(a[:i], b[:j]) */
    int row[SUGGEST_MAX_LEN + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diagonal = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int above = row[j];
            int replace = diagonal + (a[i - 1] != b[j - 1]);
            int best = replace;
            if (above + 1 < best)
                best = above + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[lb] > cap ? cap + 1 : row[lb];
}

void sb_suggest_init(sb_suggest *s, const char *word)
{
    memset(s, 0, sizeof *s);
    s->word = word;
    s->closest_distance = SB_SUGGEST_MAX_DISTANCE + 1;
}

void sb_suggest_offer(sb_suggest *s, const char *name)
{
    if (strcmp(s->word, name) == 0)
        s->exact = 1;
    if (s->word[0] == '\0' || s->exact)
        return;
    int d = sb_edit_distance(s->word, name, SB_SUGGEST_MAX_DISTANCE);
    if (d < s->closest_distance) {
        s->closest = name;
        s->closest_distance = d;
        s->closest_ties = 1;
    } else if (d == s->closest_distance && d <= SB_SUGGEST_MAX_DISTANCE) {
        s->closest_ties++;
    }
    if (strncmp(name, s->word, strlen(s->word)) == 0) {
        s->prefixed = name;
        s->n_prefixed++;
    }
}

const char *sb_suggest_result(const sb_suggest *s)
{
    if (s->exact)
        return NULL;
    if (s->closest_distance <= SB_SUGGEST_MAX_DISTANCE && s->closest_ties == 1)
        return s->closest;
    if (s->n_prefixed == 1)
        return s->prefixed;
    return NULL;
}
