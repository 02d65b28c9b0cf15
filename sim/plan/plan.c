/* plan.c - the planner registry. */
#include "plan/plan.h"

#include <string.h>

extern const hs_planner_ops hs_planner_uniform;
extern const hs_planner_ops hs_planner_exegpt;
extern const hs_planner_ops hs_planner_hexgen2;
extern const hs_planner_ops hs_planner_distserve;
extern const hs_planner_ops hs_planner_splitwise;
extern const hs_planner_ops hs_planner_hexgen;
extern const hs_planner_ops hs_planner_llmpq;
extern const hs_planner_ops hs_planner_pipeedge;
extern const hs_planner_ops hs_planner_uniform_pp;
extern const hs_planner_ops hs_planner_hetis;
extern const hs_planner_ops hs_planner_hetis_splitwise;
extern const hs_planner_ops hs_planner_hetis_hexgen;
extern const hs_planner_ops hs_planner_iserve;

const hs_planner_ops *const hs_planners[] = {
    &hs_planner_uniform,
    &hs_planner_exegpt,
    &hs_planner_hexgen2,
    &hs_planner_distserve,
    &hs_planner_splitwise,
    &hs_planner_hexgen,
    &hs_planner_llmpq,
    &hs_planner_pipeedge,
    &hs_planner_uniform_pp,
    &hs_planner_hetis,
    &hs_planner_hetis_splitwise,
    &hs_planner_hetis_hexgen,
    &hs_planner_iserve,
    NULL,
};

const hs_planner_ops *hs_planner_find(const char *name)
{
    for (int i = 0; hs_planners[i]; i++)
        if (!strcmp(hs_planners[i]->name, name)) return hs_planners[i];
    return NULL;
}

