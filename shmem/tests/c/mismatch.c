/* A collective whose PEs disagree on its arguments (argv[1]: length,
 * root, op, type, active), PE 1 the odd one out. Under --checked every
 * PE must fail naming the disagreement before any data moves; a PE that
 * returns prints so and exits 3. */
#include <string.h>
#include "check.h"

static long psync[SHMEM_REDUCE_SYNC_SIZE];
static long pwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  shmem_init();
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) psync[i] = SHMEM_SYNC_VALUE;
  int me = shmem_my_pe();
  long *src = shmem_calloc(8, sizeof(long));
  long *dst = shmem_calloc(8, sizeof(long));
  int odd = me == 1;
  if (!strcmp(c, "length")) {
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, dst, src, odd ? 8 : 4);
  } else if (!strcmp(c, "root")) {
    shmem_long_broadcast(SHMEM_TEAM_WORLD, dst, src, 4, odd ? 1 : 0);
  } else if (!strcmp(c, "op")) {
    if (odd) shmem_long_max_reduce(SHMEM_TEAM_WORLD, dst, src, 4);
    else shmem_long_sum_reduce(SHMEM_TEAM_WORLD, dst, src, 4);
  } else if (!strcmp(c, "type")) {
    if (odd) shmem_int_sum_reduce(SHMEM_TEAM_WORLD, (int *)dst, (int *)src, 4);
    else shmem_long_sum_reduce(SHMEM_TEAM_WORLD, dst, src, 4);
  } else if (!strcmp(c, "active")) {
    shmem_barrier_all();
    shmem_long_sum_to_all(dst, src, odd ? 3 : 2, 0, 0, shmem_n_pes(), pwrk, psync);
  } else {
    /* Agreeing PEs: every collective above, the same on all. */
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, dst, src, 4);
    shmem_long_broadcast(SHMEM_TEAM_WORLD, dst, src, 4, 1);
    shmem_long_fcollect(SHMEM_TEAM_WORLD, dst, src, 2);
    shmem_long_collect(SHMEM_TEAM_WORLD, dst, src, me == 0 ? 1 : 2);
    shmem_long_sum_to_all(dst, src, 2, 0, 0, shmem_n_pes(), pwrk, psync);
    shmem_barrier_all();
    printf("mismatch: agreeing calls OK on %d PEs\n", shmem_n_pes());
    shmem_finalize();
    return 0;
  }
  printf("PE %d: the disagreeing call '%s' returned\n", me, c);
  return 3;
}
