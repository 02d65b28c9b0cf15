/* policy.h - the registry of runtime (serving) policies.
 *
 * A policy is an hs_policy_ops (serve/runtime.h) in its own file; adding one
 * touches that file and one line of the registry in policy.c. */
#ifndef HS_POLICY_H
#define HS_POLICY_H

#include "serve/runtime.h"

/* NULL-terminated. */
extern const hs_policy_ops *const hs_policies[];

/* By name; NULL when unknown. */
const hs_policy_ops *hs_policy_find(const char *name);

#endif
