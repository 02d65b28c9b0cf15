/* sweep_int.h - internals of sweep.c shared with the MPI driver
 * (sweep_mpi.c).  Not a public API. */
#ifndef HS_SWEEP_INT_H
#define HS_SWEEP_INT_H

#include <stdint.h>

#include "cli/sweep.h"
#include "out/db.h"

typedef struct hs__case {
    char **sets;          /* "key=value" applied after the base */
    int n_sets;
    char key[17];         /* hs_case_key of the canonical configuration */
    char *params;         /* JSON object of the case's settings */
    char *text;           /* settings joined by spaces */
    char *check;          /* hs_run_cfg_check's message, NULL when the names check out */
} hs__case;

typedef struct hs__axis {
    char key[128];
    char **vals;
    int n;
} hs__axis;

struct hs_sweep {
    const char *cmd;
    char **base;          /* argv fragment: "--config" F / "--set" KV pairs */
    int n_base;
    hs__axis *axes;       /* --grid, in order (first varies slowest) */
    int n_axes;
    char **lists;         /* --case "k=v;k=v" entries */
    int n_lists;
    char spec[1024];      /* --spec FILE */
    hs__case *cases;
    int n_cases;
    char db[1024];        /* target database ("" until known) */
    char name[128];
    int jobs, window, quiet, retry_failed, dry_run;
    int no_progress;      /* no progress lines (search probes), failures still reported */
    /* Distinct failure messages of this execution, with counts, so a
     * failure repeated by many cases is printed once and summed up. */
    struct { char msg[512]; int count, first; } fails[32];
    int n_fails;
    hs_db *h;             /* open target database (coordinator only) */
    char tmp[1100];       /* private temporary folder */
};

/* The positions of cases not stored yet (failed ones too, after deleting
 * their record, with --retry-failed); opens s->h.  Caller frees *pend. */
int hs__sweep_pending(hs_sweep *s, int **pend, int *n_pend, int *n_stored, hs_err *err);

/* HS_EINVAL when every case fails hs_run_cfg_check: a configuration
 * error, reported once before anything runs or any database opens. */
int hs__sweep_precheck(const hs_sweep *s, hs_err *err);

/* Creates s->tmp. */
int hs__sweep_tmpdir(hs_sweep *s, hs_err *err);
void hs__sweep_rmtmp(hs_sweep *s);

/* Paths of case pos's private database and log in s->tmp. */
void hs__sweep_case_paths(const hs_sweep *s, int pos, char *db, char *log, size_t cap);

/* Runs case pos in this process into its private database, stdout and
 * stderr going to its log.  Returns the `hetsim run` exit code; on
 * failure msg holds the reason (one line). */
int hs__sweep_run_case(const hs_sweep *s, int pos, char *msg, size_t cap);

/* Stores case pos (rc 0: copies its private database; else records the
 * failure msg) and removes its private files. */
int hs__sweep_commit(hs_sweep *s, int pos, int rc, const char *msg, hs_err *err);

/* Parses `hetsim sweep` arguments into s and expands the cases; 1 when
 * --help was printed. */
int hs__sweep_cli_parse(hs_sweep *s, int argc, char **argv, hs_err *err);

/* Dry run: prints every case and whether it is stored. */
void hs__sweep_list(const hs_sweep *s, const int *pend, int n_pend);

/* Progress display (stderr): start, one finished case, end. */
void hs__progress_start(hs_sweep *s, int total, int stored, int workers);
void hs__progress_step(hs_sweep *s, int failed);
void hs__progress_end(hs_sweep *s);

#endif
