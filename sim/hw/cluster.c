/* cluster.c - cluster topology loading; see hw.h for the invariants. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int hs_cluster_load(hs_cluster **out, const char *path, hs_err *err)
{
    cJSON *root = NULL;
    const cJSON *nodes, *node, *it;
    hs_cluster *c = NULL;
    int rc, n = 0, k;
    double inter_bw = -1, inter_lat = -1;
    char where[1200];

    *out = NULL;
    rc = hs_json_load(path, &root, err);
    if (rc) return rc;
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
    cJSON_ArrayForEach(node, nodes) {
        long cnt = 0;
        snprintf(where, sizeof where, "%s: nodes[%d]", path, (int)(node == nodes->child ? 0 : 1));
        rc = hs_json_int(node, "count", 1, 4096, &cnt, path, err);
        if (rc) goto fail;
        n += (int)cnt;
    }
    if (n > 65536) {
        rc = hs_errf(err, HS_ERANGE, "%s: %d GPUs is more than 65536", path, n);
        goto fail;
    }
    c = calloc(1, sizeof *c);
    if (!c) goto nomem;
    c->n_gpus = n;
    c->n_nodes = cJSON_GetArraySize(nodes);
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
        cJSON_ArrayForEach(node, nodes) {
            char gpu[1024];
            long cnt = 0;
            int t;
            snprintf(where, sizeof where, "%s: nodes[%d]", path, ni);
            for (it = node->child; it; it = it->next) {
                if (strcmp(it->string, "name") && strcmp(it->string, "gpu") &&
                    strcmp(it->string, "count") && strcmp(it->string, "intra_bw_gbs") &&
                    strcmp(it->string, "intra_latency_us")) {
                    rc = hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"", where, it->string);
                    break;
                }
            }
            if (!rc) rc = hs_json_str(node, "name", c->node_name[ni], sizeof c->node_name[ni], where, err);
            if (!rc) rc = hs_json_str(node, "gpu", gpu, sizeof gpu, where, err);
            if (!rc) rc = hs_json_int(node, "count", 1, 4096, &cnt, where, err);
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
            for (long q = 0; q < cnt; q++, g++) {
                c->gpu_type[g] = t;
                c->gpu_node[g] = ni;
            }
            ni++;
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
    cJSON_Delete(root);
    *out = c;
    return 0;

nomem:
    rc = hs_errf(err, HS_ENOMEM, "%s: out of memory", path);
fail:
    cJSON_Delete(root);
    hs_cluster_destroy(c);
    return rc;
}

int hs_cluster_find(hs_cluster **out, const char *name, hs_err *err)
{
    char path[1024];
    int rc = hs_resolve(path, sizeof path, "profiles/clusters", name, err);
    if (rc) return rc;
    rc = hs_cluster_load(out, path, err);
    if (rc == HS_EIO)
        return hs_errf(err, HS_ENOTFOUND, "unknown cluster \"%s\" (no %s; see `hetsim list clusters`)",
                       name, path);
    return rc;
}
