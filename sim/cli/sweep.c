/* sweep.c - `hetsim sweep`: a grid or list of `hetsim run` cases run on the
 * local cores into one results database, resumable; see sweep.h for the
 * invariants (case keys, commits in case order).
 *
 * Workers are forked processes, each running one case into its own
 * temporary database (no SQLite lock is shared while simulating); the
 * coordinator alone writes the target database.  Workers die with the
 * coordinator (PR_SET_PDEATHSIG on Linux), so a killed sweep leaves no
 * stray writer.  The case list (options, grid expansion, case keys) is
 * built in sweep_cases.c. */
#include "cli/sweep.h"

#include <errno.h>
#include <fcntl.h>
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

#include "cli/cli.h"
#include "cli/sweep_int.h"
#include "core/str.h"
#include "out/db.h"
#include "out/sweepdb.h"
#include "core/time.h"

char *mkdtemp(char *tmpl);  /* POSIX 2008; not declared under strict C11 headers */

static double commit_s;     /* wall seconds the coordinator spent storing cases */

hs_sweep *hs_sweep_create(const char *cmd)
{
    hs_sweep *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cmd = cmd;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    s->jobs = n > 0 ? (int)n : 1;
    return s;
}

void hs_sweep_destroy(hs_sweep *s)
{
    if (!s) return;
    hs_db_close(s->h);
    hs_strs_free(s->base, s->n_base);
    for (int i = 0; i < s->n_axes; i++) hs_strs_free(s->axes[i].vals, s->axes[i].n);
    free(s->axes);
    hs_strs_free(s->lists, s->n_lists);
    for (int i = 0; i < s->n_cases; i++) {
        hs_strs_free(s->cases[i].sets, s->cases[i].n_sets);
        free(s->cases[i].params);
        free(s->cases[i].text);
        free(s->cases[i].check);
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
    double t0 = hs_wall_s();
    if (rc == 0) ret = hs_sweepdb_merge(s->h, db, &row, s->db, &run, err);
    else ret = hs_sweepdb_fail(s->h, &row, err);
    commit_s += hs_wall_s() - t0;
    /* Another sweep on the same file stored it first: it is ours too. */
    if (ret == HS_ESTATE && strstr(err->msg, "already stored")) ret = hs_sweepdb_members_add(s->h, &row, 1, err);
    if (!ret) remove_case_files(s, pos);
    if (!ret && rc) {
        /* The first case with a given reason is printed; later ones are
         * counted and summed up at the end (hs__sweep_fail_summary). */
        int k = 0, shown = 0;
        while (k < s->n_fails && strcmp(s->fails[k].msg, msg)) k++;
        if (k == s->n_fails && k < (int)(sizeof s->fails / sizeof s->fails[0])) {
            snprintf(s->fails[k].msg, sizeof s->fails[k].msg, "%s", msg);
            s->fails[k].count = 0;
            s->fails[k].first = pos;
            s->n_fails++;
        }
        if (k < s->n_fails) shown = s->fails[k].count++ > 0;
        if (!shown && !s->quiet)
            fprintf(stderr, "%shetsim %s: case %d (%s) failed: %s\n", isatty(2) ? "\r\033[K" : "", s->cmd,
                    pos + 1, c->text[0] ? c->text : "base", msg);
    }
    return ret;
}

int hs__sweep_precheck(const hs_sweep *s, hs_err *err)
{
    int same = 1;
    if (!s->n_cases) return 0;
    for (int i = 0; i < s->n_cases; i++) {
        if (!s->cases[i].check) return 0;
        same &= !strcmp(s->cases[i].check, s->cases[0].check);
    }
    if (s->n_cases == 1) return hs_errf(err, HS_EINVAL, "%s", s->cases[0].check);
    if (same)
        return hs_errf(err, HS_EINVAL, "every case (%d): %s", s->n_cases, s->cases[0].check);
    return hs_errf(err, HS_EINVAL, "every case (%d) has a configuration error; case 1 (%s): %s", s->n_cases,
                   s->cases[0].text[0] ? s->cases[0].text : "base", s->cases[0].check);
}

int hs__sweep_pending(hs_sweep *s, int **pend, int *n_pend, int *n_stored, hs_err *err)
{
    int rc;
    *pend = NULL;
    *n_pend = *n_stored = 0;
    if (!s->dry_run && (rc = hs__sweep_precheck(s, err))) return rc;
    /* A database it cannot create or write is bad input: one line, exit 2,
     * as `hetsim run` and `hetsim search` say it (not SQLite's words). */
    if (!s->dry_run && !s->h && (rc = hs_db_check_writable(s->db, err))) return rc;
    *pend = malloc((size_t)(s->n_cases ? s->n_cases : 1) * sizeof **pend);
    if (!*pend) return hs_errf(err, HS_ENOMEM, "out of memory");
    /* A dry run creates nothing: without a database every case is pending. */
    if (s->dry_run && !s->h && access(s->db, F_OK) != 0) {
        for (int i = 0; i < s->n_cases; i++) (*pend)[(*n_pend)++] = i;
        return 0;
    }
    if (!s->h && (rc = hs_db_open(&s->h, s->db, err))) goto fail;
    if (!s->dry_run && (rc = hs_sweepdb_members_init(s->h, err))) goto fail;
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
    /* Cases stored earlier, by this sweep or another: this sweep asked for
     * them, so they are its members too. */
    if (!s->dry_run && *n_stored) {
        hs_case_row *rows = malloc((size_t)*n_stored * sizeof *rows);
        int k = 0, p = 0;
        if (!rows) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto fail;
        }
        for (int i = 0; i < s->n_cases; i++) {
            if (p < *n_pend && (*pend)[p] == i) {
                p++;
                continue;
            }
            rows[k].key = s->cases[i].key;
            rows[k].sweep = s->name;
            rows[k].idx = i;
            rows[k].params = s->cases[i].params;
            rows[k].error = NULL;
            k++;
        }
        rc = hs_sweepdb_members_add(s->h, rows, k, err);
        free(rows);
        if (rc) goto fail;
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

static void fmt_dur(double s, char *buf, size_t cap)
{
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
}

static void progress_draw(int final)
{
    double el = hs_wall_s() - prog.t0;
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
    prog.t0 = prog.last = hs_wall_s();
    prog.total = total;
    prog.stored = stored;
    prog.workers = workers;
    prog.tty = isatty(2);
    s->n_fails = 0;
    if (!s->quiet && !s->no_progress)
        fprintf(stderr, "hetsim %s: %d cases, %d already stored, %d to run on %d worker%s into %s\n", s->cmd,
                total + stored, stored, total, workers, workers == 1 ? "" : "s", s->db);
}

void hs__progress_step(hs_sweep *s, int failed)
{
    double t = hs_wall_s();
    int step = prog.total / 10 > 0 ? prog.total / 10 : 1;
    prog.done++;
    prog.failed += failed != 0;
    if (s->quiet || s->no_progress) return;
    if (prog.tty ? t - prog.last >= 0.2 || prog.done == prog.total : prog.done % step == 0) {
        prog.last = t;
        progress_draw(0);
    }
}

/* One line per failure reason several cases shared. */
static void fail_summary(hs_sweep *s)
{
    for (int k = 0; k < s->n_fails; k++)
        if (s->fails[k].count > 1)
            fprintf(stderr, "hetsim %s: %d cases failed: %s (first: case %d; all in sweep_cases.error)\n", s->cmd,
                    s->fails[k].count, s->fails[k].msg, s->fails[k].first + 1);
    s->n_fails = 0;
}

void hs__progress_end(hs_sweep *s)
{
    double el = hs_wall_s() - prog.t0;
    if (!s->quiet) fail_summary(s);
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

/* SIGINT / SIGTERM during a sweep: stop at the next step, kill the
 * workers and remove the scratch folder (committed cases stay; a rerun
 * resumes).  SIGKILL cannot be caught: its scratch stays until reboot. */
static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
    g_stop = sig;
}

static int spawn(hs_sweep *s, int pos, pid_t *pid, hs_err *err)
{
    pid_t p;
#ifdef __linux__
    pid_t parent = getpid();
#endif
    fflush(stdout);
    fflush(stderr);
    p = fork();
    if (p < 0) return hs_errf(err, HS_EIO, "fork: %s", strerror(errno));
    if (p == 0) {
        char msg[512];
        /* Workers die of the signals the coordinator only notes. */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* The coordinator died before prctl: the orphan may be adopted by
         * a subreaper, not only by pid 1, so compare with the real parent. */
        if (getppid() != parent) _exit(1);
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
    int *codes = NULL, window, handlers = 0;
    struct sigaction old_int, old_term;
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
    {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop;   /* no SA_RESTART: waitpid returns EINTR */
        sigemptyset(&sa.sa_mask);
        g_stop = 0;
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        handlers = 1;
    }
    hs__progress_start(s, n_pend, n_stored, s->jobs < n_pend ? s->jobs : n_pend);
    while (commit < n_pend) {
        if (g_stop) {
            rc = hs_errf(err, HS_ESTATE, "interrupted by signal %d: %d of %d cases stored; run the sweep again to resume",
                         (int)g_stop, n_stored + commit, s->n_cases);
            goto out;
        }
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
    if (handlers) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
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
            "  hetsim sweep --set workload.max_requests=300 --grid tp=1,2,4 \\\n"
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
