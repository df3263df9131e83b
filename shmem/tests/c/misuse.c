/* Calls a program gets wrong, one case per run (argv[1]): each must end
 * the job with an error that names the call, through shared memory as
 * over the network. A case that is not refused prints so and exits 3. */
#include <string.h>
#include "check.h"

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes(), next = (me + 1) % n;
  long *heap = shmem_calloc(4, sizeof(long));
  long *odd = (long *)((char *)heap + 4);
  if (!strcmp(c, "misaligned_amo")) {
    shmem_long_atomic_fetch_add(odd, 1, next);
  } else if (!strcmp(c, "misaligned_wait")) {
    shmem_long_wait_until(odd, SHMEM_CMP_EQ, 0);
  } else if (!strcmp(c, "misaligned_test")) {
    shmem_long_test(odd, SHMEM_CMP_EQ, 0);
  } else if (!strcmp(c, "fetch_null")) {
    shmem_long_atomic_fetch_nbi(NULL, heap, next);
    shmem_quiet();
  } else if (!strcmp(c, "swap_null")) {
    shmem_long_atomic_swap_nbi(NULL, heap, 5, next);
    shmem_quiet();
  } else if (!strcmp(c, "after_finalize")) {
    shmem_finalize();
    /* The PE's constants may still be asked... */
    printf("PE %d of %d after shmem_finalize\n", shmem_my_pe(), shmem_n_pes());
    fflush(stdout);
    /* ...but nothing may move. */
    shmem_long_p(heap, 1, next);
  } else {
    printf("PE %d: no case '%s'\n", me, c);
    return 2;
  }
  printf("PE %d: case '%s' was not refused\n", me, c);
  return 3;
}
