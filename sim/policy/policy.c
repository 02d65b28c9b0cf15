/* policy.c - the policy registry and the policies' options. */
#include "policy/policy.h"

#include <string.h>

extern const hs_policy_ops hs_policy_vllm;
extern const hs_policy_ops hs_policy_sarathi;
extern const hs_policy_ops hs_policy_static;
extern const hs_policy_ops hs_policy_rra;
extern const hs_policy_ops hs_policy_waa;
extern const hs_policy_ops hs_policy_pq;
extern const hs_policy_ops hs_policy_hetis;
extern const hs_policy_ops hs_policy_nobatch;
extern const hs_policy_ops hs_policy_dsi;

const hs_policy_ops *const hs_policies[] = {
    &hs_policy_vllm,
    &hs_policy_sarathi,
    &hs_policy_static,
    &hs_policy_rra,
    &hs_policy_waa,
    &hs_policy_pq,
    &hs_policy_hetis,
    &hs_policy_nobatch,
    &hs_policy_dsi,
    NULL,
};

const hs_policy_ops *hs_policy_find(const char *name)
{
    for (int i = 0; hs_policies[i]; i++)
        if (!strcmp(hs_policies[i]->name, name)) return hs_policies[i];
    return NULL;
}

int hs_policy_index(const hs_policy_ops *p)
{
    for (int i = 0; hs_policies[i]; i++)
        if (hs_policies[i] == p) return i;
    return -1;
}

const void *hs_policy_opts_of(const hs_popts *all, const hs_policy_ops *p)
{
    int i = hs_policy_index(p);
    return i >= 0 ? all[i].b : NULL;
}

void hs_policies_opts_defaults(hs_popts *all)
{
    memset(all, 0, HS_MAX_POLICIES * sizeof *all);
    for (int i = 0; hs_policies[i] && i < HS_MAX_POLICIES; i++) hs_policy_opts_defaults(hs_policies[i], &all[i]);
}

int hs_policies_has_opt(const char *key)
{
    for (int i = 0; hs_policies[i]; i++)
        if (hs_policies[i]->opts && hs_conf_find(hs_policies[i]->opts, key)) return 1;
    return 0;
}

int hs_policies_opt_set(hs_popts *all, const char *key, const char *value, const char *where,
                        hs_err *err)
{
    hs_popts next[HS_MAX_POLICIES];
    int any = 0, rc;
    /* All or nothing: every declaring policy takes the value or none does. */
    memcpy(next, all, sizeof next);
    for (int i = 0; hs_policies[i] && i < HS_MAX_POLICIES; i++) {
        if (!hs_policies[i]->opts || !hs_conf_find(hs_policies[i]->opts, key)) continue;
        if ((rc = hs_conf_set(next[i].b, hs_policies[i]->opts, key, value, where, err))) return rc;
        any = 1;
    }
    if (!any) return HS_ENOTFOUND;
    memcpy(all, next, sizeof next);
    return 0;
}

const hs_field *hs_policies_opt_field(const hs_popts *all, const char *key, const void **obj)
{
    for (int i = 0; hs_policies[i] && i < HS_MAX_POLICIES; i++) {
        const hs_field *f = hs_policies[i]->opts ? hs_conf_find(hs_policies[i]->opts, key) : NULL;
        if (f) {
            *obj = all[i].b;
            return f;
        }
    }
    return NULL;
}

void hs_policies_opts_each(void (*fn)(void *ctx, const hs_policy_ops *p, const hs_field *f,
                                      const char *owners),
                           void *ctx)
{
    for (int i = 0; hs_policies[i]; i++) {
        const hs_field *f = hs_policies[i]->opts;
        for (; f && f->key; f++) {
            char owners[256] = "";
            size_t n = 0;
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = hs_policies[j]->opts && hs_conf_find(hs_policies[j]->opts, f->key) != NULL;
            if (seen) continue;
            for (int j = i; hs_policies[j]; j++)
                if (hs_policies[j]->opts && hs_conf_find(hs_policies[j]->opts, f->key) && n + 2 < sizeof owners)
                    n += (size_t)snprintf(owners + n, sizeof owners - n, "%s%s", n ? ", " : "",
                                          hs_policies[j]->name);
            fn(ctx, hs_policies[i], f, owners);
        }
    }
}
