/* files.c - the small I/O helpers behind the table code (table_int.h): a
 * strict CSV record reader, directory listing in sorted order (readdir's
 * order is not stable, and fits and tables must not depend on it), mkdir -p,
 * and percentiles. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/vec.h"
#include "perf/table_int.h"

/* ---- CSV ----------------------------------------------------------------- */

static int csv_split(hs__tcsv *c, hs_err *err)
{
    char *p = c->line;
    size_t n = strlen(p);
    while (n && (p[n - 1] == '\n' || p[n - 1] == '\r')) p[--n] = '\0';
    c->nf = 0;
    for (;;) {
        char *comma = strchr(p, ',');
        if (hs_vec_reserve((void **)&c->field, &c->capf, (size_t)c->nf + 1, sizeof *c->field, 16))
            return hs_errf(err, HS_ENOMEM, "%s: out of memory", c->path);
        c->field[c->nf++] = p;
        if (!comma) break;
        *comma = '\0';
        p = comma + 1;
    }
    return 0;
}

int hs__tcsv_next(hs__tcsv *c, hs_err *err)
{
    for (;;) {
        ssize_t r = getline(&c->line, &c->cap, c->f);
        if (r < 0) {
            if (ferror(c->f)) return hs_errf(err, HS_EIO, "%s: read error", c->path);
            return 0;
        }
        c->lineno++;
        if (c->line[strspn(c->line, " \t\r\n")] == '\0') continue; /* blank */
        return csv_split(c, err) ? -1 : 1;
    }
}

int hs__tcsv_open(hs__tcsv *c, const char *path, hs_err *err)
{
    int rc;
    memset(c, 0, sizeof *c);
    c->path = path;
    c->f = fopen(path, "r");
    if (!c->f) return hs_errf(err, HS_EIO, "%s: cannot open: %s", path, strerror(errno));
    rc = hs__tcsv_next(c, err);
    if (rc == 0) rc = hs_errf(err, HS_EPARSE, "%s: empty file (no header)", path);
    if (rc < 0) {
        hs__tcsv_close(c);
        return rc;
    }
    return 0;
}

void hs__tcsv_close(hs__tcsv *c)
{
    if (c->f) fclose(c->f);
    free(c->line);
    free(c->field);
    memset(c, 0, sizeof *c);
}

int hs__tcsv_num(const hs__tcsv *c, int i, const char *name, double lo,
                double hi, double *v, hs_err *err)
{
    const char *s = i < c->nf ? c->field[i] : "";
    char *end;
    double d;
    errno = 0;
    d = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(d))
        return hs_errf(err, HS_EPARSE, "%s:%d: %s: \"%s\" is not a number", c->path,
                       c->lineno, name, s);
    if (d < lo || d > hi)
        return hs_errf(err, HS_ERANGE, "%s:%d: %s: %g is outside [%g, %g]", c->path,
                       c->lineno, name, d, lo, hi);
    *v = d;
    return 0;
}

int hs__tcsv_int(const hs__tcsv *c, int i, const char *name, long lo, long hi,
                long *v, hs_err *err)
{
    const char *s = i < c->nf ? c->field[i] : "";
    char *end;
    long d;
    errno = 0;
    d = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE)
        return hs_errf(err, HS_EPARSE, "%s:%d: %s: \"%s\" is not an integer", c->path,
                       c->lineno, name, s);
    if (d < lo || d > hi)
        return hs_errf(err, HS_ERANGE, "%s:%d: %s: %ld is outside [%ld, %ld]", c->path,
                       c->lineno, name, d, lo, hi);
    *v = d;
    return 0;
}

/* ---- files and directories ------------------------------------------------ */

int hs__is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int hs__is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int hs__mkdirs(const char *path, hs_err *err)
{
    char buf[1024];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return hs_errf(err, HS_ERANGE, "%s: bad directory path", path);
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char save = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return hs_errf(err, HS_EIO, "%s: cannot create: %s", buf, strerror(errno));
            if (!hs__is_dir(buf))
                return hs_errf(err, HS_EIO, "%s: exists and is not a directory", buf);
            *p = save;
            if (!save) break;
        }
    }
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in dir that pass keep(), sorted (readdir order is not stable). */
static int list_names(const char *dir, int want_dir, const char *prefix,
                      const char *suffix, char ***out, int *n, hs_err *err)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL, path[1024];
    int cnt = 0;
    size_t cap = 0, pl = prefix ? strlen(prefix) : 0, sl = suffix ? strlen(suffix) : 0;
    *out = NULL;
    *n = 0;
    if (!d) return 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.') continue;
        if (len < pl + sl || (pl && strncmp(e->d_name, prefix, pl)) ||
            (sl && strcmp(e->d_name + len - sl, suffix)))
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path) continue;
        if (want_dir ? !hs__is_dir(path) : !hs__is_file(path)) continue;
        if (hs_vec_reserve((void **)&v, &cap, (size_t)cnt + 1, sizeof *v, 16)) goto nomem;
        if (!(v[cnt] = strdup(e->d_name))) goto nomem;
        cnt++;
    }
    closedir(d);
    if (cnt) qsort(v, (size_t)cnt, sizeof *v, name_cmp);
    *out = v;
    *n = cnt;
    return 0;
nomem:
    closedir(d);
    hs__names_free(v, cnt);
    return hs_errf(err, HS_ENOMEM, "out of memory listing %s", dir);
}

int hs__subdirs(const char *dir, char ***out, int *n, hs_err *err)
{
    return list_names(dir, 1, NULL, NULL, out, n, err);
}

int hs__list_files(const char *dir, const char *prefix, const char *suffix,
                   char ***out, int *n, hs_err *err)
{
    return list_names(dir, 0, prefix, suffix, out, n, err);
}

void hs__names_free(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* ---- statistics ---------------------------------------------------------- */

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double hs__percentile(double *v, int n, double pct)
{
    double pos, frac;
    int i;
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, dbl_cmp);
    pos = pct / 100.0 * (n - 1);
    i = (int)pos;
    frac = pos - i;
    return i + 1 < n ? v[i] + frac * (v[i + 1] - v[i]) : v[n - 1];
}

