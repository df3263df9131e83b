/* An OpenSHMEM 1.0 style program: start_pes, and main returns without
 * shmem_finalize or a last quiet. Every PE but 0 puts 128 KiB (several
 * frames) into its slot on PE 0, fences, sets its flag there and returns
 * at once (argv[1] "data"), or passes a last barrier first ("barrier");
 * PE 0 reads every slot once its flag is set, then enters that barrier.
 * The data, and the barrier's last signals, must reach PE 0 from PEs that
 * have already returned: pld completes them at exit. */
#include <string.h>
#include "check.h"

#define COUNT (16 * 1024)
#define MAX_PES 64

static long slot[MAX_PES][COUNT];
static long flag[MAX_PES];
static long mine[COUNT];

int main(int argc, char **argv) {
  int barrier = argc > 1 && strcmp(argv[1], "barrier") == 0;
  start_pes(0);
  int me = _my_pe(), n = _num_pes();
  CHECK(n <= MAX_PES, "at most %d PEs", MAX_PES);
  shmem_barrier_all();
  if (me != 0) {
    for (int i = 0; i < COUNT; i++) mine[i] = (long)me * COUNT + i + 1;
    shmem_long_put_nbi(slot[me], mine, COUNT, 0);
    shmem_fence();
    shmem_long_p(&flag[me], 1, 0);
    if (!barrier) return 0;
  } else {
    for (int pe = 1; pe < n; pe++) {
      shmem_long_wait_until(&flag[pe], SHMEM_CMP_EQ, 1);
      for (int i = 0; i < COUNT; i++)
        CHECK(slot[pe][i] == (long)pe * COUNT + i + 1, "PE %d's element %d: %ld", pe, i,
              slot[pe][i]);
    }
    printf("no_finalize: OK on %d PEs\n", n);
  }
  if (barrier) shmem_barrier_all();
  return 0;
}
