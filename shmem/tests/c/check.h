/* Helpers of pld's own OpenSHMEM test programs: each PE checks its results
 * and exits non-zero, naming the mismatch, if one is wrong. */
#ifndef PLD_SHMEM_TEST_CHECK_H
#define PLD_SHMEM_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <shmem.h>

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "PE %d: %s:%d: check failed: %s: ", shmem_my_pe(), \
              __FILE__, __LINE__, #cond);                                  \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

#endif
