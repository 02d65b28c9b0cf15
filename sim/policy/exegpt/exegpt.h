/* exegpt.h - ExeGPT's runtime policies rra and waa (exegpt.c): their
 * options, which the exegpt planner (plan/exegpt.h) fills in the
 * deployments it writes and tests set directly. */
#ifndef HS_POLICY_EXEGPT_H
#define HS_POLICY_EXEGPT_H

#include "core/conf.h"

/* The engine.exegpt_* keys (the field names are the keys). */
typedef struct hs_exegpt_rt {
    int exegpt_be;             /* encoder batch B_E, queries per encoding phase */
    int exegpt_nd;             /* RRA: decoding iterations per encoding phase N_D */
    double exegpt_bd;          /* target decoding population (0: no decoder adjustment) */
    double exegpt_adjust;      /* dynamic adjustment threshold, fraction (0: off) */
    double exegpt_prompt_mean; /* tokens, encoder workload target per query (0: running mean) */
} hs_exegpt_rt;

extern const hs_field hs_exegpt_rt_fields[];
void hs_exegpt_rt_defaults(hs_exegpt_rt *o);

#endif
