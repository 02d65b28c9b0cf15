/* sweep.c - `hetsim sweep`: a grid or list of `hetsim run` cases run on the
 * local cores into one results database, resumable; see sweep.h for the
 * invariants (case keys, commits in case order).
 *
 * Workers are forked processes, each running one case into its own
 * temporary database (no SQLite lock is shared while simulating); the
 * coordinator alone writes the target database.  Workers die with the
 * coordinator (PR_SET_PDEATHSIG on Linux), so a killed sweep leaves no
 * stray writer. */
#include "cli/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/config.h"
#include "cli/sweep_int.h"
#include "core/conf.h"
#include "out/sweepdb.h"

char *mkdtemp(char *tmpl);  /* POSIX 2008; not declared under strict C11 headers */

static double now_s(void);
static double commit_s;     /* wall seconds the coordinator spent storing cases */

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Appends p to a growable array of pointers. */
static int push_ptr(void *arr, int *n, void *p)
{
    void ***a = arr;
    void **g = realloc(*a, (size_t)(*n + 1) * sizeof **a);
    if (!g) return HS_ENOMEM;
    *a = g;
    g[(*n)++] = p;
    return 0;
}

hs_sweep *hs_sweep_create(const char *cmd)
{
    hs_sweep *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cmd = cmd;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    s->jobs = n > 0 ? (int)n : 1;
    return s;
}

static void free_strs(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

void hs_sweep_destroy(hs_sweep *s)
{
    if (!s) return;
    hs_db_close(s->h);
    free_strs(s->base, s->n_base);
    for (int i = 0; i < s->n_axes; i++) free_strs(s->axes[i].vals, s->axes[i].n);
    free(s->axes);
    free_strs(s->lists, s->n_lists);
    for (int i = 0; i < s->n_cases; i++) {
        free_strs(s->cases[i].sets, s->cases[i].n_sets);
        free(s->cases[i].params);
        free(s->cases[i].text);
    }
    free(s->cases);
    free(s);
}

int hs_sweep_count(const hs_sweep *s) { return s->n_cases; }
const char *hs_sweep_case_text(const hs_sweep *s, int pos) { return s->cases[pos].text; }

const char *const *hs_sweep_case_sets(const hs_sweep *s, int pos, int *n)
{
    *n = s->cases[pos].n_sets;
    return (const char *const *)s->cases[pos].sets;
}
const char *hs_sweep_db_path(const hs_sweep *s) { return s->db; }
int hs_sweep_quiet(const hs_sweep *s) { return s->quiet; }

void hs_sweep_no_progress(hs_sweep *s)
{
    s->no_progress = 1;
}

void hs_sweep_default_name(hs_sweep *s, const char *name)
{
    if (!s->name[0]) snprintf(s->name, sizeof s->name, "%s", name);
}

void hs_sweep_options_help(void *fpv)
{
    FILE *fp = fpv;
    fprintf(fp,
            "  --config FILE        base run configuration (as for hetsim run)\n"
            "  --set KEY=VALUE      base setting, any key of `hetsim run --help`\n"
            "  --grid KEY=V1,V2,..  one axis of the grid; KEY=A:B:STEP is a numeric range\n"
            "                       (inclusive); several --grid multiply, the first varies slowest\n"
            "  --case 'K=V;K=V'     one entry of a case list (several allowed); the grid is\n"
            "                       applied to every entry\n"
            "  --spec FILE          JSON {\"set\": {K: V}, \"grid\": {K: [V, ..]}, \"list\": [{K: V}, ..]}\n"
            "  --db FILE            results database (default: the configuration's db)\n"
            "  -j, --jobs N         parallel workers (default: the number of cores)\n"
            "  --name NAME          sweep name stored with each case\n"
            "  --window N           finished cases held for an earlier one (default 4 x jobs)\n"
            "  --retry-failed       run cases again whose earlier attempt failed\n"
            "  --dry-run            list the cases and whether they are stored; run nothing\n"
            "  --quiet              no progress display\n");
}

static int add_axis(hs_sweep *s, const char *kv, const char *where, hs_err *err)
{
    const char *eq = strchr(kv, '=');
    hs__axis ax;
    double a, b, st;
    char tail;
    if (!eq || eq == kv || !eq[1])
        return hs_errf(err, HS_EINVAL, "%s %s: expected KEY=V1,V2,... or KEY=A:B:STEP", where, kv);
    memset(&ax, 0, sizeof ax);
    if ((size_t)(eq - kv) >= sizeof ax.key) return hs_errf(err, HS_EINVAL, "%s: key too long", where);
    memcpy(ax.key, kv, (size_t)(eq - kv));
    for (int i = 0; i < s->n_axes; i++)
        if (!strcmp(s->axes[i].key, ax.key))
            return hs_errf(err, HS_EINVAL, "%s %s: key %s has two axes", where, kv, ax.key);
    if (sscanf(eq + 1, "%lf:%lf:%lf%c", &a, &b, &st, &tail) == 3) {
        if (!isfinite(a) || !isfinite(b) || !isfinite(st) || st <= 0 || b < a)
            return hs_errf(err, HS_ERANGE, "%s %s: need A <= B and STEP > 0", where, kv);
        long n = (long)floor((b - a) / st + 1e-9) + 1;
        if (n > 100000) return hs_errf(err, HS_ERANGE, "%s %s: %ld values is too many", where, kv, n);
        for (long k = 0; k < n; k++) {
            char buf[64];
            /* a + k*step, printed shortest so 0.1 steps do not read 0.30000000000000004 */
            double v = a + (double)k * st;
            snprintf(buf, sizeof buf, "%.12g", v);
            char *d = xstrdup(buf);
            if (!d || push_ptr(&ax.vals, &ax.n, d)) goto nomem;
        }
    } else {
        const char *p = eq + 1;
        while (1) {
            const char *c = strchr(p, ',');
            size_t n = c ? (size_t)(c - p) : strlen(p);
            if (!n) {
                free_strs(ax.vals, ax.n);
                return hs_errf(err, HS_EINVAL, "%s %s: empty value", where, kv);
            }
            char *d = malloc(n + 1);
            if (!d) goto nomem;
            memcpy(d, p, n);
            d[n] = '\0';
            if (push_ptr(&ax.vals, &ax.n, d)) {
                free(d);
                goto nomem;
            }
            if (!c) break;
            p = c + 1;
        }
    }
    {
        hs__axis *g = realloc(s->axes, (size_t)(s->n_axes + 1) * sizeof *g);
        if (!g) goto nomem;
        s->axes = g;
        g[s->n_axes++] = ax;
    }
    return 0;
nomem:
    free_strs(ax.vals, ax.n);
    return hs_errf(err, HS_ENOMEM, "out of memory");
}

static int push_base(hs_sweep *s, const char *flag, const char *v, hs_err *err)
{
    char *a = xstrdup(flag), *b = xstrdup(v);
    if (!a || !b || push_ptr(&s->base, &s->n_base, a) || push_ptr(&s->base, &s->n_base, b)) {
        free(b);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    return 0;
}

static int parse_int(const char *opt, const char *v, int lo, int hi, int *out, hs_err *err)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (end == v || *end || n < lo || n > hi)
        return hs_errf(err, HS_ERANGE, "%s: \"%s\" is not an integer in %d..%d", opt, v, lo, hi);
    *out = (int)n;
    return 0;
}

int hs_sweep_option(hs_sweep *s, int argc, char **argv, int *i, hs_err *err)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int rc;
    if (!strcmp(a, "--retry-failed")) { s->retry_failed = 1; return 1; }
    if (!strcmp(a, "--dry-run")) { s->dry_run = 1; return 1; }
    if (!strcmp(a, "--quiet")) { s->quiet = 1; return 1; }
    if (!strncmp(a, "-j", 2) && a[2]) return (rc = parse_int("-j", a + 2, 1, 4096, &s->jobs, err)) ? rc : 1;
    if (strcmp(a, "--config") && strcmp(a, "--set") && strcmp(a, "--grid") && strcmp(a, "--case") &&
        strcmp(a, "--spec") && strcmp(a, "--db") && strcmp(a, "-j") && strcmp(a, "--jobs") &&
        strcmp(a, "--name") && strcmp(a, "--window"))
        return 0;
    if (!v) return hs_errf(err, HS_EINVAL, "%s needs a value (see hetsim %s --help)", a, s->cmd);
    (*i)++;
    if (!strcmp(a, "--config") || !strcmp(a, "--set")) rc = push_base(s, a, v, err);
    else if (!strcmp(a, "--grid")) rc = add_axis(s, v, "--grid", err);
    else if (!strcmp(a, "--case")) {
        char *d = xstrdup(v);
        rc = !d || push_ptr(&s->lists, &s->n_lists, d) ? hs_errf(err, HS_ENOMEM, "out of memory") : 0;
    } else if (!strcmp(a, "--spec")) {
        snprintf(s->spec, sizeof s->spec, "%s", v);
        rc = 0;
    } else if (!strcmp(a, "--db")) {
        snprintf(s->db, sizeof s->db, "%s", v);
        rc = 0;
    } else if (!strcmp(a, "--name")) {
        snprintf(s->name, sizeof s->name, "%s", v);
        rc = 0;
    } else if (!strcmp(a, "--window")) rc = parse_int(a, v, 1, 1 << 20, &s->window, err);
    else rc = parse_int(a, v, 1, 4096, &s->jobs, err);
    return rc ? rc : 1;
}

/* The base configuration: --config files first, then --set in order (the
 * order `hetsim run` applies them). */
static int base_cfg(const hs_sweep *s, hs_run_cfg *c, hs_err *err)
{
    int rc;
    hs_run_cfg_defaults(c);
    for (int i = 0; i < s->n_base; i += 2)
        if (!strcmp(s->base[i], "--config") && (rc = hs_run_cfg_load(c, s->base[i + 1], err)))
            return rc;
    for (int i = 0; i < s->n_base; i += 2)
        if (!strcmp(s->base[i], "--set") && (rc = hs_run_cfg_set(c, s->base[i + 1], "--set", err)))
            return rc;
    return 0;
}

/* A JSON value as it would be typed after --set KEY=. */
static int json_text(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsString(v)) snprintf(buf, cap, "%s", v->valuestring);
    else if (cJSON_IsBool(v)) snprintf(buf, cap, "%d", cJSON_IsTrue(v) ? 1 : 0);
    else if (cJSON_IsNumber(v)) snprintf(buf, cap, "%.17g", v->valuedouble);
    else return -1;
    /* Prefer the short form when it reads back the same number. */
    if (cJSON_IsNumber(v)) {
        char s12[64];
        snprintf(s12, sizeof s12, "%.12g", v->valuedouble);
        if (strtod(s12, NULL) == v->valuedouble) snprintf(buf, cap, "%s", s12);
    }
    return 0;
}

/* Reads --spec into base sets, axes and list entries. */
static int load_spec(hs_sweep *s, hs_err *err)
{
    cJSON *root, *it;
    int rc = 0;
    char val[1200], kv[1400];
    if ((rc = hs_json_load(s->spec, &root, err))) return rc;
    if (!cJSON_IsObject(root)) {
        rc = hs_errf(err, HS_EPARSE, "%s: expected a JSON object with set, grid, list", s->spec);
        goto out;
    }
    cJSON_ArrayForEach(it, root) {
        if (strcmp(it->string, "set") && strcmp(it->string, "grid") && strcmp(it->string, "list")) {
            rc = hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\" (set, grid, list)", s->spec, it->string);
            goto out;
        }
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "set"))) {
        cJSON *x;
        if (!cJSON_IsObject(it)) {
            rc = hs_errf(err, HS_EPARSE, "%s: set: expected an object", s->spec);
            goto out;
        }
        cJSON_ArrayForEach(x, it) {
            if (json_text(x, val, sizeof val)) {
                rc = hs_errf(err, HS_EPARSE, "%s: set.%s: expected a number, string or bool", s->spec, x->string);
                goto out;
            }
            snprintf(kv, sizeof kv, "%s=%s", x->string, val);
            if ((rc = push_base(s, "--set", kv, err))) goto out;
        }
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "grid"))) {
        cJSON *x;
        if (!cJSON_IsObject(it)) {
            rc = hs_errf(err, HS_EPARSE, "%s: grid: expected an object of arrays", s->spec);
            goto out;
        }
        cJSON_ArrayForEach(x, it) {
            cJSON *y;
            size_t len;
            char *joined;
            if (!cJSON_IsArray(x) || !cJSON_GetArraySize(x)) {
                rc = hs_errf(err, HS_EPARSE, "%s: grid.%s: expected a non-empty array", s->spec, x->string);
                goto out;
            }
            /* Reuse add_axis on "key=v1,v2" unless a value holds a comma. */
            len = strlen(x->string) + 2;
            cJSON_ArrayForEach(y, x) {
                if (json_text(y, val, sizeof val) || strchr(val, ',')) {
                    rc = hs_errf(err, HS_EPARSE, "%s: grid.%s: values must be numbers, bools or strings "
                                 "without commas", s->spec, x->string);
                    goto out;
                }
                len += strlen(val) + 1;
            }
            joined = malloc(len);
            if (!joined) {
                rc = hs_errf(err, HS_ENOMEM, "out of memory");
                goto out;
            }
            size_t o = (size_t)snprintf(joined, len, "%s=", x->string);
            cJSON_ArrayForEach(y, x) {
                json_text(y, val, sizeof val);
                o += (size_t)snprintf(joined + o, len - o, "%s%s", y == x->child ? "" : ",", val);
            }
            rc = add_axis(s, joined, s->spec, err);
            free(joined);
            if (rc) goto out;
        }
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "list"))) {
        cJSON *e;
        int k = 0;
        if (!cJSON_IsArray(it)) {
            rc = hs_errf(err, HS_EPARSE, "%s: list: expected an array of objects", s->spec);
            goto out;
        }
        cJSON_ArrayForEach(e, it) {
            cJSON *x;
            char *entry = xstrdup("");
            if (!cJSON_IsObject(e) || !entry) {
                free(entry);
                rc = hs_errf(err, HS_EPARSE, "%s: list[%d]: expected an object", s->spec, k);
                goto out;
            }
            cJSON_ArrayForEach(x, e) {
                size_t n;
                char *g;
                if (json_text(x, val, sizeof val) || strchr(val, ';')) {
                    free(entry);
                    rc = hs_errf(err, HS_EPARSE, "%s: list[%d].%s: expected a number, bool or string without ';'",
                                 s->spec, k, x->string);
                    goto out;
                }
                n = strlen(entry) + strlen(x->string) + strlen(val) + 3;
                g = realloc(entry, n);
                if (!g) {
                    free(entry);
                    rc = hs_errf(err, HS_ENOMEM, "out of memory");
                    goto out;
                }
                entry = g;
                snprintf(entry + strlen(entry), n - strlen(entry), "%s%s=%s", entry[0] ? ";" : "", x->string, val);
            }
            if (push_ptr(&s->lists, &s->n_lists, entry)) {
                free(entry);
                rc = hs_errf(err, HS_ENOMEM, "out of memory");
                goto out;
            }
            k++;
        }
    }
out:
    cJSON_Delete(root);
    return rc;
}

/* A value as JSON: a number when the whole text is one, else a string. */
static cJSON *param_value(const char *v)
{
    char *end;
    double d = strtod(v, &end);
    if (end != v && !*end && isfinite(d)) return cJSON_CreateNumber(d);
    return cJSON_CreateString(v);
}

int hs_sweep_add_case(hs_sweep *s, const char *const *sets, int n, int *pos, hs_err *err)
{
    hs_run_cfg *cfg = malloc(sizeof *cfg);
    hs__case c;
    cJSON *params = NULL;
    char *json = NULL, where[64];
    int rc;
    size_t tl = 1;
    memset(&c, 0, sizeof c);
    if (!cfg) return hs_errf(err, HS_ENOMEM, "out of memory");
    if ((rc = base_cfg(s, cfg, err))) goto out;
    snprintf(where, sizeof where, "case %d:", s->n_cases + 1);
    for (int i = 0; i < n; i++)
        if ((rc = hs_run_cfg_set(cfg, sets[i], where, err))) goto out;
    hs_run_cfg_finish(cfg);
    if (!s->db[0]) snprintf(s->db, sizeof s->db, "%s", cfg->db);
    /* Identity: the configuration that decides the simulated results. */
    cfg->db[0] = '\0';
    cfg->label[0] = '\0';
    json = hs_run_cfg_json(cfg);
    params = cJSON_CreateObject();
    c.sets = calloc((size_t)(n > 0 ? n : 1), sizeof *c.sets);
    if (!json || !params || !c.sets) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    hs_case_key(json, c.key);
    for (int i = 0; i < s->n_cases; i++)
        if (!strcmp(s->cases[i].key, c.key)) {
            *pos = i;
            goto out;   /* the same configuration: one case */
        }
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(sets[i], '=');
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - sets[i]), sets[i]);
        cJSON_DeleteItemFromObjectCaseSensitive(params, key);  /* the later setting wins */
        cJSON_AddItemToObject(params, key, param_value(eq + 1));
        if (!(c.sets[c.n_sets] = xstrdup(sets[i]))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        c.n_sets++;
        tl += strlen(sets[i]) + 1;
    }
    c.params = cJSON_PrintUnformatted(params);
    c.text = malloc(tl);
    if (!c.params || !c.text) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    c.text[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i) strcat(c.text, " ");
        strcat(c.text, sets[i]);
    }
    {
        hs__case *g = realloc(s->cases, (size_t)(s->n_cases + 1) * sizeof *g);
        if (!g) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        s->cases = g;
        *pos = s->n_cases;
        g[s->n_cases++] = c;
        memset(&c, 0, sizeof c);
    }
out:
    free_strs(c.sets, c.n_sets);
    free(c.params);
    free(c.text);
    cJSON_Delete(params);
    free(json);
    free(cfg);
    return rc;
}

int hs_sweep_expand(hs_sweep *s, hs_err *err)
{
    int rc, n_list = s->n_lists ? s->n_lists : 1, pos;
    int *odo = NULL;
    char **sets = NULL;
    int cap = 0;
    if (s->spec[0] && (rc = load_spec(s, err))) return rc;
    n_list = s->n_lists ? s->n_lists : 1;
    odo = calloc((size_t)s->n_axes + 1, sizeof *odo);
    if (!odo) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int li = 0; li < n_list; li++) {
        /* Split the list entry "k=v;k=v". */
        char *entry = s->n_lists ? xstrdup(s->lists[li]) : xstrdup("");
        int n_entry = 0;
        if (!entry) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        cap = 0;
        for (char *p = entry; *p; p++) cap += *p == ';';
        cap += 1 + s->n_axes;
        free(sets);
        sets = calloc((size_t)cap, sizeof *sets);
        if (!sets) {
            free(entry);
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        for (char *p = entry, *q; *p; p = q) {
            q = strchr(p, ';');
            if (q) *q++ = '\0';
            else q = p + strlen(p);
            if (!*p) continue;
            if (!strchr(p, '=') || *p == '=') {
                rc = hs_errf(err, HS_EINVAL, "--case \"%s\": \"%s\" is not KEY=VALUE", s->lists[li], p);
                free(entry);
                goto out;
            }
            sets[n_entry++] = p;
        }
        memset(odo, 0, ((size_t)s->n_axes + 1) * sizeof *odo);
        while (1) {
            char kvbuf[64][1200];
            int n = n_entry;
            if (s->n_axes > 64) {
                free(entry);
                rc = hs_errf(err, HS_ERANGE, "at most 64 grid axes");
                goto out;
            }
            for (int a = 0; a < s->n_axes; a++) {
                snprintf(kvbuf[a], sizeof kvbuf[a], "%s=%s", s->axes[a].key, s->axes[a].vals[odo[a]]);
                sets[n++] = kvbuf[a];
            }
            if ((rc = hs_sweep_add_case(s, (const char *const *)sets, n, &pos, err))) {
                free(entry);
                goto out;
            }
            /* Odometer: the last axis varies fastest. */
            int a = s->n_axes - 1;
            while (a >= 0 && ++odo[a] == s->axes[a].n) odo[a--] = 0;
            if (a < 0) break;
        }
        free(entry);
    }
    rc = 0;
out:
    free(sets);
    free(odo);
    return rc;
}

/* ---- execution ---- */

int hs__sweep_tmpdir(hs_sweep *s, hs_err *err)
{
    /* Private case files are scratch: a memory file system (no fsync cost
     * per case) unless TMPDIR says otherwise. */
    const char *t = getenv("TMPDIR");
    if (!t || !*t) t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(s->tmp, sizeof s->tmp, "%s/hetsim-sweep.XXXXXX", t);
    if (!mkdtemp(s->tmp))
        return hs_errf(err, HS_EIO, "%s: cannot create a temporary folder: %s", s->tmp, strerror(errno));
    return 0;
}

void hs__sweep_rmtmp(hs_sweep *s)
{
    if (s->tmp[0]) rmdir(s->tmp);  /* empty by then; a leftover file keeps it (and says so) */
    s->tmp[0] = '\0';
}

void hs__sweep_case_paths(const hs_sweep *s, int pos, char *db, char *log, size_t cap)
{
    snprintf(db, cap, "%s/case-%d.db", s->tmp, pos);
    snprintf(log, cap, "%s/case-%d.log", s->tmp, pos);
}

static void remove_case_files(const hs_sweep *s, int pos)
{
    char db[1200], log[1200], j[1300];
    hs__sweep_case_paths(s, pos, db, log, sizeof db);
    snprintf(j, sizeof j, "%s-journal", db);
    unlink(db);
    unlink(log);
    unlink(j);
}

/* The reason in a failed case's log: its last "hetsim: " line. */
static void log_reason(const char *log, char *msg, size_t cap)
{
    FILE *fp = fopen(log, "r");
    char line[1024];
    int found = 0;
    if (!fp) return;
    while (fgets(line, sizeof line, fp)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (!strncmp(line, "hetsim: ", 8) && !strstr(line, " s wall, ")) {
            snprintf(msg, cap, "%s", line + 8);
            found = 1;
        }
    }
    fclose(fp);
    (void)found;
}

int hs__sweep_run_case(const hs_sweep *s, int pos, char *msg, size_t cap)
{
    const hs__case *c = &s->cases[pos];
    char db[1200], log[1200];
    int argc = 0, rc, fd, save1, save2;
    char **argv = calloc((size_t)(s->n_base + 2 * c->n_sets + 8), sizeof *argv);
    hs__sweep_case_paths(s, pos, db, log, sizeof db);
    snprintf(msg, cap, "case failed");
    if (!argv) {
        snprintf(msg, cap, "out of memory");
        return 1;
    }
    unlink(db);
    argv[argc++] = "run";
    for (int i = 0; i < s->n_base; i++) argv[argc++] = s->base[i];
    for (int i = 0; i < c->n_sets; i++) {
        argv[argc++] = "--set";
        argv[argc++] = c->sets[i];
    }
    argv[argc++] = "--db";
    argv[argc++] = db;
    argv[argc++] = "--quiet";
    argv[argc] = NULL;
    fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(msg, cap, "%s: %s", log, strerror(errno));
        free(argv);
        return 1;
    }
    fflush(stdout);
    fflush(stderr);
    save1 = dup(1);
    save2 = dup(2);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    rc = hs_cli_run(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(save1, 1);
    dup2(save2, 2);
    close(save1);
    close(save2);
    free(argv);
    if (rc) log_reason(log, msg, cap);
    return rc;
}

int hs__sweep_commit(hs_sweep *s, int pos, int rc, const char *msg, hs_err *err)
{
    const hs__case *c = &s->cases[pos];
    hs_case_row row = {c->key, s->name, pos, c->params, msg};
    char db[1200], log[1200];
    int64_t run;
    int ret;
    hs__sweep_case_paths(s, pos, db, log, sizeof db);
    double t0 = now_s();
    if (rc == 0) ret = hs_sweepdb_merge(s->h, db, &row, s->db, &run, err);
    else ret = hs_sweepdb_fail(s->h, &row, err);
    commit_s += now_s() - t0;
    /* Another sweep on the same file stored it first: nothing to add. */
    if (ret == HS_ESTATE && strstr(err->msg, "already stored")) ret = 0;
    if (!ret) remove_case_files(s, pos);
    if (!ret && rc && !s->quiet)
        fprintf(stderr, "%shetsim %s: case %d (%s) failed: %s\n", isatty(2) ? "\r\033[K" : "", s->cmd,
                pos + 1, c->text[0] ? c->text : "base", msg);
    return ret;
}

int hs__sweep_pending(hs_sweep *s, int **pend, int *n_pend, int *n_stored, hs_err *err)
{
    int rc;
    *pend = NULL;
    *n_pend = *n_stored = 0;
    if (!s->h && (rc = hs_db_open(&s->h, s->db, err))) return rc;
    *pend = malloc((size_t)(s->n_cases ? s->n_cases : 1) * sizeof **pend);
    if (!*pend) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int i = 0; i < s->n_cases; i++) {
        int st;
        if ((rc = hs_sweepdb_state(s->h, s->cases[i].key, &st, NULL, err))) goto fail;
        if (st == HS_CASE_FAILED && s->retry_failed && !s->dry_run) {
            if ((rc = hs_sweepdb_forget_failed(s->h, s->cases[i].key, err))) goto fail;
            st = HS_CASE_ABSENT;
        }
        if (st == HS_CASE_ABSENT) (*pend)[(*n_pend)++] = i;
        else (*n_stored)++;
    }
    return 0;
fail:
    free(*pend);
    *pend = NULL;
    return rc;
}

void hs__sweep_list(const hs_sweep *s, const int *pend, int n_pend)
{
    for (int i = 0, k = 0; i < s->n_cases; i++) {
        int st = k < n_pend && pend[k] == i;
        k += st;
        printf("%4d  %s  %-7s  %s\n", i + 1, s->cases[i].key, st ? "pending" : "stored",
               s->cases[i].text[0] ? s->cases[i].text : "(base)");
    }
}

/* ---- progress ---- */

static struct {
    double t0, last;
    int total, done, failed, stored, workers, tty;
} prog;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fmt_dur(double s, char *buf, size_t cap)
{
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
}

static void progress_draw(int final)
{
    double el = now_s() - prog.t0;
    double rate = el > 0 ? prog.done / el * 60 : 0;
    char eta[32] = "?", elp[32];
    int w = 30, fill = prog.total ? (int)((double)prog.done / prog.total * w) : w;
    if (prog.done > 0) fmt_dur(el / prog.done * (prog.total - prog.done), eta, sizeof eta);
    fmt_dur(el, elp, sizeof elp);
    if (prog.tty) {
        fprintf(stderr, "\r\033[K[");
        for (int i = 0; i < w; i++) fputc(i < fill ? '#' : '.', stderr);
        fprintf(stderr, "] %d/%d cases, %d failed, %.1f cases/min, %s elapsed, ETA %s%s", prog.done,
                prog.total, prog.failed, rate, elp, eta, final ? "\n" : "");
    } else {
        fprintf(stderr, "sweep: %d/%d cases, %d failed, %.1f cases/min, %s elapsed, ETA %s\n", prog.done,
                prog.total, prog.failed, rate, elp, eta);
    }
    fflush(stderr);
}

void hs__progress_start(hs_sweep *s, int total, int stored, int workers)
{
    memset(&prog, 0, sizeof prog);
    commit_s = 0;
    prog.t0 = prog.last = now_s();
    prog.total = total;
    prog.stored = stored;
    prog.workers = workers;
    prog.tty = isatty(2);
    if (!s->quiet && !s->no_progress)
        fprintf(stderr, "hetsim %s: %d cases, %d already stored, %d to run on %d worker%s into %s\n", s->cmd,
                total + stored, stored, total, workers, workers == 1 ? "" : "s", s->db);
}

void hs__progress_step(hs_sweep *s, int failed)
{
    double t = now_s();
    int step = prog.total / 10 > 0 ? prog.total / 10 : 1;
    prog.done++;
    prog.failed += failed != 0;
    if (s->quiet || s->no_progress) return;
    if (prog.tty ? t - prog.last >= 0.2 || prog.done == prog.total : prog.done % step == 0) {
        prog.last = t;
        progress_draw(0);
    }
}

void hs__progress_end(hs_sweep *s)
{
    double el = now_s() - prog.t0;
    if (s->quiet || s->no_progress) return;
    if (prog.tty) fprintf(stderr, "\n");
    /* Wall-clock throughput: stderr only, never the database. */
    fprintf(stderr, "hetsim %s: %d cases run (%d failed), %d already stored, %.2f s, %.1f cases/min on %d worker%s "
            "(%.2f s storing)\n",
            s->cmd, prog.done, prog.failed, prog.stored, el, el > 0 ? prog.done / el * 60 : 0, prog.workers,
            prog.workers == 1 ? "" : "s", commit_s);
}

/* ---- local execution: forked workers ---- */

typedef struct slot {
    pid_t pid;
    int pos;     /* index into pend */
} slot;

static int spawn(hs_sweep *s, int pos, pid_t *pid, hs_err *err)
{
    pid_t p;
    fflush(stdout);
    fflush(stderr);
    p = fork();
    if (p < 0) return hs_errf(err, HS_EIO, "fork: %s", strerror(errno));
    if (p == 0) {
        char msg[512];
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1) _exit(1);
#endif
        /* The child never touches the coordinator's SQLite handle. */
        _exit(hs__sweep_run_case(s, pos, msg, sizeof msg) & 0xff);
    }
    *pid = p;
    return 0;
}

int hs_sweep_exec(hs_sweep *s, int *n_failed, hs_err *err)
{
    int *pend = NULL, n_pend, n_stored, rc, next = 0, commit = 0, running = 0;
    int *state = NULL;   /* per pend entry: 0 waiting, 1 running, 2 done */
    int *codes = NULL, window;
    slot *slots = NULL;
    *n_failed = 0;
    if ((rc = hs__sweep_pending(s, &pend, &n_pend, &n_stored, err))) return rc;
    if (s->dry_run) {
        hs__sweep_list(s, pend, n_pend);
        free(pend);
        return 0;
    }
    if (!n_pend) {
        if (!s->quiet && !s->no_progress)
            fprintf(stderr, "hetsim %s: all %d cases are stored in %s\n", s->cmd, s->n_cases, s->db);
        free(pend);
        return 0;
    }
    if ((rc = hs__sweep_tmpdir(s, err))) goto out;
    state = calloc((size_t)n_pend, sizeof *state);
    codes = calloc((size_t)n_pend, sizeof *codes);
    slots = calloc((size_t)s->jobs, sizeof *slots);
    if (!state || !codes || !slots) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    window = s->window > 0 ? s->window : 4 * s->jobs;
    if (window < s->jobs) window = s->jobs;
    if ((rc = hs_sweepdb_wal(s->h, 1, err))) goto out;
    hs__progress_start(s, n_pend, n_stored, s->jobs < n_pend ? s->jobs : n_pend);
    while (commit < n_pend) {
        /* Fill free workers, staying within the window after the oldest
         * uncommitted case so held results stay bounded. */
        while (running < s->jobs && next < n_pend && next < commit + window) {
            int k = 0;
            while (slots[k].pid) k++;
            if ((rc = spawn(s, pend[next], &slots[k].pid, err))) goto out;
            slots[k].pos = next;
            state[next++] = 1;
            running++;
        }
        {
            int st;
            pid_t p = waitpid(-1, &st, 0);
            if (p < 0) {
                if (errno == EINTR) continue;
                rc = hs_errf(err, HS_EIO, "waitpid: %s", strerror(errno));
                goto out;
            }
            for (int k = 0; k < s->jobs; k++)
                if (slots[k].pid == p) {
                    int j = slots[k].pos;
                    slots[k].pid = 0;
                    running--;
                    state[j] = 2;
                    codes[j] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
                }
        }
        while (commit < n_pend && state[commit] == 2) {
            char msg[512] = "";
            int c = codes[commit];
            if (c) {
                char db[1200], log[1200];
                hs__sweep_case_paths(s, pend[commit], db, log, sizeof db);
                if (c > 128) snprintf(msg, sizeof msg, "worker killed by signal %d", c - 128);
                else snprintf(msg, sizeof msg, "exit %d", c);
                log_reason(log, msg, sizeof msg);
            }
            if ((rc = hs__sweep_commit(s, pend[commit], c, msg, err))) goto out;
            *n_failed += c != 0;
            hs__progress_step(s, c);
            commit++;
        }
    }
    hs__progress_end(s);
    rc = 0;
out:
    if (slots) {
        /* On error: stop the workers still running. */
        for (int k = 0; k < s->jobs; k++)
            if (slots[k].pid) {
                kill(slots[k].pid, SIGKILL);
                waitpid(slots[k].pid, NULL, 0);
                remove_case_files(s, pend[slots[k].pos]);
            }
        for (int j = commit; j < next; j++) remove_case_files(s, pend[j]);
    }
    hs__sweep_rmtmp(s);
    if (s->h && state) {
        hs_err e2 = {0};
        int r2 = hs_sweepdb_wal(s->h, 0, &e2);
        if (!rc && r2) {
            rc = r2;
            *err = e2;
        }
    }
    free(slots);
    free(codes);
    free(state);
    free(pend);
    return rc;
}

int hs_sweep_case_run(hs_sweep *s, int pos, int64_t *run_id, hs_err *err)
{
    int st, rc;
    *run_id = 0;
    if (!s->h && (rc = hs_db_open(&s->h, s->db, err))) return rc;
    return hs_sweepdb_state(s->h, s->cases[pos].key, &st, run_id, err);
}

int hs_sweep_case_metric(hs_sweep *s, int pos, const char *name, double *v, int *found, hs_err *err)
{
    int64_t run;
    int rc;
    *found = 0;
    if ((rc = hs_sweep_case_run(s, pos, &run, err))) return rc;
    if (!run) return 0;
    return hs_sweepdb_metric(s->h, run, name, v, found, err);
}

/* ---- the subcommand ---- */

static void sweep_usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim sweep [options]\n"
            "\n"
            "Runs every case of a grid or list of `hetsim run` configurations into one\n"
            "results database, in parallel on the local cores (or over MPI ranks with\n"
            "`mpirun -n N hetsim-mpi sweep ...`).  Cases already stored (same canonical\n"
            "configuration) are skipped, so an interrupted sweep resumes where it stopped.\n"
            "Cases are committed in list order, one transaction each: run ids and rows do\n"
            "not depend on the number of workers.\n"
            "\n"
            "options:\n");
    hs_sweep_options_help(fp);
    fprintf(fp,
            "\n"
            "Exit code: 0 every case stored, 3 some case failed (recorded in sweep_cases.error),\n"
            "2 bad input (nothing run), 1 a database or system error.\n"
            "\n"
            "example:\n"
            "  hetsim sweep --set workload.max_requests=300 --grid policy=vllm,sarathi \\\n"
            "               --grid workload.rate=1:8:1 --db results/sweep.db -j 2\n");
}

int hs__sweep_cli_parse(hs_sweep *s, int argc, char **argv, hs_err *err)
{
    int rc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            sweep_usage(stdout);
            return 1;
        }
        rc = hs_sweep_option(s, argc, argv, &i, err);
        if (rc < 0) return rc;
        if (rc == 0)
            return hs_errf(err, HS_EINVAL, "unknown option \"%s\" (see hetsim sweep --help)", argv[i]);
    }
    return hs_sweep_expand(s, err);
}

int hs_cli_sweep(int argc, char **argv)
{
    hs_err err = {0};
    hs_sweep *s = hs_sweep_create("sweep");
    int rc = 0, failed = 0;
    if (!s) {
        fprintf(stderr, "hetsim: out of memory\n");
        return 1;
    }
    rc = hs__sweep_cli_parse(s, argc, argv, &err);
    if (rc == 1) {
        hs_sweep_destroy(s);
        return 0;
    }
    if (rc) goto fail;
    if ((rc = hs_sweep_exec(s, &failed, &err))) goto fail;
    hs_sweep_destroy(s);
    return failed ? 3 : 0;
fail:
    fprintf(stderr, "hetsim: %s\n", err.msg[0] ? err.msg : hs_strerror(rc));
    hs_sweep_destroy(s);
    return hs_cli_exit_code(rc);
}
