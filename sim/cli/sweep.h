/* sweep.h - many `hetsim run` cases into one results database: the engine
 * behind `hetsim sweep`, `hetsim search` and the MPI driver.
 *
 * A sweep is a base configuration (--config files and --set overrides, as
 * for `hetsim run`) plus an ordered case list; each case adds key=value
 * settings.  Every case is identified by its case key (out/sweepdb.h).
 *
 * Execution: each case runs `hetsim run` into a private temporary database
 * (a forked worker locally, or an MPI rank); the coordinator copies finished
 * cases into the target database strictly in case-list order, one
 * transaction per case.  Hence:
 *   INV-SWEEP-3 the committed cases of a sweep are always a prefix of its
 *   pending list, and run ids follow case order whatever the worker count
 *   or rank count, so a parallel, distributed or resumed sweep stores the
 *   same rows as a serial one (wall-clock columns runs.started and
 *   runs.wall_s aside);
 *   a killed sweep loses only cases not yet committed: those in flight and
 *   at most `window` finished ones waiting for an earlier case. */
#ifndef HS_SWEEP_H
#define HS_SWEEP_H

#include <stdint.h>

#include "core/err.h"

typedef struct hs_sweep hs_sweep;

/* An empty sweep for command `cmd` (used in messages). */
hs_sweep *hs_sweep_create(const char *cmd);
void hs_sweep_destroy(hs_sweep *s);

/* Consumes the option at argv[*i] when it is a sweep option (--config,
 * --set, --grid, --case, --spec, --db, --jobs/-j, --name, --window,
 * --retry-failed, --dry-run, --quiet); returns 1 when consumed (advancing
 * *i past its value), 0 when not a sweep option, or an error. */
int hs_sweep_option(hs_sweep *s, int argc, char **argv, int *i, hs_err *err);

/* Prints the sweep options (for --help texts). */
void hs_sweep_options_help(void *fp);

/* Expands --grid/--case/--spec into cases and checks every case's
 * configuration (bad keys or values fail here, naming the case). */
int hs_sweep_expand(hs_sweep *s, hs_err *err);

/* Appends one case of n "key=value" settings; *pos is its position.  A case
 * whose configuration equals an earlier one's is not added again (*pos is
 * the earlier one's). */
int hs_sweep_add_case(hs_sweep *s, const char *const *sets, int n, int *pos, hs_err *err);

int hs_sweep_count(const hs_sweep *s);
/* The case's key=value settings (*n of them), owned by the sweep. */
const char *const *hs_sweep_case_sets(const hs_sweep *s, int pos, int *n);
/* The case's key=value settings joined by spaces (for messages). */
const char *hs_sweep_case_text(const hs_sweep *s, int pos);

/* Runs every case not yet stored, on the local cores.  Failed cases are
 * recorded (sweep_cases.error) and counted in *n_failed; they are not an
 * error of the sweep. */
int hs_sweep_exec(hs_sweep *s, int *n_failed, hs_err *err);

/* The run id of case pos (0 when it failed or is absent). */
int hs_sweep_case_run(hs_sweep *s, int pos, int64_t *run_id, hs_err *err);
/* Summary metric `name` of case pos; *found 0 when it failed or lacks it. */
int hs_sweep_case_metric(hs_sweep *s, int pos, const char *name, double *v, int *found,
                         hs_err *err);

const char *hs_sweep_db_path(const hs_sweep *s);
/* No progress display (failures are still reported). */
void hs_sweep_no_progress(hs_sweep *s);
/* Sets the sweep name unless --name gave one. */
void hs_sweep_default_name(hs_sweep *s, const char *name);
int hs_sweep_quiet(const hs_sweep *s);

/* Replaces dst's base settings (--config / --set, a spec's "set" once
 * expanded) with src's: search probes run on their group's base. */
int hs_sweep_copy_base(hs_sweep *dst, const hs_sweep *src, hs_err *err);

#endif
