/* Setup, query and the heap calls, with the 1.0-era names: init_thread
 * and query_thread, info_get_version / name, pe_accessible and
 * addr_accessible, calloc / align / realloc / free (the same offsets on
 * every PE, the data kept by realloc, realloc to 0 frees), malloc(0), and
 * sync_all. */
#include <string.h>
#include "check.h"

int main(void) {
  int provided = -1;
  CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "init_thread");
  CHECK(provided == SHMEM_THREAD_MULTIPLE, "provided=%d", provided);
  shmem_query_thread(&provided);
  CHECK(provided == SHMEM_THREAD_MULTIPLE, "query_thread=%d", provided);
  int me = shmem_my_pe(), n = shmem_n_pes();
  CHECK(me == _my_pe() && n == _num_pes(), "1.0 names");
  int major = 0, minor = 0;
  shmem_info_get_version(&major, &minor);
  CHECK(major == SHMEM_MAJOR_VERSION && minor == SHMEM_MINOR_VERSION, "version %d.%d", major, minor);
  char name[SHMEM_MAX_NAME_LEN];
  shmem_info_get_name(name);
  CHECK(strcmp(name, SHMEM_VENDOR_STRING) == 0, "name '%s'", name);
  CHECK(shmem_pe_accessible(n - 1) && !shmem_pe_accessible(n) && !shmem_pe_accessible(-1), "pe_accessible");

  /* The heap: aligned blocks at the same address offset on every PE. */
  long *a = shmalloc(10 * sizeof(long));
  char *b = shmem_align(4096, 100);
  CHECK(((uintptr_t)b % 4096) == 0, "align: %p", (void *)b);
  CHECK(shmem_malloc(0) == NULL, "malloc(0)");
  CHECK(shmem_addr_accessible(a, (me + 1) % n), "a heap block is accessible");
  /* Every PE's blocks sit at the same offset: put to a and b on the right. */
  for (int i = 0; i < 10; i++) a[i] = -1;
  memset(b, 0, 100);
  shmem_sync_all();
  long mine[10];
  for (int i = 0; i < 10; i++) mine[i] = me * 10 + i;
  shmem_long_put(a, mine, 10, (me + 1) % n);
  shmem_putmem(b, "symmetric", 10, (me + 1) % n);
  shmem_barrier_all();
  int left = (me + n - 1) % n;
  for (int i = 0; i < 10; i++) CHECK(a[i] == left * 10 + i, "a[%d]=%ld", i, a[i]);
  CHECK(strcmp(b, "symmetric") == 0, "b='%s'", b);
  /* realloc keeps the data; the new block is as symmetric as the old. */
  a = shrealloc(a, 1000 * sizeof(long));
  for (int i = 0; i < 10; i++) CHECK(a[i] == left * 10 + i, "realloc a[%d]=%ld", i, a[i]);
  shmem_long_p(&a[999], me, (me + 1) % n);
  shmem_barrier_all();
  CHECK(a[999] == left, "a[999]=%ld", a[999]);
  int *c = shmem_calloc(64, sizeof(int));
  for (int i = 0; i < 64; i++) CHECK(c[i] == 0, "calloc c[%d]=%d", i, c[i]);
  shfree(c);
  /* realloc to 0 bytes frees the block and returns NULL (1.5, 9.3.3):
   * the next allocation of its size takes its place. */
  void *d = shmem_malloc(256);
  CHECK(shmem_realloc(d, 0) == NULL, "realloc(d, 0) returned non-NULL");
  void *e = shmem_malloc(256);
  CHECK(e == d, "the freed block %p was not reused (got %p)", d, e);
  shmem_free(e);
  shmem_free(b);
  shmem_free(a);
  shmem_finalize();
  if (me == 0) printf("setup: OK on %d PEs\n", n);
  return 0;
}
