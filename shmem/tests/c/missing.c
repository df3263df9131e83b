/* A collective that not every member enters: `missing team` — PE 2
 * skips an fcollect on the even PEs' team; `missing world` — the last PE
 * skips a reduction over the world. The members that did enter must fail
 * within the timeout naming the call and the PE that never arrived. */
#include <string.h>
#include "check.h"

static int src[4], dst[64];
static long lsrc[4], ldst[4];

int main(int argc, char **argv) {
  CHECK(argc == 2, "usage: missing team|world");
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  if (strcmp(argv[1], "team") == 0) {
    shmem_team_t evens;
    shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &evens);
    if (evens != SHMEM_TEAM_INVALID && me != 2)
      shmem_int_fcollect(evens, dst, src, 4);
  } else if (me != n - 1) {
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, ldst, lsrc, 4);
  }
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}
