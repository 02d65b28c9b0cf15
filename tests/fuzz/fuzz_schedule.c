/* fuzz_schedule.c - the schedule JSON lines (hetsim run --emit-schedule) as
 * `hetsim validate` reads them, against a fixed replay measurement. */
#include "fuzz.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char meas[] = "it,measured_ns\n0,8000000\n1,5000000\n2,4000000\n";
    hs_err err = {0};
    const char *m = hs_fuzz_file((const uint8_t *)meas, strlen(meas), "measured.csv");
    char mp[512];
    snprintf(mp, sizeof mp, "%s", m);
    hs_fuzz_check(hs_cli_validate_check(hs_fuzz_file(data, size, "schedule.jsonl"), mp, 0, &err), &err);
    return 0;
}
