/* A PE that dies mid-run: PE 1 kills itself while the others wait in a
 * barrier; they must fail within the timeout, naming PE 1. */
#include <signal.h>
#include "check.h"

int main(void) {
  shmem_init();
  static long cell;
  shmem_barrier_all();
  if (shmem_my_pe() == 1) raise(SIGKILL);
  shmem_long_wait_until(&cell, SHMEM_CMP_EQ, 1);
  shmem_barrier_all();
  return 0;
}
