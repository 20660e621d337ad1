/*
 * main.c - the selectivbench command line: dispatches to one subcommand per file.
 *
 * Only the CLI prints and exits; every subcommand turns library errors into one line on
 * stderr and an exit code: 0 ok, 1 runtime failure, 2 usage, 3 numerical divergence; `train`
 * and `sweep` stopped by a signal exit 130 (SIGINT) or 75 (SIGTERM), and `train` exits 75
 * for a run another process is training (signals.h).
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/mpi_comm.h"

static void print_usage(FILE *f)
{
    fprintf(f,
            "selectivbench %s - the SelectivBench benchmark on the CPU\n"
            "\n"
            "usage: selectivbench COMMAND [flags]     (%s COMMAND --help for its flags)\n"
            "\n"
            "commands:\n"
            "  demo       the main job in a few minutes: the paper's grammar, samples, two tiny\n"
            "             sweeps of five models, a results table, figures and the findings\n"
            "  grammar    build a grammar; print its states, transitions and TE; --json, --dot\n"
            "  data       generate samples; show them, print them as JSON, checksum a split,\n"
            "             export the reference's dataset files\n"
            "  train      train and evaluate one configuration (the reference's train.py flags)\n"
            "  eval       evaluate a checkpoint, e.g. at longer test gaps (--test_dur)\n"
            "  probe      what a checkpoint keeps: linear readouts by depth and lag, gates on\n"
            "             symbol vs gap frames, state norms along a long gap (figures, JSON)\n"
            "  ceiling    the ideal observer of a task: the best possible accuracy, and the\n"
            "             accuracy of observers that remember only the last k elements\n"
            "  sweep      run a W&B grid sweep file offline (resumable, parallel, sharded)\n"
            "  plan       what a sweep file will cost: frames, FLOPs, memory and time of every\n"
            "             run, calibrated on this machine; core-hours and wall time on N ranks\n"
            "  results    list the runs of a results database (--json, --csv)\n"
            "  report     the paper's figures and tables from a results database\n"
            "  serve      a dashboard of a results database in the browser (127.0.0.1):\n"
            "             runs, groups, learning curves, figures, a sweep's progress\n"
            "  models     every model with its parameter count and taxonomy\n"
            "  bench      training speed of every model (bench data: data generation speed)\n"
            "\n"
            "Task flags follow the reference's train.py (--vocab, --amb, --amb_depth,\n"
            "--grammar_scale True, --train_gap_max, --train_noise, --grammar_gap True, ...).\n",
            sb_version(), sb_cli_program());
}

/* OpenMP threads that spin while waiting make two threads far slower than one when
 * another process holds a core (measured on 2-vCPU machines). libgomp reads
 * OMP_WAIT_POLICY once, when it is loaded, so the program sets it and starts itself
 * again. */
static void ensure_passive_wait(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") != NULL)
        return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc): carry on with the default policy */
}

/* The error for a command that does not exist: the closest command when one is near. */
static int unknown_command(const char *cmd)
{
    static const char *const commands[] = {
        "grammar", "data",  "demo", "bench",   "train",  "ceiling", "eval", "probe",
        "models",  "sweep", "plan", "results", "report", "serve",   "help", "version"};
    const char *hint = sb_closest_name(cmd, commands, (int)(sizeof commands / sizeof *commands));
    if (hint != NULL)
        fprintf(stderr,
                "selectivbench: error: unknown command '%s'; did you mean '%s'? (run "
                "'%s --help' for the list)\n",
                cmd, hint, sb_cli_program());
    else
        fprintf(stderr, "selectivbench: error: unknown command '%s'; run '%s --help'\n", cmd,
                sb_cli_program());
    return 2;
}

static int dispatch(int argc, char **argv);

/* Under mpirun every rank runs this program: MPI starts before the command and ends after
 * it (only `sweep` and `train` use the world; other commands run once per rank). */
int main(int argc, char **argv)
{
    ensure_passive_wait(argv);
    char msg[256];
    if (sb_mpi_start(msg, sizeof msg) != 0) {
        fprintf(stderr, "selectivbench: error: %s\n", msg);
        return 1;
    }
    int rc = dispatch(argc, argv);
    sb_mpi_stop();
    return rc;
}

static int dispatch(int argc, char **argv)
{
    sb_cli_set_program(argv[0]);
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("selectivbench %s\n", sb_version());
        return 0;
    }
    if (strcmp(cmd, "grammar") == 0)
        return sb_cmd_grammar(argc, argv);
    if (strcmp(cmd, "data") == 0)
        return sb_cmd_data(argc, argv);
    if (strcmp(cmd, "demo") == 0)
        return sb_cmd_demo(argc, argv);
    if (strcmp(cmd, "bench") == 0)
        return sb_cmd_bench(argc, argv);
    if (strcmp(cmd, "train") == 0)
        return sb_cmd_train(argc, argv);
    if (strcmp(cmd, "ceiling") == 0)
        return sb_cmd_ceiling(argc, argv);
    if (strcmp(cmd, "eval") == 0)
        return sb_cmd_eval(argc, argv);
    if (strcmp(cmd, "probe") == 0)
        return sb_cmd_probe(argc, argv);
    if (strcmp(cmd, "models") == 0)
        return sb_cmd_models(argc, argv);
    if (strcmp(cmd, "sweep") == 0)
        return sb_cmd_sweep(argc, argv);
    if (strcmp(cmd, "plan") == 0)
        return sb_cmd_plan(argc, argv);
    if (strcmp(cmd, "results") == 0)
        return sb_cmd_results(argc, argv);
    if (strcmp(cmd, "report") == 0)
        return sb_cmd_report(argc, argv);
    if (strcmp(cmd, "serve") == 0)
        return sb_cmd_serve(argc, argv);
    return unknown_command(cmd);
}
