/* policy.c - the policy registry. */
#include "policy/policy.h"

#include <string.h>

extern const hs_policy_ops hs_policy_vllm;
extern const hs_policy_ops hs_policy_sarathi;
extern const hs_policy_ops hs_policy_static;
extern const hs_policy_ops hs_policy_rra;
extern const hs_policy_ops hs_policy_waa;
extern const hs_policy_ops hs_policy_pq;
extern const hs_policy_ops hs_policy_hetis;

const hs_policy_ops *const hs_policies[] = {
    &hs_policy_vllm,
    &hs_policy_sarathi,
    &hs_policy_static,
    &hs_policy_rra,
    &hs_policy_waa,
    &hs_policy_pq,
    &hs_policy_hetis,
    NULL,
};

const hs_policy_ops *hs_policy_find(const char *name)
{
    for (int i = 0; hs_policies[i]; i++)
        if (!strcmp(hs_policies[i]->name, name)) return hs_policies[i];
    return NULL;
}
