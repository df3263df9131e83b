/* shmem_global_exit: the last PE ends the job with STATUS (argv[1],
 * default 7) while the others wait in a barrier; the launcher returns
 * the status exit() would give it (STATUS & 0xff) and stops them. */
#include "check.h"

int main(int argc, char **argv) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  int status = argc > 1 ? atoi(argv[1]) : 7;
  if (me == n - 1) {
    printf("PE %d calls shmem_global_exit(%d)\n", me, status);
    shmem_global_exit(status);
  }
  shmem_barrier_all();
  fprintf(stderr, "PE %d left a barrier that PE %d never entered\n", me, n - 1);
  return 3;
}
