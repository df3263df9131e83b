/* --checked: PE 0 puts into PE 1's static `table` and heap block while PE
 * 2 reads the same bytes, with nothing ordering the two. PE 1 must report
 * both races, naming the PEs, the calls and the objects. */
#include "check.h"

static long table[16];

int main(void) {
  shmem_init();
  int me = shmem_my_pe();
  long *heap = shmem_malloc(64);
  long v = 5, got = 0;
  shmem_barrier_all();
  if (me == 0) {
    shmem_long_p(&table[3], v, 1);
    shmem_long_p(&heap[2], v, 1);
    shmem_quiet();
  }
  if (me == 2) got = shmem_long_g(&table[3], 1) + shmem_long_g(&heap[2], 1);
  shmem_barrier_all();
  shmem_finalize();
  return got < 0;
}
