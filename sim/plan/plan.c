/* plan.c - the planner registry. */
#include "plan/plan.h"

#include <string.h>

extern const hs_planner_ops hs_planner_uniform;
extern const hs_planner_ops hs_planner_iserve;

const hs_planner_ops *const hs_planners[] = {
    &hs_planner_uniform,
    &hs_planner_iserve,
    NULL,
};

const hs_planner_ops *hs_planner_find(const char *name)
{
    for (int i = 0; hs_planners[i]; i++)
        if (!strcmp(hs_planners[i]->name, name)) return hs_planners[i];
    return NULL;
}
