/* cluster.c - cluster topology loading: files (with "repeat" on a node) and
 * the shorthand 4x8xh100-sxm-80g; see hw.h for the invariants. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/conf.h"
#include "hw/hw.h"

void hs_cluster_destroy(hs_cluster *c)
{
    if (!c) return;
    free(c->types);
    free(c->gpu_type);
    free(c->gpu_node);
    free(c->node_name);
    free(c->bw);
    free(c->lat);
    free(c);
}

double hs_cluster_price(const hs_cluster *c, const int *ids, int n)
{
    double p = 0;
    if (!ids) {
        for (int i = 0; i < c->n_gpus; i++) p += hs_cluster_gpu(c, i)->price_per_hour;
        return p;
    }
    for (int i = 0; i < n; i++) p += hs_cluster_gpu(c, ids[i])->price_per_hour;
    return p;
}

static int type_index(hs_cluster *c, const char *gpu, const char *where,
                      hs_err *err)
{
    hs_gpu g;
    int rc;
    for (int i = 0; i < c->n_types; i++)
        if (!strcmp(c->types[i].name, gpu)) return i;
    rc = hs_gpu_find(&g, gpu, err);
    if (rc) {
        hs_err_prefix(err, "%s: ", where);
        return rc;
    }
    c->types[c->n_types] = g;
    return c->n_types++;
}

/* Reads an N x N matrix of positive off-diagonal numbers scaled by `scale`. */
static int read_matrix(const cJSON *m, const char *key, int n, double scale,
                       double *out, const char *where, hs_err *err)
{
    const cJSON *row;
    int i = 0;
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != n)
        return hs_errf(err, HS_EPARSE, "%s: %s: expected %d rows (one per GPU)",
                       where, key, n);
    cJSON_ArrayForEach(row, m) {
        const cJSON *v;
        int j = 0;
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != n)
            return hs_errf(err, HS_EPARSE, "%s: %s[%d]: expected %d entries",
                           where, key, i, n);
        cJSON_ArrayForEach(v, row) {
            if (!cJSON_IsNumber(v))
                return hs_errf(err, HS_EPARSE, "%s: %s[%d][%d]: expected a number",
                               where, key, i, j);
            if (!(v->valuedouble >= 0) || v->valuedouble > 1e9)
                return hs_errf(err, HS_ERANGE, "%s: %s[%d][%d]: %g is outside [0, 1e9]",
                               where, key, i, j, v->valuedouble);
            if (i != j && v->valuedouble == 0 && scale != 1e-6)
                return hs_errf(err, HS_EPARSE,
                               "%s: %s[%d][%d]: missing link (bandwidth 0) between GPU %d and GPU %d",
                               where, key, i, j, i, j);
            out[(long)i * n + j] = v->valuedouble * scale;
            j++;
        }
        i++;
    }
    return 0;
}

/* Builds a cluster from its JSON description; `path` names it in messages.
 * root stays the caller's. */
static int cluster_build(hs_cluster **out, const cJSON *root, const char *path, hs_err *err)
{
    const cJSON *nodes, *node, *it;
    hs_cluster *c = NULL;
    int rc, n = 0, k, n_nodes = 0;
    double inter_bw = -1, inter_lat = -1;
    char where[1200];

    *out = NULL;
    if (!cJSON_IsObject(root)) {
        rc = hs_errf(err, HS_EPARSE, "%s: expected a JSON object", path);
        goto fail;
    }
    it = cJSON_GetObjectItemCaseSensitive(root, "source");
    if (it && !cJSON_IsString(it)) {
        rc = hs_errf(err, HS_EPARSE, "%s: source: expected a string", path);
        goto fail;
    }
    for (it = root->child; it; it = it->next) {
        static const char *const keys[] = {"name", "description", "source", "nodes",
            "inter_bw_gbs", "inter_latency_us", "bandwidth_gbs", "latency_us", NULL};
        int ok = 0;
        for (k = 0; keys[k]; k++) ok |= !strcmp(keys[k], it->string);
        if (!ok) {
            rc = hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"", path, it->string);
            goto fail;
        }
    }
    nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    if (!cJSON_IsArray(nodes) || cJSON_GetArraySize(nodes) == 0) {
        rc = hs_errf(err, HS_EPARSE, "%s: nodes: expected a non-empty array", path);
        goto fail;
    }
    k = 0;
    cJSON_ArrayForEach(node, nodes) {
        long cnt = 0, rep = 1;
        snprintf(where, sizeof where, "%s: nodes[%d]", path, k++);
        rc = hs_json_int(node, "count", 1, 4096, &cnt, where, err);
        if (!rc) rc = hs_json_int_opt(node, "repeat", 1, 65536, &rep, where, err);
        if (rc) goto fail;
        /* Bounded before multiplying: no overflow on absurd repeats. */
        if ((long)n + cnt * rep > 65536) {
            rc = hs_errf(err, HS_ERANGE, "%s: more than 65536 GPUs", path);
            goto fail;
        }
        n += (int)(cnt * rep);
        n_nodes += (int)rep;
    }
    c = calloc(1, sizeof *c);
    if (!c) goto nomem;
    c->n_gpus = n;
    c->n_nodes = n_nodes;
    c->types = calloc((size_t)c->n_nodes, sizeof *c->types);
    c->gpu_type = calloc((size_t)n, sizeof *c->gpu_type);
    c->gpu_node = calloc((size_t)n, sizeof *c->gpu_node);
    c->node_name = calloc((size_t)c->n_nodes, sizeof *c->node_name);
    c->bw = calloc((size_t)n * (size_t)n, sizeof *c->bw);
    c->lat = calloc((size_t)n * (size_t)n, sizeof *c->lat);
    if (!c->types || !c->gpu_type || !c->gpu_node || !c->node_name || !c->bw || !c->lat)
        goto nomem;
    if ((rc = hs_json_str(root, "name", c->name, sizeof c->name, path, err)))
        goto fail;
    if ((rc = hs_json_str_opt(root, "description", c->description,
                              sizeof c->description, path, err)))
        goto fail;
    if ((rc = hs_json_num_opt(root, "inter_bw_gbs", 1e-3, 1e6, &inter_bw, path, err)) ||
        (rc = hs_json_num_opt(root, "inter_latency_us", 0, 1e7, &inter_lat, path, err)))
        goto fail;

    {
        int g = 0, ni = 0;
        /* Per node: type, intra-node bandwidth and latency. */
        double *intra_bw = calloc((size_t)c->n_nodes, sizeof(double));
        double *intra_lat = calloc((size_t)c->n_nodes, sizeof(double));
        if (!intra_bw || !intra_lat) {
            free(intra_bw);
            free(intra_lat);
            goto nomem;
        }
        int ji = 0;
        cJSON_ArrayForEach(node, nodes) {
            char gpu[1024], nm[32];
            long cnt = 0, rep = 1;
            int t;
            snprintf(where, sizeof where, "%s: nodes[%d]", path, ji++);
            for (it = node->child; it; it = it->next) {
                if (strcmp(it->string, "name") && strcmp(it->string, "gpu") &&
                    strcmp(it->string, "count") && strcmp(it->string, "intra_bw_gbs") &&
                    strcmp(it->string, "intra_latency_us") && strcmp(it->string, "repeat")) {
                    rc = hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"", where, it->string);
                    break;
                }
            }
            if (!rc) rc = hs_json_str(node, "name", nm, sizeof nm, where, err);
            if (!rc) rc = hs_json_str(node, "gpu", gpu, sizeof gpu, where, err);
            if (!rc) rc = hs_json_int(node, "count", 1, 4096, &cnt, where, err);
            if (!rc) rc = hs_json_int_opt(node, "repeat", 1, 65536, &rep, where, err);
            if (!rc && cnt > 1) {
                rc = hs_json_num(node, "intra_bw_gbs", 1e-3, 1e6, &intra_bw[ni], where, err);
                if (!rc) rc = hs_json_num(node, "intra_latency_us", 0, 1e7, &intra_lat[ni], where, err);
            } else if (!rc) {
                rc = hs_json_num_opt(node, "intra_bw_gbs", 1e-3, 1e6, &intra_bw[ni], where, err);
                if (!rc) rc = hs_json_num_opt(node, "intra_latency_us", 0, 1e7, &intra_lat[ni], where, err);
            }
            if (rc) {
                free(intra_bw);
                free(intra_lat);
                goto fail;
            }
            t = type_index(c, gpu, where, err);
            if (t < 0) {
                rc = t;
                free(intra_bw);
                free(intra_lat);
                goto fail;
            }
            /* "repeat": N identical nodes, named <name>-0 .. <name>-(N-1). */
            for (long r = 0; r < rep; r++) {
                if (r > 0) {
                    intra_bw[ni] = intra_bw[ni - r];
                    intra_lat[ni] = intra_lat[ni - r];
                }
                if (rep > 1) snprintf(c->node_name[ni], sizeof c->node_name[ni], "%.18s-%d", nm, (int)r);
                else memcpy(c->node_name[ni], nm, sizeof nm);
                for (long q = 0; q < cnt; q++, g++) {
                    c->gpu_type[g] = t;
                    c->gpu_node[g] = ni;
                }
                ni++;
            }
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                int a = c->gpu_node[i], b = c->gpu_node[j];
                if (i == j) continue;
                if (a == b) {
                    c->bw[(long)i * n + j] = intra_bw[a] * 1e9;
                    c->lat[(long)i * n + j] = intra_lat[a] * 1e-6;
                } else {
                    c->bw[(long)i * n + j] = inter_bw * 1e9;
                    c->lat[(long)i * n + j] = inter_lat * 1e-6;
                }
            }
        free(intra_bw);
        free(intra_lat);
    }

    it = cJSON_GetObjectItemCaseSensitive(root, "bandwidth_gbs");
    if (it) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(root, "latency_us");
        if (!l) {
            rc = hs_errf(err, HS_EPARSE, "%s: bandwidth_gbs given without latency_us", path);
            goto fail;
        }
        if ((rc = read_matrix(it, "bandwidth_gbs", n, 1e9, c->bw, path, err)) ||
            (rc = read_matrix(l, "latency_us", n, 1e-6, c->lat, path, err)))
            goto fail;
    } else if (c->n_nodes > 1 && (inter_bw < 0 || inter_lat < 0)) {
        rc = hs_errf(err, HS_EPARSE,
                     "%s: %d nodes but no link between them (need inter_bw_gbs and inter_latency_us, or bandwidth_gbs/latency_us)",
                     path, c->n_nodes);
        goto fail;
    }
    *out = c;
    return 0;

nomem:
    rc = hs_errf(err, HS_ENOMEM, "%s: out of memory", path);
fail:
    hs_cluster_destroy(c);
    return rc;
}

int hs_cluster_load(hs_cluster **out, const char *path, hs_err *err)
{
    cJSON *root = NULL;
    int rc;
    *out = NULL;
    if ((rc = hs_json_load(path, &root, err))) return rc;
    rc = cluster_build(out, root, path, err);
    cJSON_Delete(root);
    return rc;
}

int hs_cluster_is_shorthand(const char *name)
{
    size_t n = strlen(name);
    return isdigit((unsigned char)name[0]) && strchr(name, 'x') && !strchr(name, '/') &&
           !(n > 5 && !strcmp(name + n - 5, ".json"));
}

/* Reads the decimal number at *p (1..max) and the 'x' after it. */
static int term_num(const char **p, long max, long *v)
{
    char *end;
    if (!isdigit((unsigned char)**p)) return -1;
    *v = strtol(*p, &end, 10);
    if (*end != 'x' || *v < 1 || *v > max) return -1;
    *p = end + 1;
    return 0;
}

/* A shorthand becomes the JSON a cluster file would hold, with the links
 * filled in from the GPUs' defaults, and goes through the same builder. */
static int shorthand(hs_cluster **out, const char *spec, hs_err *err)
{
    /* out NULL: check the shorthand only, build nothing. */
    cJSON *root = NULL, *nodes;
    char desc[1024] = "shorthand:";
    double inter_bw = 0, inter_lat = 0;
    int rc = 0, t = 0;
    const char *p = spec;
    if (strlen(spec) >= sizeof(((hs_cluster *)0)->name))
        return hs_errf(err, HS_EINVAL, "cluster \"%.40s...\": a shorthand is at most %d characters (use a cluster file)",
                       spec, (int)sizeof(((hs_cluster *)0)->name) - 1);
    root = cJSON_CreateObject();
    nodes = cJSON_AddArrayToObject(root, "nodes");
    if (!root || !nodes || !cJSON_AddStringToObject(root, "name", spec) ||
        !cJSON_AddStringToObject(root, "source", "shorthand"))
        goto nomem;
    while (*p) {
        const char *q = strchr(p, '+'), *g;
        char term[64], gname[64];
        long a, b = 0;
        hs_gpu gpu;
        cJSON *nd;
        size_t len = q ? (size_t)(q - p) : strlen(p);
        snprintf(term, sizeof term, "%.*s", (int)len, p);
        g = term;
        if (term_num(&g, 65536, &a)) goto syntax;
        if (isdigit((unsigned char)*g) && term_num(&g, 4096, &b)) goto syntax;
        if (!b) {   /* GPUSxGPU: one node */
            b = a;
            a = 1;
            if (b > 4096) goto syntax;
        }
        if (!*g) goto syntax;
        snprintf(gname, sizeof gname, "%s", g);
        if ((rc = hs_gpu_find(&gpu, gname, err))) {
            hs_err_prefix(err, "cluster \"%s\": ", spec);
            goto out;
        }
        if (!(nd = cJSON_CreateObject())) goto nomem;
        cJSON_AddItemToArray(nodes, nd);
        {
            char nm[16];
            snprintf(nm, sizeof nm, "n%d", t);
            if (!cJSON_AddStringToObject(nd, "name", nm) || !cJSON_AddStringToObject(nd, "gpu", gname) ||
                !cJSON_AddNumberToObject(nd, "count", (double)b) ||
                !cJSON_AddNumberToObject(nd, "repeat", (double)a) ||
                !cJSON_AddNumberToObject(nd, "intra_bw_gbs", gpu.intra_bw / 1e9) ||
                !cJSON_AddNumberToObject(nd, "intra_latency_us", gpu.intra_lat / 1e-6))
                goto nomem;
        }
        /* Between unlike nodes the slower end decides. */
        if (t == 0 || gpu.inter_bw / 1e9 < inter_bw) inter_bw = gpu.inter_bw / 1e9;
        if (gpu.inter_lat / 1e-6 > inter_lat) inter_lat = gpu.inter_lat / 1e-6;
        {
            size_t dl = strlen(desc);
            snprintf(desc + dl, sizeof desc - dl, "%s %ld node%s of %ldx %s (%g GB/s, %g us inside)", t ? " +" : "",
                     a, a == 1 ? "" : "s", b, gpu.display, gpu.intra_bw / 1e9, gpu.intra_lat / 1e-6);
        }
        t++;
        if (!q) break;
        p = q + 1;
        if (!*p) goto syntax;
    }
    {
        size_t dl = strlen(desc);
        snprintf(desc + dl, sizeof desc - dl, "; %g GB/s, %g us between nodes (the GPUs' defaults)", inter_bw,
                 inter_lat);
    }
    if (!cJSON_AddStringToObject(root, "description", desc) ||
        !cJSON_AddNumberToObject(root, "inter_bw_gbs", inter_bw) ||
        !cJSON_AddNumberToObject(root, "inter_latency_us", inter_lat))
        goto nomem;
    if (out) {
        char where[128];
        snprintf(where, sizeof where, "cluster \"%s\"", spec);
        rc = cluster_build(out, root, where, err);
    }
    goto out;
syntax:
    rc = hs_errf(err, HS_EINVAL,
                 "cluster \"%s\": expected NODESxGPUSxGPU terms joined by '+' (e.g. 4x8xh100-sxm-80g or "
                 "1x4xh100-sxm-80g+1x4xa100-80g; at most 4096 GPUs a node)", spec);
    goto out;
nomem:
    rc = hs_errf(err, HS_ENOMEM, "cluster \"%s\": out of memory", spec);
out:
    cJSON_Delete(root);
    return rc;
}

static int cluster_find(hs_cluster **out, const char *name, hs_err *err)
{
    char path[1024], dym[160];
    int rc;
    if (out) *out = NULL;
    if (hs_cluster_is_shorthand(name)) return shorthand(out, name, err);
    rc = hs_resolve(path, sizeof path, "profiles/clusters", name, err);
    if (rc) return rc;
    if (out) rc = hs_cluster_load(out, path, err);
    else if (access(path, R_OK)) rc = HS_EIO;
    if (rc == HS_EIO)
        return hs_errf(err, HS_ENOTFOUND, "unknown cluster \"%s\"%s (no %s; see `hetsim list clusters`, or "
                       "a shorthand such as 4x8xh100-sxm-80g)",
                       name, hs_suggest_file(dym, sizeof dym, "profiles/clusters", name), path);
    return rc;
}

int hs_cluster_find(hs_cluster **out, const char *name, hs_err *err)
{
    return cluster_find(out, name, err);
}

int hs_cluster_check(const char *name, hs_err *err)
{
    return cluster_find(NULL, name, err);
}
