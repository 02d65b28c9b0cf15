/* test_config.c - the run configuration: defaults from the registries, the
 * policies' own engine.* keys, and files applied all or nothing. */
#include "check.h"

#include "cli/config.h"
#include "plan/plan.h"

/* A config file that fails in its last section leaves c as it was. */
static void load_atomic(void)
{
    hs_run_cfg *c = malloc(sizeof *c), *before = malloc(sizeof *before);
    hs_err err = {0};
    const char *bad = hs_test_tmpfile("cfg", "{\"tp\": 4, \"engine\": {\"block_size\": 32, \"chunk_size\": 64},"
                                             " \"slo\": {\"ttft_ms\": 5}, \"workload\": {\"rate\": -3}}");
    const char *bad_key = hs_test_tmpfile("cfg", "{\"tp\": 4, \"engine\": {\"chunk_sise\": 64}}");
    const char *good = hs_test_tmpfile("cfg", "{\"tp\": 4, \"engine\": {\"block_size\": 32, \"chunk_size\": 64,"
                                              " \"nobatch_timeout_s\": 2}}");
    if (!c || !before) exit(2);
    hs_run_cfg_defaults(c);
    *before = *c;
    CHECK(hs_run_cfg_load(c, bad, &err) != 0);
    CHECK(strstr(err.msg, "workload") != NULL);
    CHECK(memcmp(c, before, sizeof *c) == 0);
    CHECK(hs_run_cfg_load(c, bad_key, &err) == HS_EPARSE);
    CHECK(strstr(err.msg, "chunk_sise") != NULL);
    CHECK(memcmp(c, before, sizeof *c) == 0);
    CHECK_OK(hs_run_cfg_load(c, good, &err), &err);
    CHECK_INT(c->tp, 4);
    CHECK_INT(c->engine.block_size, 32);
    {
        const int *chunk = hs_policy_opts_of(c->popts, hs_policy_find("sarathi"));
        const double *to = hs_policy_opts_of(c->popts, hs_policy_find("nobatch"));
        CHECK(chunk && *chunk == 64);   /* sarathi_opts: chunk_size first */
        CHECK(to && *to == 2);          /* nobatch_opts: its time-out first */
    }
    free(c);
    free(before);
}

/* Defaults name no plug-in: they are the registries' first entries; keys
 * reach the policies that declare them and the JSON shows them. */
static void registry_defaults(void)
{
    hs_run_cfg *c = malloc(sizeof *c);
    hs_err err = {0};
    char *json;
    if (!c) exit(2);
    hs_run_cfg_defaults(c);
    CHECK_STR(c->policy, hs_policies[0]->name);
    CHECK_STR(c->planner, hs_planners[0]->name);
    CHECK_OK(hs_run_cfg_set(c, "engine.static_batch=3", "--set", &err), &err);
    CHECK(*(const int *)hs_policy_opts_of(c->popts, hs_policy_find("static")) == 3);
    CHECK(hs_run_cfg_given(c, "engine.static_batch"));
    CHECK(hs_run_cfg_set(c, "engine.static_batch=0", "--set", &err) == HS_ERANGE);
    CHECK(strstr(err.msg, "static_batch") != NULL);
    CHECK(hs_run_cfg_set(c, "engine.no_such=1", "--set", &err) == HS_EINVAL);
    CHECK(strstr(err.msg, "no_such") != NULL);
    json = hs_run_cfg_json(c);
    CHECK(json && strstr(json, "\"static_batch\":3") && strstr(json, "\"exegpt_be\":16"));
    free(json);
    free(c);
}

int main(void)
{
    hs_test_root();
    load_atomic();
    registry_defaults();
    return hs_check_result();
}
