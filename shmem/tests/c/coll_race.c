/* --checked: PE 1 reads PE 0's fcollect target while PEs 0 and 2 (the
 * even PEs' team) run the fcollect — nothing orders that read with PE 2's
 * put into the same bytes, so the run must report the race. */
#include "check.h"

/* Larger than a team's own scratch, so the fcollect works in dst. */
#define N 4096
static int src[N], dst[2 * N];

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  CHECK(n >= 3, "needs 3 PEs");
  shmem_team_t evens;
  shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &evens);
  for (int i = 0; i < N; i++) src[i] = me;
  if (evens != SHMEM_TEAM_INVALID)
    shmem_int_fcollect(evens, dst, src, N);
  else if (me == 1)
    (void)shmem_int_g(&dst[N], 0);
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}
