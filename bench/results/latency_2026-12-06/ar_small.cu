#define COLLCOMM_BENCH_KINDS kind::all_reduce
#define COLLCOMM_BENCH_ALGOS algo::one_shot, algo::two_shot
#define COLLCOMM_BENCH_TYPES float
#include "collcomm_bench.cu"  // bench/: pass -Ibench
