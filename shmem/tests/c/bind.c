/* Prints the cores this PE's program thread may run on, for the test of
 * pld-oshrun --bind-to: "PE <pe> of <n> may run on <count> cores, first <cpu>". */
#define _GNU_SOURCE
#include <sched.h>
#include "check.h"

int main(void) {
  shmem_init();
  cpu_set_t set;
  CPU_ZERO(&set);
  CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
    if (CPU_ISSET(c, &set)) first = c;
  printf("PE %d of %d may run on %d cores, first %d\n", shmem_my_pe(),
         shmem_n_pes(), CPU_COUNT(&set), first);
  shmem_finalize();
  return 0;
}
