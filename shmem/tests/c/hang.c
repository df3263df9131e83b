/* Each PE says who it is (its pid and the launcher's key directory) and
 * then waits for a flag nobody sets: a job the launcher's signals must
 * stop. */
#include <stdlib.h>
#include <unistd.h>
#include "check.h"

static long flag;

int main(void) {
  shmem_init();
  const char *keys = getenv("PLD_TLS_DIR");
  printf("PE %d pid %d keys %s\n", shmem_my_pe(), (int)getpid(), keys ? keys : "-");
  fflush(stdout);
  shmem_long_wait_until(&flag, SHMEM_CMP_NE, 0);
  return 0;
}
