/* A put to memory that is not symmetric (a local on the stack) is refused
 * by name: the call, the address and both symmetric ranges. */
#include "check.h"

int main(void) {
  shmem_init();
  long on_the_stack[4] = {0};
  long value = 1;
  shmem_barrier_all();
  if (shmem_my_pe() == 0) shmem_long_put(on_the_stack, &value, 1, 1 % shmem_n_pes());
  shmem_barrier_all();
  printf("PE %d: the bad put was not refused (%ld)\n", shmem_my_pe(), on_the_stack[0]);
  return 0;
}
