/* sweep_mpi.c - `hetsim sweep` over MPI ranks (the hetsim-mpi binary, built
 * only when CMake finds MPI; the plain hetsim never needs it).
 *
 *   mpirun -n N hetsim-mpi sweep [the options of hetsim sweep]
 *
 * Every rank parses the same arguments into the same case list.  Rank 0
 * alone opens the results database: it finds the pending cases and
 * broadcasts them; pending case j is simulated by rank j mod N, in process,
 * into that rank's private temporary database.  Ranks > 0 send the finished
 * file's bytes (plus exit code and failure text) to rank 0, which copies
 * cases into the database in pending-list order through the same
 * hs__sweep_commit() as the local sweep.  The database therefore equals a
 * single-process sweep's (INV-SWEEP-3), and ranks on other hosts need only
 * the model and profile files, not the database.  Rank 0 simulates its own
 * share between receiving messages (senders use non-blocking sends, so they
 * never wait for it).
 *
 * A rank that crashes takes the job down (mpirun aborts); the database then
 * holds a prefix of the cases and a rerun resumes. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/sweep_int.h"
#include "out/sweepdb.h"

#define TAG_CASE 7

/* Reads a whole file; NULL on error. */
static char *slurp(const char *path, int64_t *len)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!fp) return NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, fp) == (size_t)n) {
        *len = n;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    return buf;
}

/* Message: int64 j, rc, msg_len, file_len; then msg bytes, file bytes. */
static char *pack(int64_t j, int64_t rc, const char *msg, const char *file, int64_t flen, int *total)
{
    int64_t hdr[4] = {j, rc, (int64_t)strlen(msg), flen};
    size_t n = sizeof hdr + (size_t)hdr[2] + (size_t)flen;
    char *b = malloc(n);
    if (!b) return NULL;
    memcpy(b, hdr, sizeof hdr);
    memcpy(b + sizeof hdr, msg, (size_t)hdr[2]);
    if (flen) memcpy(b + sizeof hdr + hdr[2], file, (size_t)flen);
    *total = (int)n;
    return b;
}

typedef struct coord {
    hs_sweep *s;
    int *pend, n_pend, commit, failed;
    int *done, *codes;
    char **msgs;
} coord;

/* Stores every finished case at the head of the pending list. */
static int commit_ready(coord *c, hs_err *err)
{
    int rc;
    while (c->commit < c->n_pend && c->done[c->commit]) {
        int j = c->commit;
        if ((rc = hs__sweep_commit(c->s, c->pend[j], c->codes[j], c->msgs[j] ? c->msgs[j] : "", err)))
            return rc;
        c->failed += c->codes[j] != 0;
        hs__progress_step(c->s, c->codes[j]);
        free(c->msgs[j]);
        c->msgs[j] = NULL;
        c->commit++;
    }
    return 0;
}

/* Receives one case message (already probed) and writes its file. */
static int receive(coord *c, MPI_Status *st, hs_err *err)
{
    int count;
    int64_t hdr[4];
    char *b;
    MPI_Get_count(st, MPI_BYTE, &count);
    b = malloc((size_t)count);
    if (!b) return hs_errf(err, HS_ENOMEM, "out of memory");
    MPI_Recv(b, count, MPI_BYTE, st->MPI_SOURCE, TAG_CASE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    memcpy(hdr, b, sizeof hdr);
    if (count < (int)sizeof hdr || hdr[0] < 0 || hdr[0] >= c->n_pend ||
        (int64_t)sizeof hdr + hdr[2] + hdr[3] != count) {
        free(b);
        return hs_errf(err, HS_ESTATE, "rank %d sent a malformed case message", st->MPI_SOURCE);
    }
    int j = (int)hdr[0];
    c->codes[j] = (int)hdr[1];
    c->msgs[j] = malloc((size_t)hdr[2] + 1);
    if (c->msgs[j]) {
        memcpy(c->msgs[j], b + sizeof hdr, (size_t)hdr[2]);
        c->msgs[j][hdr[2]] = '\0';
    }
    if (c->codes[j] == 0) {
        char db[1200], log[1200];
        FILE *fp;
        hs__sweep_case_paths(c->s, c->pend[j], db, log, sizeof db);
        fp = fopen(db, "wb");
        if (!fp || fwrite(b + sizeof hdr + hdr[2], 1, (size_t)hdr[3], fp) != (size_t)hdr[3] ||
            fclose(fp) != 0) {
            free(b);
            return hs_errf(err, HS_EIO, "%s: cannot write the case received from rank %d", db, st->MPI_SOURCE);
        }
    }
    free(b);
    c->done[j] = 1;
    return 0;
}

static int drain(coord *c, int block, hs_err *err)
{
    int flag, rc;
    MPI_Status st;
    if (block) {
        MPI_Probe(MPI_ANY_SOURCE, TAG_CASE, MPI_COMM_WORLD, &st);
        if ((rc = receive(c, &st, err))) return rc;
    }
    while (MPI_Iprobe(MPI_ANY_SOURCE, TAG_CASE, MPI_COMM_WORLD, &flag, &st) == MPI_SUCCESS && flag)
        if ((rc = receive(c, &st, err))) return rc;
    return commit_ready(c, err);
}

int hs_cli_sweep_mpi(int argc, char **argv)
{
    hs_err err = {0};
    hs_sweep *s = NULL;
    int rank, size, rc, ok, n_pend = 0, n_stored = 0, *pend = NULL;
    coord c;
    memset(&c, 0, sizeof c);
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    s = hs_sweep_create("sweep");
    if (!s) {
        fprintf(stderr, "hetsim: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Every rank parses the same arguments, so all agree on the cases (and
     * fail alike on bad input; only rank 0 reports it). */
    rc = hs__sweep_cli_parse(s, argc, argv, &err);
    if (rc == 1 || (rc && rank != 0)) {
        hs_sweep_destroy(s);
        MPI_Finalize();
        return rc == 1 ? 0 : hs_cli_exit_code(rc);
    }
    if (rank == 0 && !rc) rc = hs__sweep_pending(s, &pend, &n_pend, &n_stored, &err);
    if (rank == 0 && !rc && s->dry_run) {
        hs__sweep_list(s, pend, n_pend);
        n_pend = 0;
    }
    ok = rc == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
        if (rank == 0) fprintf(stderr, "hetsim: %s\n", err.msg[0] ? err.msg : hs_strerror(rc));
        free(pend);
        hs_sweep_destroy(s);
        MPI_Finalize();
        return rank == 0 ? hs_cli_exit_code(rc) : 1;
    }
    MPI_Bcast(&n_pend, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank != 0) pend = malloc((size_t)(n_pend ? n_pend : 1) * sizeof *pend);
    if (!pend) MPI_Abort(MPI_COMM_WORLD, 1);
    if (n_pend) MPI_Bcast(pend, n_pend, MPI_INT, 0, MPI_COMM_WORLD);
    if (!n_pend) {
        if (rank == 0 && !s->quiet && !s->dry_run)
            fprintf(stderr, "hetsim sweep: all %d cases are stored in %s\n", s->n_cases, s->db);
        goto done;
    }
    if ((rc = hs__sweep_tmpdir(s, &err))) {
        fprintf(stderr, "hetsim: rank %d: %s\n", rank, err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        c.s = s;
        c.pend = pend;
        c.n_pend = n_pend;
        c.done = calloc((size_t)n_pend, sizeof *c.done);
        c.codes = calloc((size_t)n_pend, sizeof *c.codes);
        c.msgs = calloc((size_t)n_pend, sizeof *c.msgs);
        if (!c.done || !c.codes || !c.msgs) MPI_Abort(MPI_COMM_WORLD, 1);
        if ((rc = hs_sweepdb_wal(s->h, 1, &err))) {
            fprintf(stderr, "hetsim: %s\n", err.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        hs__progress_start(s, n_pend, n_stored, size);
        for (int j = 0; j < n_pend; j += size) {
            char msg[512];
            if ((rc = drain(&c, 0, &err))) break;
            c.codes[j] = hs__sweep_run_case(s, pend[j], msg, sizeof msg);
            c.msgs[j] = c.codes[j] ? strdup(msg) : NULL;
            c.done[j] = 1;
            if ((rc = commit_ready(&c, &err))) break;
        }
        while (!rc && c.commit < n_pend) rc = drain(&c, 1, &err);
        if (rc) {
            fprintf(stderr, "hetsim: %s\n", err.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (hs_sweepdb_wal(s->h, 0, &err)) fprintf(stderr, "hetsim: warning: %s\n", err.msg);
        hs__progress_end(s);
        for (int j = 0; j < n_pend; j++) free(c.msgs[j]);
        free(c.msgs);
        free(c.codes);
        free(c.done);
    } else {
        MPI_Request *reqs = calloc((size_t)n_pend, sizeof *reqs);
        char **bufs = calloc((size_t)n_pend, sizeof *bufs);
        int nr = 0;
        if (!reqs || !bufs) MPI_Abort(MPI_COMM_WORLD, 1);
        for (int j = rank; j < n_pend; j += size) {
            char msg[512] = "", db[1200], log[1200];
            int64_t flen = 0;
            char *file = NULL;
            int code = hs__sweep_run_case(s, pend[j], msg, sizeof msg), total = 0;
            hs__sweep_case_paths(s, pend[j], db, log, sizeof db);
            if (code == 0 && !(file = slurp(db, &flen))) {
                code = 1;
                snprintf(msg, sizeof msg, "rank %d: cannot read %.400s", rank, db);
            }
            bufs[nr] = pack(j, code, code ? msg : "", file, code ? 0 : flen, &total);
            free(file);
            unlink(db);
            unlink(log);
            if (!bufs[nr]) MPI_Abort(MPI_COMM_WORLD, 1);
            MPI_Isend(bufs[nr], total, MPI_BYTE, 0, TAG_CASE, MPI_COMM_WORLD, &reqs[nr]);
            nr++;
            /* Free the buffers of sends that completed. */
            for (int k = 0; k < nr; k++) {
                int flag = 0;
                if (!bufs[k]) continue;
                MPI_Test(&reqs[k], &flag, MPI_STATUS_IGNORE);
                if (flag) {
                    free(bufs[k]);
                    bufs[k] = NULL;
                }
            }
        }
        MPI_Waitall(nr, reqs, MPI_STATUSES_IGNORE);
        for (int k = 0; k < nr; k++) free(bufs[k]);
        free(bufs);
        free(reqs);
    }
    hs__sweep_rmtmp(s);
done:
    MPI_Barrier(MPI_COMM_WORLD);
    rc = c.failed;
    free(pend);
    hs_sweep_destroy(s);
    MPI_Finalize();
    return rank == 0 && rc ? 3 : 0;
}
