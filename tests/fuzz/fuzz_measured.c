/* fuzz_measured.c - the replay measurement CSV (hetsim-exec replay) as
 * `hetsim validate` reads it, against a fixed three-iteration schedule. */
#include "fuzz.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char sched[] =
    "{\"type\":\"header\",\"version\":1,\"replica\":0,\"model\":\"tiny-test\",\"gpu\":\"a100-80g\","
    "\"perf_model\":\"roofline\",\"tp\":1,\"pp\":1,\"bits\":16,\"kv_bits\":16,\"layers\":2,"
    "\"block_size\":16,\"kv_blocks\":1000,\"step_overhead_ns\":1000000}\n"
    "{\"type\":\"request\",\"replica\":0,\"id\":0,\"arrival_ns\":0,\"prompt\":10,\"output\":3}\n"
    "{\"type\":\"iter\",\"replica\":0,\"it\":0,\"start_ns\":0,\"end_ns\":11000000,\"preempted\":[],"
    "\"prefill\":[[0,10,0]],\"decode\":[],\"first\":[0],\"finished\":[],\"kv_blocks_used\":1}\n"
    "{\"type\":\"request\",\"replica\":0,\"id\":1,\"arrival_ns\":500000,\"prompt\":5,\"output\":2}\n"
    "{\"type\":\"iter\",\"replica\":0,\"it\":1,\"start_ns\":11000000,\"end_ns\":16000000,\"preempted\":[],"
    "\"prefill\":[[1,5,0]],\"decode\":[[0,11]],\"first\":[1],\"finished\":[],\"kv_blocks_used\":2}\n"
    "{\"type\":\"iter\",\"replica\":0,\"it\":2,\"start_ns\":16000000,\"end_ns\":21000000,\"preempted\":[],"
    "\"prefill\":[],\"decode\":[[0,12],[1,6]],\"first\":[],\"finished\":[0,1],\"kv_blocks_used\":2}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_err err = {0};
    char sp[512];
    snprintf(sp, sizeof sp, "%s", hs_fuzz_file((const uint8_t *)sched, strlen(sched), "schedule.jsonl"));
    hs_fuzz_check(hs_cli_validate_check(sp, hs_fuzz_file(data, size, "measured.csv"), 0, &err), &err);
    return 0;
}
