/* vidur_all.c - hs_vidur_import_all: every Vidur table under a folder of
 * either layout (described in vidur.c), imported with lm_head rows and
 * written as <outdir>/<our gpu>/<our model>/; see table.h.  Each table is
 * built by hs__vidur_import_src (vidur.c, shared through vidur_int.h).
 *
 * Current layout: every compute/<gpu>/<org>/<model>/ holding an mlp.csv is
 * one table (hs_vidur_import_ex with the device's default network); a
 * device that has network/<its default>/ but no compute/<device>/ gets a
 * collectives-only table <outdir>/<our gpu>/_network/ (H100: Vidur measured
 * its NCCL timings but no kernels).  Old
 * layout (no compute/): per <gpu>/, a mixed <gpu>/mlp.csv gives one table per
 * distinct shape, and every <gpu>/[<org>/]<model>/mlp.csv one table.  The
 * rows of a mixed mlp.csv become the model of models/ with their shape
 * (n_embd, heads, KV heads, FFN width, gating equal; vocabulary within 5%,
 * because Vidur pads it: 32000 -> 32768); shapes no model has are reported
 * in the log and skipped.
 *
 * No partial state: every table is built whole in memory, and checked
 * against the others (two sources landing on one <gpu>/<model> are an
 * error), before the first is written.  Tables and log lines keep the order
 * of the walk (sorted folder names, shapes in the order they first appear),
 * so the log is deterministic. */
#include "perf/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "perf/table_int.h"
#include "perf/vidur_int.h"

/* A table to write, or (t NULL) a line to log. */
typedef struct job {
    hs_ptable *t;
    char what[704];           /* Vidur source of the table, or the line */
    hs_vidur_stats st;
} job;

typedef struct jobs {
    job *v;
    size_t n, cap;
} jobs;

static void jobs_free(jobs *J)
{
    for (size_t i = 0; i < J->n; i++) hs_ptable_destroy(J->v[i].t);
    free(J->v);
    memset(J, 0, sizeof *J);
}

/* Takes t (destroyed on failure). */
static int jobs_add(jobs *J, hs_ptable *t, const hs_vidur_stats *st, const char *what, hs_err *err)
{
    job *j;
    if (hs_vec_reserve((void **)&J->v, &J->cap, J->n + 1, sizeof *J->v, 16)) {
        hs_ptable_destroy(t);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    j = &J->v[J->n++];
    memset(j, 0, sizeof *j);
    j->t = t;
    if (st) j->st = *st;
    snprintf(j->what, sizeof j->what, "%s", what);
    return 0;
}

static int collect_current(jobs *J, const char *dir, hs_err *err)
{
    char path[HS__VIDUR_PATH_CAP], **gpus = NULL, **orgs = NULL, **models = NULL;
    int ng = 0, no = 0, nm = 0, rc;
    if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/compute", dir)) || (rc = hs__subdirs(path, &gpus, &ng, err)))
        return rc;
    for (int g = 0; !rc && g < ng; g++) {
        if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/compute/%s", dir, gpus[g])) ||
            (rc = hs__subdirs(path, &orgs, &no, err)))
            break;
        for (int o = 0; !rc && o < no; o++) {
            if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/compute/%s/%s", dir, gpus[g], orgs[o])) ||
                (rc = hs__subdirs(path, &models, &nm, err)))
                break;
            for (int k = 0; !rc && k < nm; k++) {
                char mp[600], what[700];
                hs_ptable *t = NULL;
                hs_vidur_stats st;
                if ((rc = hs__vidur_fmt(mp, sizeof mp, err, "%s/%s", orgs[o], models[k])) ||
                    (rc = hs__vidur_fmt(path, sizeof path, err, "%s/compute/%s/%s/mlp.csv", dir, gpus[g], mp)))
                    break;
                if (!hs__is_file(path)) continue;
                if ((rc = hs_vidur_import_ex(&t, dir, gpus[g], mp, "", HS_VIDUR_LM_HEAD, &st, err))) break;
                snprintf(what, sizeof what, "%s/%s", gpus[g], mp);
                rc = jobs_add(J, t, &st, what, err);
            }
            hs__names_free(models, nm);
            models = NULL;
        }
        hs__names_free(orgs, no);
        orgs = NULL;
    }
    hs__names_free(gpus, ng);
    return rc;
}

/* The model of models/ whose shape is sh (vocabulary within 5%, nearest
 * first, then by name); HS_ENOTFOUND when none.  Model files that do not
 * load cannot match. */
static int shape_model(const hs__vidur_shape *sh, char *name, size_t cap, hs_err *err)
{
    char dir[HS__VIDUR_PATH_CAP], **files = NULL;
    int n = 0, rc, best = -1;
    long bestd = 0;
    if ((rc = hs__vidur_fmt(dir, sizeof dir, err, "%s/models", hs_data_root())) ||
        (rc = hs__list_files(dir, "", ".json", &files, &n, err)))
        return rc;
    for (int i = 0; i < n; i++) {
        hs_model md;
        hs_err e2 = {0};
        char path[HS__VIDUR_PATH_CAP];
        long d = 0;
        if (hs__vidur_fmt(path, sizeof path, NULL, "%s/%s", dir, files[i]) || hs_model_load(&md, path, &e2)) continue;
        if (md.hidden != sh->v[HS__VIDUR_SH_HIDDEN] || md.heads != sh->v[HS__VIDUR_SH_HEADS] ||
            md.kv_heads != sh->v[HS__VIDUR_SH_KV])
            continue;
        if (sh->v[HS__VIDUR_SH_FFN] >= 0 && md.ffn != sh->v[HS__VIDUR_SH_FFN]) continue;
        if (sh->v[HS__VIDUR_SH_GATED] >= 0 && !!md.ffn_gated != sh->v[HS__VIDUR_SH_GATED]) continue;
        if (sh->v[HS__VIDUR_SH_VOCAB] >= 0) {
            d = labs(sh->v[HS__VIDUR_SH_VOCAB] - (long)md.vocab);
            if (d * 20 > (long)md.vocab) continue;
        }
        if (best < 0 || d < bestd) {
            best = i;
            bestd = d;
            snprintf(name, cap, "%s", md.name);
        }
    }
    hs__names_free(files, n);
    return best < 0 ? HS_ENOTFOUND : 0;
}

/* The old layout's network files of one GPU folder. */
static int old_net(char nf[2][HS__VIDUR_PATH_CAP], const char *gpu, hs_err *err)
{
    int rc = hs__vidur_fmt(nf[0], HS__VIDUR_PATH_CAP, err, "%s/all_reduce.csv", gpu);
    return rc ? rc : hs__vidur_fmt(nf[1], HS__VIDUR_PATH_CAP, err, "%s/send_recv.csv", gpu);
}

/* <gpu>/mlp.csv holding several models. */
static int collect_mixed(jobs *J, const char *dir, const char *gpu, hs_err *err)
{
    char path[HS__VIDUR_PATH_CAP], mlp[HS__VIDUR_PATH_CAP], attn[HS__VIDUR_PATH_CAP], nf[2][HS__VIDUR_PATH_CAP];
    char *attn_list[1];
    hs__vidur_shape *sh = NULL;
    size_t *rows = NULL, n = 0;
    int rc;
    hs__vidur_src s;
    if ((rc = hs__vidur_fmt(mlp, sizeof mlp, err, "%s/mlp.csv", gpu)) ||
        (rc = hs__vidur_fmt(attn, sizeof attn, err, "%s/attention.csv", gpu)) ||
        (rc = old_net(nf, gpu, err)) || (rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s", dir, mlp)) ||
        (rc = hs__vidur_mlp_shapes(path, &sh, &rows, &n, err)))
        return rc;
    attn_list[0] = attn;
    if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s", dir, attn))) goto out;
    s = (hs__vidur_src){.root = dir, .gpu = gpu, .layout = ", old layout", .mlp = mlp, .attn = attn_list,
                        .n_attn = hs__is_file(path), .net = {nf[0], nf[1]}};
    for (size_t i = 0; !rc && i < n; i++) {
        char model[48], note[96], what[700];
        hs_ptable *t = NULL;
        hs_vidur_stats st;
        rc = shape_model(&sh[i], model, sizeof model, err);
        if (rc == HS_ENOTFOUND) {
            char shs[200];
            hs__vidur_shape_str(&sh[i], shs, sizeof shs);
            snprintf(what, sizeof what, "%.300s: %zu row%s of shape %s skipped: no model in models/ has that shape",
                     mlp, rows[i], rows[i] == 1 ? "" : "s", shs);
            rc = jobs_add(J, NULL, NULL, what, err);
            continue;
        }
        if (rc) break;
        snprintf(note, sizeof note, " (rows of %s's shape)", model);
        s.model = model;
        s.mlp_note = note;
        s.filter = &sh[i];
        if ((rc = hs__vidur_import_src(&t, &s, HS_VIDUR_LM_HEAD, &st, err))) break;
        snprintf(what, sizeof what, "%.600s [%s]", mlp, model);
        rc = jobs_add(J, t, &st, what, err);
    }
out:
    free(sh);
    free(rows);
    return rc;
}

/* <gpu>/<mp>/mlp.csv holding one model. */
static int collect_folder(jobs *J, const char *dir, const char *gpu, const char *mp, hs_err *err)
{
    char path[HS__VIDUR_PATH_CAP], mlp[HS__VIDUR_PATH_CAP], attn[2][HS__VIDUR_PATH_CAP], nf[2][HS__VIDUR_PATH_CAP];
    char *attn_list[2], what[700];
    hs_ptable *t = NULL;
    hs_vidur_stats st;
    int rc, na = 0;
    hs__vidur_src s;
    if ((rc = hs__vidur_fmt(mlp, sizeof mlp, err, "%s/%s/mlp.csv", gpu, mp)) ||
        (rc = hs__vidur_fmt(attn[0], sizeof attn[0], err, "%s/%s/attention.csv", gpu, mp)) ||
        (rc = hs__vidur_fmt(attn[1], sizeof attn[1], err, "%s/attention.csv", gpu)) || (rc = old_net(nf, gpu, err)))
        return rc;
    for (int i = 0; i < 2; i++) {
        if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s", dir, attn[i]))) return rc;
        if (hs__is_file(path)) attn_list[na++] = attn[i];
    }
    s = (hs__vidur_src){.root = dir, .gpu = gpu, .model_path = mp, .layout = ", old layout", .mlp = mlp,
                        .mlp_note = "", .attn = attn_list, .n_attn = na, .net = {nf[0], nf[1]}};
    if ((rc = hs__vidur_import_src(&t, &s, HS_VIDUR_LM_HEAD, &st, err))) return rc;
    snprintf(what, sizeof what, "%s/%s", gpu, mp);
    return jobs_add(J, t, &st, what, err);
}

static int collect_old(jobs *J, const char *dir, hs_err *err)
{
    char path[HS__VIDUR_PATH_CAP], **gpus = NULL;
    int ng = 0, rc;
    if ((rc = hs__subdirs(dir, &gpus, &ng, err))) return rc;
    for (int g = 0; !rc && g < ng; g++) {
        char **sub = NULL;
        int ns = 0;
        if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s/mlp.csv", dir, gpus[g]))) break;
        if (hs__is_file(path) && (rc = collect_mixed(J, dir, gpus[g], err))) break;
        if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s", dir, gpus[g])) ||
            (rc = hs__subdirs(path, &sub, &ns, err)))
            break;
        for (int a = 0; !rc && a < ns; a++) {
            char **sub2 = NULL;
            int n2 = 0;
            if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s/%s/mlp.csv", dir, gpus[g], sub[a]))) break;
            if (hs__is_file(path)) {
                rc = collect_folder(J, dir, gpus[g], sub[a], err);
                continue;
            }
            if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s/%s", dir, gpus[g], sub[a])) ||
                (rc = hs__subdirs(path, &sub2, &n2, err)))
                break;
            for (int b = 0; !rc && b < n2; b++) {
                char mp[600];
                if ((rc = hs__vidur_fmt(mp, sizeof mp, err, "%s/%s", sub[a], sub2[b])) ||
                    (rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s/%s/mlp.csv", dir, gpus[g], mp)))
                    break;
                if (hs__is_file(path)) rc = collect_folder(J, dir, gpus[g], mp, err);
            }
            hs__names_free(sub2, n2);
        }
        hs__names_free(sub, ns);
    }
    hs__names_free(gpus, ng);
    return rc;
}

/* Collectives-only tables of the known devices with a network folder and
 * no compute folder (current layout). */
static int collect_network(jobs *J, const char *dir, hs_err *err)
{
    const char *gpu, *net;
    int rc = 0;
    for (int i = 0; !rc && (gpu = hs__vidur_known_gpu(i, &net)); i++) {
        char path[HS__VIDUR_PATH_CAP], what[704];
        hs_ptable *t = NULL;
        hs_vidur_stats st;
        if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/compute/%s", dir, gpu))) break;
        if (hs__is_dir(path)) continue;
        if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/network/%s", dir, net))) break;
        if (!hs__is_dir(path)) continue;
        if ((rc = hs__vidur_import_net(&t, dir, gpu, net, &st, err)) || !t) continue;
        snprintf(what, sizeof what, "network/%s", net);
        rc = jobs_add(J, t, &st, what, err);
    }
    return rc;
}

static void log_job(FILE *log, const job *j, const char *dst)
{
    const hs_ptable *t = j->t;
    const hs_vidur_stats *s = &j->st;
    static const char *const kind[2] = {"all-reduce", "send/recv"};
    static const char *const file[2] = {"all_reduce.csv", "send_recv.csv"};
    const char *sep = "; skipped ";
    fprintf(log, "%s -> %s: %zu dense, %zu decode, %zu prefill, %zu all-reduce, %zu send/recv rows", j->what, dst,
            t->n_dense, t->n_attn[0], t->n_attn[1], t->n_comm[0], t->n_comm[1]);
    if (s->lm_head) fprintf(log, "; %zu lm_head rows synthesised from mlp_up", s->lm_head);
    for (int k = 0; k < 2; k++)
        if (s->other[k]) {
            fprintf(log, "%s%zu row%s of another collective (%s) in %s", sep, s->other[k], s->other[k] == 1 ? "" : "s",
                    s->other_name[k], file[k]);
            sep = ", ";
        }
    for (int k = 0; k < 2; k++)
        if (s->spans_nodes[k]) {
            fprintf(log, "%s%zu %s row%s spanning nodes", sep, s->spans_nodes[k], kind[k],
                    s->spans_nodes[k] == 1 ? "" : "s");
            sep = ", ";
        }
    if (s->empty) {
        fprintf(log, "%s%zu collective row%s of 0 bytes or 1 GPU", sep, s->empty, s->empty == 1 ? "" : "s");
        sep = ", ";
    }
    if (s->zero_ms) fprintf(log, "%s%zu time%s of 0 ms (below the profiler's resolution)", sep, s->zero_ms,
                            s->zero_ms == 1 ? "" : "s");
    fputc('\n', log);
}

int hs_vidur_import_all(const char *vidur_dir, const char *outdir, FILE *log, hs_err *err)
{
    jobs J = {0};
    char path[HS__VIDUR_PATH_CAP];
    size_t tables = 0;
    int rc;
    if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/compute", vidur_dir))) return rc;
    if (hs__is_dir(path)) {
        rc = collect_current(&J, vidur_dir, err);
        if (!rc) rc = collect_network(&J, vidur_dir, err);
    }
    else if (hs__is_dir(vidur_dir)) rc = collect_old(&J, vidur_dir, err);
    else rc = hs_errf(err, HS_ENOTFOUND, "%s: no such folder", vidur_dir);
    for (size_t i = 0; !rc && i < J.n; i++) {
        if (!J.v[i].t) continue;
        tables++;
        for (size_t k = 0; !rc && k < i; k++)
            if (J.v[k].t && !strcmp(J.v[k].t->meta.gpu, J.v[i].t->meta.gpu) &&
                !strcmp(J.v[k].t->meta.model, J.v[i].t->meta.model))
                rc = hs_errf(err, HS_EINVAL, "%s: %s and %s both import as %s/%s", vidur_dir, J.v[k].what,
                             J.v[i].what, J.v[i].t->meta.gpu, J.v[i].t->meta.model);
    }
    if (!rc && !tables)
        rc = hs_errf(err, HS_ENOTFOUND,
                     "%s: no Vidur profiles (compute/<gpu>/<org>/<model>/mlp.csv, <gpu>/mlp.csv or <gpu>/[<org>/]<model>/mlp.csv)",
                     vidur_dir);
    /* Every table is whole in memory: now write them. */
    for (size_t i = 0; !rc && i < J.n; i++) {
        char dst[HS__VIDUR_PATH_CAP];
        if (!J.v[i].t) {
            if (log) fprintf(log, "%s\n", J.v[i].what);
            continue;
        }
        if ((rc = hs__vidur_fmt(dst, sizeof dst, err, "%s/%s/%s", outdir, J.v[i].t->meta.gpu,
                                J.v[i].t->meta.model[0] ? J.v[i].t->meta.model : "_network")) ||
            (rc = hs_ptable_write(J.v[i].t, dst, err)))
            break;
        if (log) log_job(log, &J.v[i], dst);
    }
    jobs_free(&J);
    return rc;
}
