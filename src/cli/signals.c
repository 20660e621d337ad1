/* signals.c - stopping `train` and `sweep` cleanly on SIGINT, SIGTERM and SIGUSR1 (see
 * signals.h). */
#include "cli/signals.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "selectivbench/selectivbench.h"

/* The signals received, counted atomically: a process-directed signal goes to any thread
 * (OpenMP's, OpenBLAS's), so two can be handled at once on two threads, and exactly one of
 * them must be the first. Lock-free atomics are async-signal-safe. */
static atomic_int signals_seen;
static volatile sig_atomic_t first_signal; /* 0 until the first SIGINT, SIGTERM or SIGUSR1 */
static pid_t sweep_parent;                 /* a sweep worker's sweep, else 0 */
static const char *first_note = "";        /* written at the first signal */
static size_t first_note_len;

int sb_cli_signal_exit_code(int sig)
{
    return sig == SIGINT ? SB_CLI_EXIT_SIGINT : SB_CLI_EXIT_TEMPFAIL;
}

/* Only async-signal-safe calls here: write, _exit. */
static void on_stop_signal(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (atomic_fetch_add(&signals_seen, 1) == 0) {
        first_signal = sig;
        if (first_note_len > 0 && write(STDERR_FILENO, first_note, first_note_len) < 0) {
            /* nowhere to report it */
        }
        return;
    }
    /* the sweep passing on what the terminal sent us already is not a second request */
    if (sweep_parent > 0 && info != NULL && info->si_code == SI_USER &&
        info->si_pid == sweep_parent)
        return;
    _exit(sb_cli_signal_exit_code(sig));
}

void sb_cli_signals_install(const char *note)
{
    first_note = note != NULL ? note : "";
    first_note_len = strlen(first_note);
    /* a sweep's worker: the sweep gives it its progress pipe (read before train's output
     * opens the pipe and clears the variable) */
    if (getenv("SELECTIVBENCH_PROGRESS_FD") != NULL)
        sweep_parent = getppid();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_stop_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART; /* stdio writes go on; poll() wakes regardless */
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGUSR1);
    /* SIGUSR1: Slurm's warning before a time limit (sbatch --signal=USR1@SECONDS) */
    int signals[3] = {SIGINT, SIGTERM, SIGUSR1};
    for (int i = 0; i < 3; i++) {
        /* a signal ignored when we started stays ignored, as the one who started us wants
         * (a shell without job control starts background commands ignoring SIGINT) */
        struct sigaction old;
        if (sigaction(signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(signals[i], &sa, NULL);
    }
}

int sb_cli_stop_signal(void)
{
    return first_signal;
}

int sb_cli_stop_requested(void *user)
{
    (void)user;
    return first_signal;
}
