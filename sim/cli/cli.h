/* cli.h - the hetsim subcommands.  Each returns the process exit code:
 * 0 success, 1 runtime failure, 2 bad input or usage. */
#ifndef HS_CLI_H
#define HS_CLI_H

int hs_cli_run(int argc, char **argv);
int hs_cli_list(int argc, char **argv);
int hs_cli_trace(int argc, char **argv);
int hs_cli_plan(int argc, char **argv);
int hs_cli_perf(int argc, char **argv);
int hs_cli_validate(int argc, char **argv);
int hs_cli_sweep(int argc, char **argv);
int hs_cli_sweep_mpi(int argc, char **argv);  /* hetsim-mpi only (sweep_mpi.c) */
int hs_cli_search(int argc, char **argv);
int hs_cli_report(int argc, char **argv);

/* Picks the workload kind of a trace file: .json is ShareGPT conversations,
 * a CSV is told apart by its header line. */
#include <stddef.h>
#include "core/err.h"
int hs_cli_trace_kind(const char *path, char *kind, size_t cap, hs_err *err);

/* validate's readers and measured timeline without a database (fuzzing). */
#include <stdint.h>
int hs_cli_validate_check(const char *sched, const char *measured, int32_t replica, hs_err *err);

/* Maps an HS_E* code to the exit code (2 for input errors). */
int hs_cli_exit_code(int rc);

#endif
