/* claims_write.c - the verdicts as report.md's section and as JSON, and the ideal observer
 * of each run's task they are guarded with (claims.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/run_config.h"
#include "core/json_writer.h"
#include "exp/claims.h"
#include "exp/claims_stats.h"
#include "task/ceiling.h"

/* The window k its observer needs: the fewest last elements (k >= 1) whose observer comes
 * within 0.01 of the ideal observer; INFINITY when even the largest computed does not. */
static double needed_window(const sb_ceiling *ce)
{
    const int n_windows = ce->n_windows > 0 ? ce->n_windows : 7;
    for (int w = 0; w < n_windows; w++)
        if (sb_ceiling_window_k[w] >= 1 && ce->window_acc[w] >= ce->expected_acc - 0.01)
            return sb_ceiling_window_k[w];
    return (double)INFINITY;
}

sb_status sb_claims_tasks(sb_results *db, const sb_run_row *rows, size_t n, sb_claim_task *tasks,
                          sb_error *err)
{
    (void)err;
    for (size_t i = 0; i < n; i++) {
        tasks[i].ceiling = tasks[i].needed_window = (double)NAN;
        if (rows[i].r.status != SB_RUN_FINISHED || rows[i].config_json == NULL)
            continue;
        sb_run_config cfg;
        sb_error local = {0};
        sb_ceiling ce;
        if (sb_run_config_from_json(rows[i].config_json, &cfg, &local) != SB_OK ||
            sb_results_task_ceiling(db, &cfg.task, 0, &ce, NULL, &local) != SB_OK)
            continue; /* unknown: the verdicts say the scale was not checked */
        tasks[i].ceiling = isfinite(rows[i].r.ceiling) ? rows[i].r.ceiling : ce.expected_acc;
        tasks[i].needed_window = needed_window(&ce);
    }
    return SB_OK;
}

static const char *choice_text(sb_claim_choice c)
{
    return c == SB_CHOSE_ON_VALID  ? "settings chosen on validation"
           : c == SB_CHOSE_ON_TEST ? "settings chosen ON TEST (runs without a validation split)"
                                   : "one setting each";
}

void sb_claims_write_markdown(FILE *f, const sb_claim *c, int n)
{
    int tested = 0;
    for (int i = 0; i < n; i++)
        tested += isfinite(c[i].p_holm);
    fprintf(f,
            "\n## The paper's findings\n\n"
            "Each verdict is one finding on one slice of the database's finished runs (every "
            "stored key equal but the model, the seed, the learning rate and the warm-up; "
            "docs/claims.md). Models are compared in pairs that differ on the finding's axis "
            "alone, at the same seed; the pairs of a seed are averaged, and the interval is "
            "Student's t over the seeds (n). Settings are chosen on the validation split. "
            "*holds*: the p-value of no benefit, Holm-corrected across the %d tested verdicts "
            "here, is under %.2f; *contradicted*: the Bonferroni-corrected interval excludes "
            "a benefit of +%.2f; *not shown*: anything else, with why. Each gives the "
            "smallest effect its design detects at %.0f%% power.\n\n",
            tested, SB_ALPHA, SB_CLAIM_DELTA, 100 * SB_POWER);
    for (int i = 0; i < n; i++) {
        fprintf(f, "- %s%s%s%s, %s%s: %s", c[i].id, c[i].slice[0] != '\0' ? " [" : "", c[i].slice,
                c[i].slice[0] != '\0' ? "]" : "", sb_verdict_name(c[i].verdict),
                c[i].exploratory ? " (exploratory)" : "", c[i].reason);
        if (c[i].pairs[0] != '\0')
            fprintf(f, "; %s %s; %s", strstr(c[i].pairs, " vs ") != NULL ? "models" : "pairs",
                    c[i].pairs, choice_text(c[i].chosen));
        fprintf(f, ". Not tested: %s.\n", c[i].untested);
    }
}

void sb_claims_write_json(FILE *f, const sb_claim *c, int n)
{
    sb_json j;
    sb_json_init(&j, f, 1);
    sb_json_array_begin(&j);
    for (int i = 0; i < n; i++) {
        const sb_claim *cl = &c[i];
        sb_json_object_begin(&j);
        sb_json_key(&j, "id");
        sb_json_string(&j, cl->id);
        sb_json_key(&j, "finding");
        sb_json_string(&j, cl->finding);
        sb_json_key(&j, "statistic");
        sb_json_string(&j, cl->statistic);
        sb_json_key(&j, "slice");
        sb_json_string(&j, cl->slice);
        sb_json_key(&j, "pairs");
        sb_json_string(&j, cl->pairs);
        sb_json_key(&j, "chosen_on");
        sb_json_string(&j, cl->chosen == SB_CHOSE_ON_VALID  ? "valid"
                           : cl->chosen == SB_CHOSE_ON_TEST ? "test"
                                                            : "nothing");
        sb_json_key(&j, "exploratory");
        sb_json_bool(&j, cl->exploratory);
        sb_json_key(&j, "equivalence");
        sb_json_bool(&j, cl->equivalence);
        sb_json_key(&j, "seeds");
        sb_json_int(&j, cl->n);
        const char *keys[] = {"estimate", "sd",         "lo",    "hi",    "p",
                              "p_holm",   "detectable", "scale", "window"};
        const double vals[] = {cl->estimate, cl->sd,         cl->lo,    cl->hi,    cl->p,
                               cl->p_holm,   cl->detectable, cl->scale, cl->window};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
            sb_json_key(&j, keys[k]);
            if (isfinite(vals[k]))
                sb_json_double(&j, vals[k]);
            else
                sb_json_null(&j);
        }
        sb_json_key(&j, "seeds_needed");
        if (cl->seeds_needed != 0)
            sb_json_int(&j, cl->seeds_needed);
        else
            sb_json_null(&j);
        sb_json_key(&j, "verdict");
        sb_json_string(&j, sb_verdict_name(cl->verdict));
        sb_json_key(&j, "reason");
        sb_json_string(&j, cl->reason);
        sb_json_key(&j, "not_tested");
        sb_json_string(&j, cl->untested);
        sb_json_object_end(&j);
    }
    sb_json_array_end(&j);
    fputc('\n', f);
}
