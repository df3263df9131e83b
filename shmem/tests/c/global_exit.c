/* shmem_global_exit: the last PE ends the job with status 7 while the
 * others wait in a barrier; the launcher returns 7 and stops them. */
#include "check.h"

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  if (me == n - 1) {
    printf("PE %d calls shmem_global_exit(7)\n", me);
    shmem_global_exit(7);
  }
  shmem_barrier_all();
  fprintf(stderr, "PE %d left a barrier that PE %d never entered\n", me, n - 1);
  return 3;
}
