/* stats.c - summary statistics of a request source (hetsim trace stats).
 *
 * Reads the source to its end.  Gap statistics are streamed (Welford), the
 * lengths are kept as int arrays (8 bytes per request) so percentiles are
 * exact: sorted with gsl_sort_int and read with
 * gsl_stats_int_quantile_from_sorted_data, i.e. linear interpolation between
 * order statistics (numpy's default), which is how the figures in
 * docs/DATA.md were computed.  rate = 1 / mean gap =
 * (count - 1) / duration. */
#include "workload/workload_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort_int.h>
#include <gsl/gsl_statistics_int.h>

#include "core/vec.h"

typedef struct ivec { int *v; size_t n, cap; } ivec;

static int ivec_push(ivec *a, int x)
{
    if (hs_vec_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v, 4096)) return -1;
    a->v[a->n++] = x;
    return 0;
}

static void side_stats(ivec *a, int64_t sum, double *mean, double *p50, double *p90,
                       double *p99, double *max)
{
    if (a->n == 0) {
        *mean = *p50 = *p90 = *p99 = *max = 0;
        return;
    }
    gsl_sort_int(a->v, 1, a->n);
    *mean = (double)sum / (double)a->n;
    *p50 = gsl_stats_int_quantile_from_sorted_data(a->v, 1, a->n, 0.50);
    *p90 = gsl_stats_int_quantile_from_sorted_data(a->v, 1, a->n, 0.90);
    *p99 = gsl_stats_int_quantile_from_sorted_data(a->v, 1, a->n, 0.99);
    *max = a->v[a->n - 1];
}

int hs_trace_stats_compute(hs_source *s, hs_trace_stats *st, hs_err *err)
{
    ivec pr = {0}, out = {0};
    int64_t psum = 0, osum = 0;
    hs_ns first = 0, prev = 0;
    double gmean = 0, gm2 = 0, gmax = 0; /* Welford over gaps, s */
    int64_t ngaps = 0;
    hs_arrival a;
    int rc;

    memset(st, 0, sizeof *st);
    while ((rc = hs_source_next(s, &a, err)) == 1) {
        if (st->count == 0) {
            first = a.arrival;
        } else {
            double g = hs_ns_to_s(a.arrival - prev), d = g - gmean;
            ngaps++;
            gmean += d / (double)ngaps;
            gm2 += d * (g - gmean);
            if (g > gmax) gmax = g;
        }
        prev = a.arrival;
        st->count++;
        psum += a.prompt;
        osum += a.output;
        if (ivec_push(&pr, a.prompt) || ivec_push(&out, a.output)) {
            rc = hs_errf(err, HS_ENOMEM, "trace stats: out of memory after %lld requests",
                         (long long)st->count);
            goto done;
        }
    }
    if (rc < 0) goto done;
    st->duration_s = hs_ns_to_s(prev - first);
    st->rate = st->duration_s > 0 ? (double)ngaps / st->duration_s : 0;
    st->gap_cv = ngaps > 1 && gmean > 0 ? sqrt(gm2 / (double)(ngaps - 1)) / gmean : 0;
    st->max_gap_s = gmax;
    side_stats(&pr, psum, &st->prompt_mean, &st->prompt_p50, &st->prompt_p90,
               &st->prompt_p99, &st->prompt_max);
    side_stats(&out, osum, &st->output_mean, &st->output_p50, &st->output_p90,
               &st->output_p99, &st->output_max);
    rc = 0;
done:
    free(pr.v);
    free(out.v);
    return rc;
}

void hs_trace_stats_print(const hs_trace_stats *st, FILE *fp)
{
    fprintf(fp, "requests    %12lld\n", (long long)st->count);
    fprintf(fp, "duration    %12.1f s\n", st->duration_s);
    fprintf(fp, "rate        %12.3f req/s\n", st->rate);
    fprintf(fp, "gap CV      %12.3f\n", st->gap_cv);
    fprintf(fp, "max gap     %12.3f s\n", st->max_gap_s);
    fprintf(fp, "%-8s %10s %10s %10s %10s %10s\n", "tokens", "mean", "p50", "p90", "p99", "max");
    fprintf(fp, "%-8s %10.1f %10.1f %10.1f %10.1f %10.0f\n", "prompt", st->prompt_mean,
            st->prompt_p50, st->prompt_p90, st->prompt_p99, st->prompt_max);
    fprintf(fp, "%-8s %10.1f %10.1f %10.1f %10.1f %10.0f\n", "output", st->output_mean,
            st->output_p50, st->output_p90, st->output_p99, st->output_max);
}
