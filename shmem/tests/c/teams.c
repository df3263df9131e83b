/* Teams: world and shared, split_strided (evens, a stride that leaves
 * PEs out, a split of a split), split_2d, translate_pe, get_config,
 * team_sync, team_ptr, destroy (slots reused: many splits in a row), and
 * SHMEM_TEAM_INVALID answered with -1. */
#include <string.h>
#include "check.h"

static long counter;

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();

  CHECK(shmem_team_my_pe(SHMEM_TEAM_WORLD) == me, "world my_pe");
  CHECK(shmem_team_n_pes(SHMEM_TEAM_WORLD) == n, "world n_pes");
  /* pld-oshrun starts every PE on this host. */
  CHECK(shmem_team_n_pes(SHMEM_TEAM_SHARED) == n, "shared n_pes %d", shmem_team_n_pes(SHMEM_TEAM_SHARED));
  CHECK(shmem_team_my_pe(SHMEM_TEAM_SHARED) == me, "shared my_pe");
  CHECK(shmem_team_my_pe(SHMEM_TEAM_INVALID) == -1, "invalid my_pe");
  CHECK(shmem_team_n_pes(SHMEM_TEAM_INVALID) == -1, "invalid n_pes");
  CHECK(shmem_team_sync(SHMEM_TEAM_INVALID) != 0, "invalid sync");

  /* The even PEs, with a config. */
  shmem_team_config_t conf = {.num_contexts = 3};
  shmem_team_t evens;
  int nevens = (n + 1) / 2;
  CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, nevens, &conf, SHMEM_TEAM_NUM_CONTEXTS, &evens) == 0, "split evens");
  if (me % 2 == 0) {
    CHECK(evens != SHMEM_TEAM_INVALID, "an even PE is in evens");
    CHECK(shmem_team_my_pe(evens) == me / 2, "evens my_pe %d", shmem_team_my_pe(evens));
    CHECK(shmem_team_n_pes(evens) == nevens, "evens n_pes");
    shmem_team_config_t got = {0};
    CHECK(shmem_team_get_config(evens, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0 && got.num_contexts == 3, "config %d", got.num_contexts);
    for (int i = 0; i < nevens; i++) {
      CHECK(shmem_team_translate_pe(evens, i, SHMEM_TEAM_WORLD) == 2 * i, "translate %d", i);
      CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, 2 * i, evens) == i, "translate back %d", i);
    }
    if (n > 1)
      CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, 1, evens) == -1, "PE 1 is not even");
    /* team_ptr: this PE's own address; another member's is the same as
     * shmem_ptr gives for its global PE. */
    CHECK(shmem_team_ptr(evens, &counter, me / 2) == (void *)&counter, "team_ptr self");
    if (nevens > 1) {
      int next = (me / 2 + 1) % nevens;
      CHECK(shmem_team_ptr(evens, &counter, next) == shmem_ptr(&counter, 2 * next), "team_ptr other");
    }
    /* The team's barrier orders an atomic before it with a read after. */
    shmem_long_atomic_inc(&counter, 0);
    shmem_quiet();
    CHECK(shmem_team_sync(evens) == 0, "team_sync");
    if (me == 0)
      CHECK(shmem_long_atomic_fetch(&counter, 0) == nevens, "every even PE counted: %ld", shmem_long_atomic_fetch(&counter, 0));
    /* A split of a split: every other even PE (0, 4, ...). */
    shmem_team_t quarter;
    int nq = (nevens + 1) / 2;
    CHECK(shmem_team_split_strided(evens, 0, 2, nq, NULL, 0, &quarter) == 0, "split of a split");
    if (me % 4 == 0) {
      CHECK(shmem_team_my_pe(quarter) == me / 4, "quarter my_pe");
      CHECK(shmem_team_translate_pe(quarter, nq - 1, SHMEM_TEAM_WORLD) == 4 * (nq - 1), "quarter translate");
      CHECK(shmem_team_sync(quarter) == 0, "quarter sync");
      shmem_team_destroy(quarter);
    } else {
      CHECK(quarter == SHMEM_TEAM_INVALID, "not in quarter");
    }
    shmem_team_destroy(evens);
  } else {
    CHECK(evens == SHMEM_TEAM_INVALID, "an odd PE is not in evens");
  }
  shmem_barrier_all();

  /* split_2d: rows of 2 (x) and columns (y). */
  shmem_team_t row, col;
  CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &row, NULL, 0, &col) == 0, "split_2d");
  int rown = (me / 2 * 2 + 2 <= n) ? 2 : n - me / 2 * 2;
  CHECK(shmem_team_n_pes(row) == rown, "row size %d", shmem_team_n_pes(row));
  CHECK(shmem_team_my_pe(row) == me % 2, "row my_pe");
  CHECK(shmem_team_n_pes(col) == (n - me % 2 + 1) / 2, "column size %d", shmem_team_n_pes(col));
  CHECK(shmem_team_my_pe(col) == me / 2, "column my_pe");
  CHECK(shmem_team_translate_pe(row, 0, SHMEM_TEAM_WORLD) == me / 2 * 2, "row translate");
  CHECK(shmem_team_translate_pe(col, 0, SHMEM_TEAM_WORLD) == me % 2, "column translate");
  CHECK(shmem_team_sync(row) == 0 && shmem_team_sync(col) == 0, "2-D syncs");
  shmem_team_destroy(row);
  shmem_team_destroy(col);

  /* Slots come back: more splits in a row than a PE has slots. */
  for (int i = 0; i < 100; i++) {
    shmem_team_t t;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &t) == 0, "split %d", i);
    CHECK(shmem_team_sync(t) == 0, "sync %d", i);
    shmem_team_destroy(t);
  }
  shmem_barrier_all();
  if (me == 0)
    printf("teams: OK on %d PEs\n", n);
  shmem_finalize();
  return 0;
}
