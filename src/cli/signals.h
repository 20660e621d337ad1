/* signals.h - SIGINT, SIGTERM and SIGUSR1 during `train` and `sweep` (src/cli/signals.c).
 * SIGUSR1 (what Slurm sends before a time limit with --signal=USR1@SECONDS) acts as SIGTERM.
 *
 * The first signal asks the work to stop at its next safe point: the handler only records
 * which signal came (and writes a note on stderr); the library polls sb_cli_stop_signal
 * through its should_stop / cancel callbacks, the run writes its checkpoint and is recorded
 * as interrupted, and the command exits with sb_cli_signal_exit_code. A second signal
 * exits at once (_exit with the same codes): the run's row is then left `running`, which
 * the next train or sweep takes over (its lock died with the process).
 *
 * A sweep's workers are this program run as `train`, in the sweep's process group: a
 * terminal's Ctrl-C reaches them and the sweep at once, and the sweep forwards what it got
 * to them too. So in a worker, a repeat of the signal sent by its sweep (the parent) does
 * not count as a second signal. */
#ifndef SELECTIVBENCH_CLI_SIGNALS_H
#define SELECTIVBENCH_CLI_SIGNALS_H

/* Exit codes after a stop: 130 after SIGINT (128 + 2, what shells report for Ctrl-C), 75
 * after SIGTERM or SIGUSR1 (EX_TEMPFAIL: batch schedulers requeue a job that exits with it).
 * `train` also exits 75 when another process is training the same run (try again later). */
#define SB_CLI_EXIT_SIGINT 130
#define SB_CLI_EXIT_TEMPFAIL 75

/* Installs the handlers of SIGINT, SIGTERM and SIGUSR1. note: the line written on stderr at the
 * first signal (a static string, e.g. what the second signal would do). */
void sb_cli_signals_install(const char *note);

/* The first signal received since install (SIGINT, SIGTERM or SIGUSR1), or 0. */
int sb_cli_stop_signal(void);

/* sb_cli_stop_signal as a callback (should_stop, cancel); user is ignored. */
int sb_cli_stop_requested(void *user);

/* The exit code of a command stopped by signal sig: SB_CLI_EXIT_SIGINT for SIGINT, else
 * SB_CLI_EXIT_TEMPFAIL. */
int sb_cli_signal_exit_code(int sig);

#endif
