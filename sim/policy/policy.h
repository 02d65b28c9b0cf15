/* policy.h - the registry of runtime (serving) policies.
 *
 * A policy is a plug-in: an hs_policy_ops (serve/runtime.h) in its own
 * folder sim/policy/<name>/, with its options, its lane and replica state
 * and its tests (test_*.c there); adding one touches that folder and one
 * line of the registry in policy.c.
 *
 * Options: every policy declares its keys (hs_policy_ops.opts), which live
 * in the engine.* namespace; a key may be declared by several policies
 * (rra and waa share theirs).  A configuration keeps one hs_popts per
 * registered policy, in registry order, so that one setting reaches every
 * policy that declares it and a later --policy finds its options set. */
#ifndef HS_POLICY_H
#define HS_POLICY_H

#include <stdio.h>

#include "serve/runtime.h"

/* NULL-terminated; the first is the default policy. */
extern const hs_policy_ops *const hs_policies[];
/* Room for the registry in configurations (hs_popts arrays). */
#define HS_MAX_POLICIES 16

/* By name; NULL when unknown. */
const hs_policy_ops *hs_policy_find(const char *name);
/* Position in hs_policies[], -1 when not registered. */
int hs_policy_index(const hs_policy_ops *p);
/* The options of p in a per-policy array. */
const void *hs_policy_opts_of(const hs_popts *all, const hs_policy_ops *p);

/* Every policy's defaults into all[HS_MAX_POLICIES]. */
void hs_policies_opts_defaults(hs_popts *all);
/* 1 when some policy declares option key. */
int hs_policies_has_opt(const char *key);
/* Sets key=value (text, as --set gives it) in every policy that declares
 * key; HS_ENOTFOUND when none does (nothing changed), or the first
 * policy's range/parse error (nothing changed).  `where` names the source. */
int hs_policies_opt_set(hs_popts *all, const char *key, const char *value, const char *where,
                        hs_err *err);
/* The field of the first policy that declares key, and its value in all;
 * NULL when none does. */
const hs_field *hs_policies_opt_field(const hs_popts *all, const char *key, const void **obj);
/* Visits each distinct option key once, in registry order, with the first
 * policy that declares it and the names of all that do ("rra, waa"). */
void hs_policies_opts_each(void (*fn)(void *ctx, const hs_policy_ops *p, const hs_field *f,
                                      const char *owners),
                           void *ctx);

#endif
