/* commands.h - the subcommands, one file each (cmd_<name>.c), dispatched by main.c. Each
 * takes the arguments after its name and returns the process's exit code. */
#ifndef SELECTIVBENCH_COMMANDS_H
#define SELECTIVBENCH_COMMANDS_H

int sb_cmd_grammar(int argc, char **argv);
int sb_cmd_data(int argc, char **argv);
int sb_cmd_demo(int argc, char **argv);
int sb_cmd_bench(int argc, char **argv);
int sb_cmd_train(int argc, char **argv);
int sb_cmd_eval(int argc, char **argv);
int sb_cmd_probe(int argc, char **argv);
int sb_cmd_ceiling(int argc, char **argv);
int sb_cmd_models(int argc, char **argv);
int sb_cmd_sweep(int argc, char **argv);
int sb_cmd_plan(int argc, char **argv);
int sb_cmd_results(int argc, char **argv);
int sb_cmd_report(int argc, char **argv);
int sb_cmd_serve(int argc, char **argv);

/* Prints "selectivbench CMD: error: MSG" and returns the exit code of err->status. */

#endif
