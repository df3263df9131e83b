/* --checked with many reports at once: every PE puts into and gets from
 * a static `table` and a heap block of every other PE, with nothing
 * ordering the accesses; after one barrier every PE reports its races
 * (one per pair of accesses of two PEs) at shmem_finalize, all PEs at
 * the same time. */
#include "check.h"

static long table[4];

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  long *heap = shmem_calloc(4, sizeof(long));
  long sum = 0;
  shmem_barrier_all();
  for (int pe = 0; pe < n; pe++) {
    if (pe == me) continue;
    shmem_long_p(&table[0], me, pe);
    shmem_long_p(&heap[0], me, pe);
    sum += shmem_long_g(&table[0], pe) + shmem_long_g(&heap[0], pe);
  }
  shmem_barrier_all();
  shmem_finalize();
  return sum < 0;
}
