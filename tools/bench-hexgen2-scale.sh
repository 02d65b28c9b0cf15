# tools/bench-hexgen2-scale.sh - sourced by tools/bench-hexgen2 (sections D,
# E) and tools/bench-hexgen2-search, so both search the same clusters.
#
# scale N -> path of a cluster JSON written under $T: N/8 nodes of 8 GPUs,
# H100 / A100 / L40 / A6000 round robin, 12.5 GB/s between nodes.
# (tests/test_hexgen2_search.c's scale64() builds the 64-GPU one in C.)
scale() {
    local n=$1 f="$T/scale$1.json" i g b
    {
        echo "{\"name\": \"hg2-scale-$n\", \"description\": \"bench-hexgen2 scale cluster, $n GPUs\", \"source\": \"bench-hexgen2\", \"nodes\": ["
        for ((i = 0; i < n / 8; i++)); do
            case $((i % 4)) in
                0) g=h100-sxm-80g; b=450 ;; 1) g=a100-80g; b=300 ;; 2) g=l40; b=32 ;; 3) g=rtx-a6000; b=56.25 ;;
            esac
            [ $i -gt 0 ] && echo ","
            echo "{\"name\": \"n$i\", \"gpu\": \"$g\", \"count\": 8, \"intra_bw_gbs\": $b, \"intra_latency_us\": 3}"
        done
        echo "], \"inter_bw_gbs\": 12.5, \"inter_latency_us\": 20}"
    } >"$f"
    echo "$f"
}
