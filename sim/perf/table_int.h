/* table_int.h - helpers shared by table.c, vidur.c, vidur_all.c, fitted.c, measured.c
 * and crossval.c (internal: hs__ prefix, not part of the public API). */
#ifndef HS_PERF_TABLE_INT_H
#define HS_PERF_TABLE_INT_H

#include <stdio.h>

#include "core/err.h"

/* A strict reader of comma-separated files without quoting: every record is
 * one line, fields are split on ',' and kept verbatim (empty fields are
 * empty strings); "\r\n" endings and blank lines are accepted. */
typedef struct hs__tcsv {
    FILE *f;
    const char *path;
    char *line;
    size_t cap;
    int lineno;               /* line of the current record, 1-based */
    int nf;
    size_t capf;
    char **field;
} hs__tcsv;

/* Opens the file and reads its header into field[] (nf fields). */
int hs__tcsv_open(hs__tcsv *c, const char *path, hs_err *err);
/* Reads the next record: 1 when one was read, 0 at end of file, < 0 on a
 * read error. */
int hs__tcsv_next(hs__tcsv *c, hs_err *err);
void hs__tcsv_close(hs__tcsv *c);
/* Parses field i as an integer in [lo, hi] / a finite number in [lo, hi];
 * errors are "<path>:<line>: <name>: ...". */
int hs__tcsv_int(const hs__tcsv *c, int i, const char *name, long lo, long hi,
                long *v, hs_err *err);
int hs__tcsv_num(const hs__tcsv *c, int i, const char *name, double lo,
                double hi, double *v, hs_err *err);

/* mkdir -p; 0 or HS_EIO naming the path. */
int hs__mkdirs(const char *path, hs_err *err);
/* 1 when path is an existing regular file / directory. */
int hs__is_file(const char *path);
int hs__is_dir(const char *path);

/* Sorted names of the subdirectories of dir (skipping dot entries); *out is
 * an array of *n malloc'd strings freed by hs__names_free.  A missing dir
 * gives 0 names. */
int hs__subdirs(const char *dir, char ***out, int *n, hs_err *err);
void hs__names_free(char **names, int n);
/* Sorted names of the regular files in dir that start with prefix and end
 * with suffix; as hs__subdirs. */
int hs__list_files(const char *dir, const char *prefix, const char *suffix,
                   char ***out, int *n, hs_err *err);

/* Table directories (those holding meta.json) named by a comma-separated
 * list of tables and roots of <gpu>/<model>/ tables, in list order and
 * sorted within a root; as hs__subdirs. */
int hs__table_dirs(const char *dirs, char ***out, int *n, hs_err *err);

/* 1 when the provenance text prov ("gpu: source; gpu: source") already has
 * a segment for GPU type `gpu` (the exact name before a ':', not a
 * substring: "a40" is not in "l40s: ..." nor in "... from a100-80g,a40"). */
int hs__prov_has(const char *prov, const char *gpu);
/* Appends the n bytes at seg to the "; "-separated prov of cap bytes; a
 * line that no longer fits is cut and ends in "...". */
void hs__prov_append(char *prov, size_t cap, const char *seg, size_t n);

/* Percentile (0..100) of v[0..n-1] by linear interpolation; sorts v. */
double hs__percentile(double *v, int n, double pct);

#endif
