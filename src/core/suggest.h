/* suggest.h - "did you mean": the known name closest to a mistyped one. Offer the known
 * names one by one (they come from arrays, tables or registries), then ask for the match:
 *
 *     sb_suggest s;
 *     sb_suggest_init(&s, word);
 *     for (...) sb_suggest_offer(&s, name);
 *     const char *hint = sb_suggest_result(&s);   // NULL: nothing close enough
 */
#ifndef SB_CORE_SUGGEST_H
#define SB_CORE_SUGGEST_H

/* Names further than this many single-character edits from the word are not suggested. */
#define SB_SUGGEST_MAX_DISTANCE 2

typedef struct {
    const char *word;
    const char *closest;  /* the nearest name offered so far (first one on a tie) */
    int closest_distance; /* its edit distance; above the maximum when none is near */
    int closest_ties;     /* how many offered names share that distance */
    const char *prefixed; /* a name the word is a prefix of */
    int n_prefixed;       /* how many such names were offered */
    int exact;            /* the word itself was offered: nothing to suggest */
} sb_suggest;

void sb_suggest_init(sb_suggest *s, const char *word);
void sb_suggest_offer(sb_suggest *s, const char *name);
/* The single nearest name within SB_SUGGEST_MAX_DISTANCE edits, else the only name that
 * starts with the word, else NULL (nothing near, an ambiguous tie, or the word is itself
 * one of the names offered). */
const char *sb_suggest_result(const sb_suggest *s);

/* Levenshtein distance between a and b, counted up to cap (returns cap + 1 beyond it). */
int sb_edit_distance(const char *a, const char *b, int cap);

#endif
