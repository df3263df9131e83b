/*
 * shmem.h — OpenSHMEM 1.5 on pld (libpld_shmem).
 *
 * Written for pld: each processing element (PE) embeds a pld rank; the
 * symmetric heap and the program's data segment are its windows. Compile
 * with `pld-oshcc`, run with `pld-oshrun -np N`. docs/shmem.md says what
 * each call does on pld.
 *
 * The typed API is declared from the type tables below (X-macros): the
 * library's typed entry points are generated from the same tables at build
 * time (shmem/build.rs reads this file), so a type is listed once.
 */
#ifndef PLD_SHMEM_H
#define PLD_SHMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version and library constants ------------------------------------ */

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define SHMEM_MAX_NAME_LEN 256
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define SHMEM_VENDOR_STRING "pld OpenSHMEM (libpld_shmem)"
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

/* Point-to-point comparisons (wait_until, test, signal_wait_until). */
#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_LE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_GE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_LE SHMEM_CMP_LE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_GE SHMEM_CMP_GE

/* put_signal's operations. */
#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

/* The active-set collectives' work arrays (sizes in longs / elements). A
 * pSync array holds the cells of pld's dissemination barrier over the set
 * (two epoch parities of up to 32 rounds) and one count cell. */
#define SHMEM_SYNC_VALUE (-1L)
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define SHMEM_BARRIER_SYNC_SIZE 72
#define SHMEM_BCAST_SYNC_SIZE 72
#define SHMEM_COLLECT_SYNC_SIZE 72
#define SHMEM_REDUCE_SYNC_SIZE 72
#define SHMEM_ALLTOALL_SYNC_SIZE 72
#define SHMEM_ALLTOALLS_SYNC_SIZE 72
#define SHMEM_SYNC_SIZE 72
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_ALLTOALL_SYNC_SIZE SHMEM_ALLTOALL_SYNC_SIZE
#define _SHMEM_ALLTOALLS_SYNC_SIZE SHMEM_ALLTOALLS_SYNC_SIZE
#define _SHMEM_SYNC_SIZE SHMEM_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

/* Teams. A handle is a small number; SHMEM_TEAM_INVALID is none. */
typedef struct pld_shmem_team *shmem_team_t;
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)
#define SHMEM_TEAM_WORLD ((shmem_team_t)1)
#define SHMEM_TEAM_SHARED ((shmem_team_t)2)
typedef struct {
  int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS (1L << 0)

/* Memory hints of shmem_malloc_with_hints (accepted, not acted on). */
#define SHMEM_MALLOC_ATOMICS_REMOTE 1
#define SHMEM_MALLOC_SIGNAL_REMOTE 2

/* ---- Type tables -------------------------------------------------------
 * X(TYPE, TYPENAME): every standard RMA type. The "BASE" tables hold the
 * distinct C types (what a C11 _Generic selection may list); the "ALIAS"
 * tables the <stdint.h> / <stddef.h> names, which are typedefs of them.
 */
#define PLD_SHMEM_RMA_BASE_TYPES(X) \
  X(float, float) \
  X(double, double) \
  X(long double, longdouble) \
  X(char, char) \
  X(signed char, schar) \
  X(short, short) \
  X(int, int) \
  X(long, long) \
  X(long long, longlong) \
  X(unsigned char, uchar) \
  X(unsigned short, ushort) \
  X(unsigned int, uint) \
  X(unsigned long, ulong) \
  X(unsigned long long, ulonglong)

#define PLD_SHMEM_RMA_ALIAS_TYPES(X) \
  X(int8_t, int8) \
  X(int16_t, int16) \
  X(int32_t, int32) \
  X(int64_t, int64) \
  X(uint8_t, uint8) \
  X(uint16_t, uint16) \
  X(uint32_t, uint32) \
  X(uint64_t, uint64) \
  X(size_t, size) \
  X(ptrdiff_t, ptrdiff)

/* The standard AMO types: compare_swap, fetch_inc, inc, fetch_add, add. */
#define PLD_SHMEM_AMO_BASE_TYPES(X) \
  X(int, int) \
  X(long, long) \
  X(long long, longlong) \
  X(unsigned int, uint) \
  X(unsigned long, ulong) \
  X(unsigned long long, ulonglong)

#define PLD_SHMEM_AMO_ALIAS_TYPES(X) \
  X(int32_t, int32) \
  X(int64_t, int64) \
  X(uint32_t, uint32) \
  X(uint64_t, uint64) \
  X(size_t, size) \
  X(ptrdiff_t, ptrdiff)

/* The extended AMO types add these to the standard ones: fetch, set, swap. */
#define PLD_SHMEM_AMO_EXT_TYPES(X) \
  X(float, float) \
  X(double, double)

/* The bitwise AMO types: and, or, xor and their fetch forms. */
#define PLD_SHMEM_AMO_BIT_BASE_TYPES(X) \
  X(unsigned int, uint) \
  X(unsigned long, ulong) \
  X(unsigned long long, ulonglong)

#define PLD_SHMEM_AMO_BIT_ALIAS_TYPES(X) \
  X(int32_t, int32) \
  X(int64_t, int64) \
  X(uint32_t, uint32) \
  X(uint64_t, uint64)

/* The point-to-point synchronization types: wait_until and test. */
#define PLD_SHMEM_P2P_BASE_TYPES(X) \
  X(short, short) \
  X(int, int) \
  X(long, long) \
  X(long long, longlong) \
  X(unsigned short, ushort) \
  X(unsigned int, uint) \
  X(unsigned long, ulong) \
  X(unsigned long long, ulonglong)

#define PLD_SHMEM_P2P_ALIAS_TYPES(X) \
  X(int32_t, int32) \
  X(int64_t, int64) \
  X(uint32_t, uint32) \
  X(uint64_t, uint64) \
  X(size_t, size) \
  X(ptrdiff_t, ptrdiff)

/* The 1.5 team reductions: and / or / xor ... */
#define PLD_SHMEM_REDUCE_BIT_TYPES(X) \
  X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) \
  X(int8_t, int8) X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) \
  X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) \
  X(size_t, size)

/* ... and max / min / sum / prod (long double and the complex types are
 * defined inline below). */
#define PLD_SHMEM_REDUCE_ARITH_TYPES(X) \
  X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long) \
  X(long long, longlong) X(ptrdiff_t, ptrdiff) \
  X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) \
  X(int8_t, int8) X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) \
  X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) \
  X(size_t, size) X(float, float) X(double, double)

/* The 1.4 active-set reductions (shmem_TYPE_OP_to_all). */
#define PLD_SHMEM_TO_ALL_BIT_TYPES(X) \
  X(short, short) X(int, int) X(long, long) X(long long, longlong)
#define PLD_SHMEM_TO_ALL_ARITH_TYPES(X) \
  X(short, short) X(int, int) X(long, long) X(long long, longlong) \
  X(float, float) X(double, double)

/* The sized RMA routines: X(BITS). */
#define PLD_SHMEM_SIZES(X) X(8) X(16) X(32) X(64) X(128)

/* ---- Setup, query, exit ------------------------------------------------ */

void shmem_init(void);
int shmem_init_thread(int requested, int *provided);
void shmem_query_thread(int *provided);
void shmem_finalize(void);
void shmem_global_exit(int status);
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void *addr, int pe);
void *shmem_ptr(const void *dest, int pe);
void shmem_info_get_version(int *major, int *minor);
void shmem_info_get_name(char *name);

/* ---- Symmetric heap ----------------------------------------------------- */

void *shmem_malloc(size_t size);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void *shmem_realloc(void *ptr, size_t size);
void shmem_free(void *ptr);
void *shmem_malloc_with_hints(size_t size, long hints);

/* ---- Contexts ----------------------------------------------------------- */

/* A context handle is a small number; SHMEM_CTX_INVALID is none. */
typedef struct pld_shmem_ctx *shmem_ctx_t;
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)
#define SHMEM_CTX_DEFAULT ((shmem_ctx_t)1)
#define SHMEM_CTX_SERIALIZED (1L << 0)
#define SHMEM_CTX_PRIVATE (1L << 1)
#define SHMEM_CTX_NOSTORE (1L << 2)
int shmem_ctx_create(long options, shmem_ctx_t *ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_ctx_quiet(shmem_ctx_t ctx);

/* Declares shmem_NAME and its context form, shmem_ctx_NAME. */
#define PLD_BOTH(R, NAME, ...) \
  R shmem_##NAME(__VA_ARGS__); \
  R shmem_ctx_##NAME(shmem_ctx_t ctx, __VA_ARGS__);

/* ---- RMA ---------------------------------------------------------------- */

PLD_BOTH(void, putmem, void *dest, const void *source, size_t nelems, int pe)
PLD_BOTH(void, getmem, void *dest, const void *source, size_t nelems, int pe)
PLD_BOTH(void, putmem_nbi, void *dest, const void *source, size_t nelems, int pe)
PLD_BOTH(void, getmem_nbi, void *dest, const void *source, size_t nelems, int pe)

#define PLD_DECL_RMA(T, N) \
  PLD_BOTH(void, N##_put, T *dest, const T *source, size_t nelems, int pe) \
  PLD_BOTH(void, N##_get, T *dest, const T *source, size_t nelems, int pe) \
  PLD_BOTH(void, N##_put_nbi, T *dest, const T *source, size_t nelems, int pe) \
  PLD_BOTH(void, N##_get_nbi, T *dest, const T *source, size_t nelems, int pe) \
  PLD_BOTH(void, N##_iput, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe) \
  PLD_BOTH(void, N##_iget, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe) \
  PLD_BOTH(void, N##_put_signal, T *dest, const T *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) \
  PLD_BOTH(void, N##_put_signal_nbi, T *dest, const T *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
PLD_SHMEM_RMA_BASE_TYPES(PLD_DECL_RMA)
PLD_SHMEM_RMA_ALIAS_TYPES(PLD_DECL_RMA)
#undef PLD_DECL_RMA

/* p and g take and return the element by value. long double's are defined
 * here, over putmem and getmem (its x87 form has no Rust ABI); the
 * declarations below then take their internal linkage. */
static inline void shmem_longdouble_p(long double *dest, long double value, int pe) {
  shmem_putmem(dest, &value, sizeof value, pe);
}
static inline long double shmem_longdouble_g(const long double *source, int pe) {
  long double v;
  shmem_getmem(&v, source, sizeof v, pe);
  return v;
}
static inline void shmem_ctx_longdouble_p(shmem_ctx_t ctx, long double *dest, long double value, int pe) {
  shmem_ctx_putmem(ctx, dest, &value, sizeof value, pe);
}
static inline long double shmem_ctx_longdouble_g(shmem_ctx_t ctx, const long double *source, int pe) {
  long double v;
  shmem_ctx_getmem(ctx, &v, source, sizeof v, pe);
  return v;
}
#define PLD_DECL_PG(T, N) \
  PLD_BOTH(void, N##_p, T *dest, T value, int pe) \
  PLD_BOTH(T, N##_g, const T *source, int pe)
PLD_SHMEM_RMA_BASE_TYPES(PLD_DECL_PG)
PLD_SHMEM_RMA_ALIAS_TYPES(PLD_DECL_PG)
#undef PLD_DECL_PG

#define PLD_DECL_SIZED(B) \
  PLD_BOTH(void, put##B, void *dest, const void *source, size_t nelems, int pe) \
  PLD_BOTH(void, get##B, void *dest, const void *source, size_t nelems, int pe) \
  PLD_BOTH(void, put##B##_nbi, void *dest, const void *source, size_t nelems, int pe) \
  PLD_BOTH(void, get##B##_nbi, void *dest, const void *source, size_t nelems, int pe) \
  PLD_BOTH(void, iput##B, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe) \
  PLD_BOTH(void, iget##B, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe)
PLD_SHMEM_SIZES(PLD_DECL_SIZED)
#undef PLD_DECL_SIZED

/* ---- Signals ------------------------------------------------------------ */

PLD_BOTH(void, putmem_signal, void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
PLD_BOTH(void, putmem_signal_nbi, void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
#define PLD_DECL_SIZED_SIGNAL(B) \
  PLD_BOTH(void, put##B##_signal, void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) \
  PLD_BOTH(void, put##B##_signal_nbi, void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
PLD_SHMEM_SIZES(PLD_DECL_SIZED_SIGNAL)
#undef PLD_DECL_SIZED_SIGNAL
uint64_t shmem_signal_fetch(const uint64_t *sig_addr);
uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value);

/* ---- Atomics ------------------------------------------------------------ */

#define PLD_DECL_AMO_STD(T, N) \
  PLD_BOTH(T, N##_atomic_compare_swap, T *dest, T cond, T value, int pe) \
  PLD_BOTH(T, N##_atomic_fetch_inc, T *dest, int pe) \
  PLD_BOTH(void, N##_atomic_inc, T *dest, int pe) \
  PLD_BOTH(T, N##_atomic_fetch_add, T *dest, T value, int pe) \
  PLD_BOTH(void, N##_atomic_add, T *dest, T value, int pe) \
  PLD_BOTH(void, N##_atomic_compare_swap_nbi, T *fetch, T *dest, T cond, T value, int pe) \
  PLD_BOTH(void, N##_atomic_fetch_inc_nbi, T *fetch, T *dest, int pe) \
  PLD_BOTH(void, N##_atomic_fetch_add_nbi, T *fetch, T *dest, T value, int pe)
#define PLD_DECL_AMO_EXT(T, N) \
  PLD_BOTH(T, N##_atomic_fetch, const T *source, int pe) \
  PLD_BOTH(void, N##_atomic_set, T *dest, T value, int pe) \
  PLD_BOTH(T, N##_atomic_swap, T *dest, T value, int pe) \
  PLD_BOTH(void, N##_atomic_fetch_nbi, T *fetch, const T *source, int pe) \
  PLD_BOTH(void, N##_atomic_swap_nbi, T *fetch, T *dest, T value, int pe)
#define PLD_DECL_AMO_BIT(T, N) \
  PLD_BOTH(T, N##_atomic_fetch_and, T *dest, T value, int pe) \
  PLD_BOTH(void, N##_atomic_and, T *dest, T value, int pe) \
  PLD_BOTH(T, N##_atomic_fetch_or, T *dest, T value, int pe) \
  PLD_BOTH(void, N##_atomic_or, T *dest, T value, int pe) \
  PLD_BOTH(T, N##_atomic_fetch_xor, T *dest, T value, int pe) \
  PLD_BOTH(void, N##_atomic_xor, T *dest, T value, int pe) \
  PLD_BOTH(void, N##_atomic_fetch_and_nbi, T *fetch, T *dest, T value, int pe) \
  PLD_BOTH(void, N##_atomic_fetch_or_nbi, T *fetch, T *dest, T value, int pe) \
  PLD_BOTH(void, N##_atomic_fetch_xor_nbi, T *fetch, T *dest, T value, int pe)
PLD_SHMEM_AMO_BASE_TYPES(PLD_DECL_AMO_STD)
PLD_SHMEM_AMO_ALIAS_TYPES(PLD_DECL_AMO_STD)
PLD_SHMEM_AMO_BASE_TYPES(PLD_DECL_AMO_EXT)
PLD_SHMEM_AMO_ALIAS_TYPES(PLD_DECL_AMO_EXT)
PLD_SHMEM_AMO_EXT_TYPES(PLD_DECL_AMO_EXT)
PLD_SHMEM_AMO_BIT_BASE_TYPES(PLD_DECL_AMO_BIT)
PLD_SHMEM_AMO_BIT_ALIAS_TYPES(PLD_DECL_AMO_BIT)
#undef PLD_DECL_AMO_STD
#undef PLD_DECL_AMO_EXT
#undef PLD_DECL_AMO_BIT

/* ---- Point-to-point synchronization ------------------------------------- */

#define PLD_DECL_P2P(T, N) \
  void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value); \
  void shmem_##N##_wait_until_all(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value); \
  size_t shmem_##N##_wait_until_any(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value); \
  size_t shmem_##N##_wait_until_some(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp, T cmp_value); \
  void shmem_##N##_wait_until_all_vector(T *ivars, size_t nelems, const int *status, int cmp, T *cmp_values); \
  size_t shmem_##N##_wait_until_any_vector(T *ivars, size_t nelems, const int *status, int cmp, T *cmp_values); \
  size_t shmem_##N##_wait_until_some_vector(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp, T *cmp_values); \
  int shmem_##N##_test(T *ivar, int cmp, T cmp_value); \
  int shmem_##N##_test_all(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value); \
  size_t shmem_##N##_test_any(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value); \
  size_t shmem_##N##_test_some(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp, T cmp_value); \
  int shmem_##N##_test_all_vector(T *ivars, size_t nelems, const int *status, int cmp, T *cmp_values); \
  size_t shmem_##N##_test_any_vector(T *ivars, size_t nelems, const int *status, int cmp, T *cmp_values); \
  size_t shmem_##N##_test_some_vector(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp, T *cmp_values); \
  void shmem_##N##_wait(T *ivar, T cmp_value);
PLD_SHMEM_P2P_BASE_TYPES(PLD_DECL_P2P)
PLD_SHMEM_P2P_ALIAS_TYPES(PLD_DECL_P2P)
#undef PLD_DECL_P2P

/* ---- Memory ordering and barriers --------------------------------------- */

void shmem_fence(void);
void shmem_quiet(void);
void shmem_barrier_all(void);
void shmem_sync_all(void);
/* The active-set barrier: PEs PE_start, PE_start + 2^logPE_stride, ... */
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync);

void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync);

/* ---- Distributed locks -------------------------------------------------- */

void shmem_set_lock(long *lock);
int shmem_test_lock(long *lock);
void shmem_clear_lock(long *lock);

/* ---- Teams -------------------------------------------------------------- */

int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size, const shmem_team_config_t *config, long config_mask, shmem_team_t *new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange, const shmem_team_config_t *xaxis_config, long xaxis_mask, shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config, long yaxis_mask, shmem_team_t *yaxis_team);
void shmem_team_destroy(shmem_team_t team);
int shmem_team_sync(shmem_team_t team);
void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe);

/* ---- Collectives ---------------------------------------------------------- */

#define PLD_DECL_COLL(T, N) \
  int shmem_##N##_broadcast(shmem_team_t team, T *dest, const T *source, size_t nelems, int PE_root); \
  int shmem_##N##_collect(shmem_team_t team, T *dest, const T *source, size_t nelems); \
  int shmem_##N##_fcollect(shmem_team_t team, T *dest, const T *source, size_t nelems); \
  int shmem_##N##_alltoall(shmem_team_t team, T *dest, const T *source, size_t nelems); \
  int shmem_##N##_alltoalls(shmem_team_t team, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems);
PLD_SHMEM_RMA_BASE_TYPES(PLD_DECL_COLL)
PLD_SHMEM_RMA_ALIAS_TYPES(PLD_DECL_COLL)
#undef PLD_DECL_COLL
int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems, int PE_root);
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems);

#define PLD_DECL_ACTIVE(B) \
  void shmem_broadcast##B(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride, int PE_size, long *pSync); \
  void shmem_collect##B(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync); \
  void shmem_fcollect##B(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync); \
  void shmem_alltoall##B(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync); \
  void shmem_alltoalls##B(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync);
PLD_DECL_ACTIVE(32)
PLD_DECL_ACTIVE(64)
#undef PLD_DECL_ACTIVE

#define PLD_DECL_REDUCE_BIT(T, N) \
  int shmem_##N##_and_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce); \
  int shmem_##N##_or_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce); \
  int shmem_##N##_xor_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);
#define PLD_DECL_REDUCE_ARITH(T, N) \
  int shmem_##N##_max_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce); \
  int shmem_##N##_min_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce); \
  int shmem_##N##_sum_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce); \
  int shmem_##N##_prod_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);
#define PLD_DECL_TO_ALL_BIT(T, N) \
  void shmem_##N##_and_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride, int PE_size, T *pWrk, long *pSync); \
  void shmem_##N##_or_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride, int PE_size, T *pWrk, long *pSync); \
  void shmem_##N##_xor_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride, int PE_size, T *pWrk, long *pSync);
#define PLD_DECL_TO_ALL_ARITH(T, N) \
  void shmem_##N##_max_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride, int PE_size, T *pWrk, long *pSync); \
  void shmem_##N##_min_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride, int PE_size, T *pWrk, long *pSync); \
  void shmem_##N##_sum_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride, int PE_size, T *pWrk, long *pSync); \
  void shmem_##N##_prod_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride, int PE_size, T *pWrk, long *pSync);
PLD_SHMEM_REDUCE_BIT_TYPES(PLD_DECL_REDUCE_BIT)
PLD_SHMEM_REDUCE_ARITH_TYPES(PLD_DECL_REDUCE_ARITH)
PLD_SHMEM_TO_ALL_BIT_TYPES(PLD_DECL_TO_ALL_BIT)
PLD_SHMEM_TO_ALL_ARITH_TYPES(PLD_DECL_TO_ALL_ARITH)
#undef PLD_DECL_REDUCE_BIT
#undef PLD_DECL_REDUCE_ARITH
#undef PLD_DECL_TO_ALL_BIT
#undef PLD_DECL_TO_ALL_ARITH

/* The reductions of long double and the complex types, which Rust has no
 * arithmetic for: the library moves their bytes (pld_shmem_reduce), and
 * these combine two elements in C. */
int pld_shmem_reduce(const char *call, shmem_team_t team, void *dest, const void *source, size_t nreduce, size_t size, void (*combine)(void *acc, const void *x), int PE_start, int logPE_stride, int PE_size, long *pSync);
#define PLD_C_COMBINE(N, T, OP, EXPR) \
  static inline void pld_combine_##N##_##OP(void *acc, const void *other) { \
    T x = *(T *)acc, y = *(const T *)other; \
    *(T *)acc = (EXPR); \
  } \
  static inline int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce) { \
    return pld_shmem_reduce("shmem_" #N "_" #OP "_reduce", team, dest, source, nreduce, sizeof(T), pld_combine_##N##_##OP, 0, 0, 0, 0); \
  } \
  static inline void shmem_##N##_##OP##_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride, int PE_size, T *pWrk, long *pSync) { \
    (void)pWrk; \
    pld_shmem_reduce("shmem_" #N "_" #OP "_to_all", SHMEM_TEAM_INVALID, dest, source, nreduce < 0 ? (size_t)-1 : (size_t)nreduce, sizeof(T), pld_combine_##N##_##OP, PE_start, logPE_stride, PE_size, pSync); \
  }
PLD_C_COMBINE(longdouble, long double, sum, x + y)
PLD_C_COMBINE(longdouble, long double, prod, x * y)
PLD_C_COMBINE(longdouble, long double, max, x > y ? x : y)
PLD_C_COMBINE(longdouble, long double, min, x < y ? x : y)
#ifndef __cplusplus
PLD_C_COMBINE(complexf, float _Complex, sum, x + y)
PLD_C_COMBINE(complexf, float _Complex, prod, x * y)
PLD_C_COMBINE(complexd, double _Complex, sum, x + y)
PLD_C_COMBINE(complexd, double _Complex, prod, x * y)
#endif
#undef PLD_C_COMBINE

/* ---- The 1.3-era names existing programs still use ---------------------- */

void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);
void *shmalloc(size_t size);
void shfree(void *ptr);
void *shrealloc(void *ptr, size_t size);
void *shmemalign(size_t alignment, size_t size);

#define PLD_DEPRECATED_AMO(T, N) \
  static inline T shmem_##N##_fadd(T *d, T v, int pe) { return shmem_##N##_atomic_fetch_add(d, v, pe); } \
  static inline T shmem_##N##_finc(T *d, int pe) { return shmem_##N##_atomic_fetch_inc(d, pe); } \
  static inline void shmem_##N##_add(T *d, T v, int pe) { shmem_##N##_atomic_add(d, v, pe); } \
  static inline void shmem_##N##_inc(T *d, int pe) { shmem_##N##_atomic_inc(d, pe); } \
  static inline T shmem_##N##_cswap(T *d, T c, T v, int pe) { return shmem_##N##_atomic_compare_swap(d, c, v, pe); } \
  static inline T shmem_##N##_swap(T *d, T v, int pe) { return shmem_##N##_atomic_swap(d, v, pe); } \
  static inline T shmem_##N##_fetch(const T *s, int pe) { return shmem_##N##_atomic_fetch(s, pe); } \
  static inline void shmem_##N##_set(T *d, T v, int pe) { shmem_##N##_atomic_set(d, v, pe); }
PLD_DEPRECATED_AMO(int, int)
PLD_DEPRECATED_AMO(long, long)
PLD_DEPRECATED_AMO(long long, longlong)
#undef PLD_DEPRECATED_AMO
static inline float shmem_float_swap(float *d, float v, int pe) { return shmem_float_atomic_swap(d, v, pe); }
static inline double shmem_double_swap(double *d, double v, int pe) { return shmem_double_atomic_swap(d, v, pe); }
static inline float shmem_float_fetch(const float *s, int pe) { return shmem_float_atomic_fetch(s, pe); }
static inline double shmem_double_fetch(const double *s, int pe) { return shmem_double_atomic_fetch(s, pe); }
static inline void shmem_float_set(float *d, float v, int pe) { shmem_float_atomic_set(d, v, pe); }
static inline void shmem_double_set(double *d, double v, int pe) { shmem_double_atomic_set(d, v, pe); }
/* The profiling interface's control call: pld has no profiling levels. */
static inline void shmem_pcontrol(const int level, ...) { (void)level; }
static inline void shmem_clear_cache_inv(void) {}
static inline void shmem_set_cache_inv(void) {}
static inline void shmem_udcflush(void) {}

#ifdef __cplusplus
}
#endif

/* ---- C11 type-generic interfaces ----------------------------------------- */

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L

void pld_shmem_generic_bad_type(void);

/* A generic RMA or atomic call takes an optional context first: the
 * argument count picks the form. */
#define PLD_CAT(a, b) PLD_CAT_(a, b)
#define PLD_CAT_(a, b) a##b
#define PLD_NARGS(...) PLD_NARGS_(__VA_ARGS__, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define PLD_NARGS_(_1, _2, _3, _4, _5, _6, _7, _8, _9, N, ...) N
#define PLD_SEL_put(T, N) T: shmem_##N##_put,
#define PLD_SEL_get(T, N) T: shmem_##N##_get,
#define PLD_SEL_put_nbi(T, N) T: shmem_##N##_put_nbi,
#define PLD_SEL_get_nbi(T, N) T: shmem_##N##_get_nbi,
#define PLD_SEL_iput(T, N) T: shmem_##N##_iput,
#define PLD_SEL_iget(T, N) T: shmem_##N##_iget,
#define PLD_SEL_p(T, N) T: shmem_##N##_p,
#define PLD_SEL_g(T, N) T: shmem_##N##_g,
#define PLD_SEL_put_signal(T, N) T: shmem_##N##_put_signal,
#define PLD_SEL_put_signal_nbi(T, N) T: shmem_##N##_put_signal_nbi,
#define PLD_SEL_fetch(T, N) T: shmem_##N##_atomic_fetch,
#define PLD_SEL_set(T, N) T: shmem_##N##_atomic_set,
#define PLD_SEL_swap(T, N) T: shmem_##N##_atomic_swap,
#define PLD_SEL_fetch_nbi(T, N) T: shmem_##N##_atomic_fetch_nbi,
#define PLD_SEL_swap_nbi(T, N) T: shmem_##N##_atomic_swap_nbi,
#define PLD_SEL_compare_swap(T, N) T: shmem_##N##_atomic_compare_swap,
#define PLD_SEL_compare_swap_nbi(T, N) T: shmem_##N##_atomic_compare_swap_nbi,
#define PLD_SEL_fetch_inc(T, N) T: shmem_##N##_atomic_fetch_inc,
#define PLD_SEL_fetch_inc_nbi(T, N) T: shmem_##N##_atomic_fetch_inc_nbi,
#define PLD_SEL_inc(T, N) T: shmem_##N##_atomic_inc,
#define PLD_SEL_fetch_add(T, N) T: shmem_##N##_atomic_fetch_add,
#define PLD_SEL_fetch_add_nbi(T, N) T: shmem_##N##_atomic_fetch_add_nbi,
#define PLD_SEL_add(T, N) T: shmem_##N##_atomic_add,
#define PLD_SEL_fetch_and(T, N) T: shmem_##N##_atomic_fetch_and,
#define PLD_SEL_fetch_and_nbi(T, N) T: shmem_##N##_atomic_fetch_and_nbi,
#define PLD_SEL_and(T, N) T: shmem_##N##_atomic_and,
#define PLD_SEL_fetch_or(T, N) T: shmem_##N##_atomic_fetch_or,
#define PLD_SEL_fetch_or_nbi(T, N) T: shmem_##N##_atomic_fetch_or_nbi,
#define PLD_SEL_or(T, N) T: shmem_##N##_atomic_or,
#define PLD_SEL_fetch_xor(T, N) T: shmem_##N##_atomic_fetch_xor,
#define PLD_SEL_fetch_xor_nbi(T, N) T: shmem_##N##_atomic_fetch_xor_nbi,
#define PLD_SEL_xor(T, N) T: shmem_##N##_atomic_xor,
#define PLD_SEL_wait_until(T, N) T: shmem_##N##_wait_until,
#define PLD_SEL_wait_until_all(T, N) T: shmem_##N##_wait_until_all,
#define PLD_SEL_wait_until_any(T, N) T: shmem_##N##_wait_until_any,
#define PLD_SEL_wait_until_some(T, N) T: shmem_##N##_wait_until_some,
#define PLD_SEL_wait_until_all_vector(T, N) T: shmem_##N##_wait_until_all_vector,
#define PLD_SEL_wait_until_any_vector(T, N) T: shmem_##N##_wait_until_any_vector,
#define PLD_SEL_wait_until_some_vector(T, N) T: shmem_##N##_wait_until_some_vector,
#define PLD_SEL_test(T, N) T: shmem_##N##_test,
#define PLD_SEL_test_all(T, N) T: shmem_##N##_test_all,
#define PLD_SEL_test_any(T, N) T: shmem_##N##_test_any,
#define PLD_SEL_test_some(T, N) T: shmem_##N##_test_some,
#define PLD_SEL_test_all_vector(T, N) T: shmem_##N##_test_all_vector,
#define PLD_SEL_test_any_vector(T, N) T: shmem_##N##_test_any_vector,
#define PLD_SEL_test_some_vector(T, N) T: shmem_##N##_test_some_vector,

#define PLD_SEL_ctx_put(T, N) T: shmem_ctx_##N##_put,
#define PLD_SEL_ctx_get(T, N) T: shmem_ctx_##N##_get,
#define PLD_SEL_ctx_put_nbi(T, N) T: shmem_ctx_##N##_put_nbi,
#define PLD_SEL_ctx_get_nbi(T, N) T: shmem_ctx_##N##_get_nbi,
#define PLD_SEL_ctx_iput(T, N) T: shmem_ctx_##N##_iput,
#define PLD_SEL_ctx_iget(T, N) T: shmem_ctx_##N##_iget,
#define PLD_SEL_ctx_p(T, N) T: shmem_ctx_##N##_p,
#define PLD_SEL_ctx_g(T, N) T: shmem_ctx_##N##_g,
#define PLD_SEL_ctx_put_signal(T, N) T: shmem_ctx_##N##_put_signal,
#define PLD_SEL_ctx_put_signal_nbi(T, N) T: shmem_ctx_##N##_put_signal_nbi,
#define PLD_SEL_ctx_fetch(T, N) T: shmem_ctx_##N##_atomic_fetch,
#define PLD_SEL_ctx_set(T, N) T: shmem_ctx_##N##_atomic_set,
#define PLD_SEL_ctx_swap(T, N) T: shmem_ctx_##N##_atomic_swap,
#define PLD_SEL_ctx_fetch_nbi(T, N) T: shmem_ctx_##N##_atomic_fetch_nbi,
#define PLD_SEL_ctx_swap_nbi(T, N) T: shmem_ctx_##N##_atomic_swap_nbi,
#define PLD_SEL_ctx_compare_swap(T, N) T: shmem_ctx_##N##_atomic_compare_swap,
#define PLD_SEL_ctx_compare_swap_nbi(T, N) T: shmem_ctx_##N##_atomic_compare_swap_nbi,
#define PLD_SEL_ctx_fetch_inc(T, N) T: shmem_ctx_##N##_atomic_fetch_inc,
#define PLD_SEL_ctx_fetch_inc_nbi(T, N) T: shmem_ctx_##N##_atomic_fetch_inc_nbi,
#define PLD_SEL_ctx_inc(T, N) T: shmem_ctx_##N##_atomic_inc,
#define PLD_SEL_ctx_fetch_add(T, N) T: shmem_ctx_##N##_atomic_fetch_add,
#define PLD_SEL_ctx_fetch_add_nbi(T, N) T: shmem_ctx_##N##_atomic_fetch_add_nbi,
#define PLD_SEL_ctx_add(T, N) T: shmem_ctx_##N##_atomic_add,
#define PLD_SEL_ctx_fetch_and(T, N) T: shmem_ctx_##N##_atomic_fetch_and,
#define PLD_SEL_ctx_fetch_and_nbi(T, N) T: shmem_ctx_##N##_atomic_fetch_and_nbi,
#define PLD_SEL_ctx_and(T, N) T: shmem_ctx_##N##_atomic_and,
#define PLD_SEL_ctx_fetch_or(T, N) T: shmem_ctx_##N##_atomic_fetch_or,
#define PLD_SEL_ctx_fetch_or_nbi(T, N) T: shmem_ctx_##N##_atomic_fetch_or_nbi,
#define PLD_SEL_ctx_or(T, N) T: shmem_ctx_##N##_atomic_or,
#define PLD_SEL_ctx_fetch_xor(T, N) T: shmem_ctx_##N##_atomic_fetch_xor,
#define PLD_SEL_ctx_fetch_xor_nbi(T, N) T: shmem_ctx_##N##_atomic_fetch_xor_nbi,
#define PLD_SEL_ctx_xor(T, N) T: shmem_ctx_##N##_atomic_xor,
#define PLD_SEL_broadcast(T, N) T: shmem_##N##_broadcast,
#define PLD_SEL_collect(T, N) T: shmem_##N##_collect,
#define PLD_SEL_fcollect(T, N) T: shmem_##N##_fcollect,
#define PLD_SEL_alltoall(T, N) T: shmem_##N##_alltoall,
#define PLD_SEL_alltoalls(T, N) T: shmem_##N##_alltoalls,
#define PLD_SEL_and_reduce(T, N) T: shmem_##N##_and_reduce,
#define PLD_SEL_or_reduce(T, N) T: shmem_##N##_or_reduce,
#define PLD_SEL_xor_reduce(T, N) T: shmem_##N##_xor_reduce,
#define PLD_SEL_max_reduce(T, N) T: shmem_##N##_max_reduce,
#define PLD_SEL_min_reduce(T, N) T: shmem_##N##_min_reduce,
#define PLD_SEL_sum_reduce(T, N) T: shmem_##N##_sum_reduce,
#define PLD_SEL_prod_reduce(T, N) T: shmem_##N##_prod_reduce,
/* The C types a generic call can see (the <stdint.h> names are typedefs
 * of these), each with the typed call it selects. */
#define PLD_SHMEM_REDUCE_BIT_BASE_TYPES(X) \
  X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) \
  X(signed char, int8) X(short, int16) X(int, int32) X(long, int64)
#define PLD_SHMEM_REDUCE_ARITH_BASE_TYPES(X) \
  X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long) \
  X(long long, longlong) X(unsigned char, uchar) X(unsigned short, ushort) \
  X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
  X(float, float) X(double, double) X(long double, longdouble)
#define PLD_SHMEM_REDUCE_SUM_BASE_TYPES(X) \
  PLD_SHMEM_REDUCE_ARITH_BASE_TYPES(X) X(float _Complex, complexf) X(double _Complex, complexd)
#define PLD_SHMEM_AMO_BIT_GENERIC_TYPES(X) \
  PLD_SHMEM_AMO_BIT_BASE_TYPES(X) X(int, int32) X(long, int64)

#define PLD_RMA_SEL(op, x) _Generic((x), PLD_SHMEM_RMA_BASE_TYPES(PLD_SEL_##op) default: pld_shmem_generic_bad_type)
#define PLD_AMO_SEL(op, x) _Generic((x), PLD_SHMEM_AMO_BASE_TYPES(PLD_SEL_##op) default: pld_shmem_generic_bad_type)
#define PLD_EXT_SEL(op, x) _Generic((x), PLD_SHMEM_AMO_BASE_TYPES(PLD_SEL_##op) PLD_SHMEM_AMO_EXT_TYPES(PLD_SEL_##op) default: pld_shmem_generic_bad_type)
#define PLD_BIT_SEL(op, x) _Generic((x), PLD_SHMEM_AMO_BIT_GENERIC_TYPES(PLD_SEL_##op) default: pld_shmem_generic_bad_type)
#define PLD_P2P_SEL(op, x) _Generic((x), PLD_SHMEM_P2P_BASE_TYPES(PLD_SEL_##op) default: pld_shmem_generic_bad_type)

#define shmem_put(...) PLD_CAT(PLD_G_put_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_put_4(dest, source, nelems, pe) PLD_RMA_SEL(put, *(dest))(dest, source, nelems, pe)
#define PLD_G_put_5(ctx, dest, source, nelems, pe) PLD_RMA_SEL(ctx_put, *(dest))(ctx, dest, source, nelems, pe)
#define shmem_get(...) PLD_CAT(PLD_G_get_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_get_4(dest, source, nelems, pe) PLD_RMA_SEL(get, *(dest))(dest, source, nelems, pe)
#define PLD_G_get_5(ctx, dest, source, nelems, pe) PLD_RMA_SEL(ctx_get, *(dest))(ctx, dest, source, nelems, pe)
#define shmem_put_nbi(...) PLD_CAT(PLD_G_put_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_put_nbi_4(dest, source, nelems, pe) PLD_RMA_SEL(put_nbi, *(dest))(dest, source, nelems, pe)
#define PLD_G_put_nbi_5(ctx, dest, source, nelems, pe) PLD_RMA_SEL(ctx_put_nbi, *(dest))(ctx, dest, source, nelems, pe)
#define shmem_get_nbi(...) PLD_CAT(PLD_G_get_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_get_nbi_4(dest, source, nelems, pe) PLD_RMA_SEL(get_nbi, *(dest))(dest, source, nelems, pe)
#define PLD_G_get_nbi_5(ctx, dest, source, nelems, pe) PLD_RMA_SEL(ctx_get_nbi, *(dest))(ctx, dest, source, nelems, pe)
#define shmem_iput(...) PLD_CAT(PLD_G_iput_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_iput_6(dest, source, dst, sst, nelems, pe) PLD_RMA_SEL(iput, *(dest))(dest, source, dst, sst, nelems, pe)
#define PLD_G_iput_7(ctx, dest, source, dst, sst, nelems, pe) PLD_RMA_SEL(ctx_iput, *(dest))(ctx, dest, source, dst, sst, nelems, pe)
#define shmem_iget(...) PLD_CAT(PLD_G_iget_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_iget_6(dest, source, dst, sst, nelems, pe) PLD_RMA_SEL(iget, *(dest))(dest, source, dst, sst, nelems, pe)
#define PLD_G_iget_7(ctx, dest, source, dst, sst, nelems, pe) PLD_RMA_SEL(ctx_iget, *(dest))(ctx, dest, source, dst, sst, nelems, pe)
#define shmem_p(...) PLD_CAT(PLD_G_p_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_p_3(dest, value, pe) PLD_RMA_SEL(p, *(dest))(dest, value, pe)
#define PLD_G_p_4(ctx, dest, value, pe) PLD_RMA_SEL(ctx_p, *(dest))(ctx, dest, value, pe)
#define shmem_g(...) PLD_CAT(PLD_G_g_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_g_2(source, pe) PLD_RMA_SEL(g, *(source))(source, pe)
#define PLD_G_g_3(ctx, source, pe) PLD_RMA_SEL(ctx_g, *(source))(ctx, source, pe)
#define shmem_put_signal(...) PLD_CAT(PLD_G_put_signal_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_put_signal_7(dest, source, nelems, sig_addr, signal, sig_op, pe) PLD_RMA_SEL(put_signal, *(dest))(dest, source, nelems, sig_addr, signal, sig_op, pe)
#define PLD_G_put_signal_8(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe) PLD_RMA_SEL(ctx_put_signal, *(dest))(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe)
#define shmem_put_signal_nbi(...) PLD_CAT(PLD_G_put_signal_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_put_signal_nbi_7(dest, source, nelems, sig_addr, signal, sig_op, pe) PLD_RMA_SEL(put_signal_nbi, *(dest))(dest, source, nelems, sig_addr, signal, sig_op, pe)
#define PLD_G_put_signal_nbi_8(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe) PLD_RMA_SEL(ctx_put_signal_nbi, *(dest))(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe)

#define shmem_broadcast(team, dest, source, nelems, root) PLD_RMA_SEL(broadcast, *(dest))(team, dest, source, nelems, root)
#define shmem_collect(team, dest, source, nelems) PLD_RMA_SEL(collect, *(dest))(team, dest, source, nelems)
#define shmem_fcollect(team, dest, source, nelems) PLD_RMA_SEL(fcollect, *(dest))(team, dest, source, nelems)
#define shmem_alltoall(team, dest, source, nelems) PLD_RMA_SEL(alltoall, *(dest))(team, dest, source, nelems)
#define shmem_alltoalls(team, dest, source, dst, sst, nelems) PLD_RMA_SEL(alltoalls, *(dest))(team, dest, source, dst, sst, nelems)
#define PLD_RBIT_SEL(op, x) _Generic((x), PLD_SHMEM_REDUCE_BIT_BASE_TYPES(PLD_SEL_##op) default: pld_shmem_generic_bad_type)
#define PLD_RARITH_SEL(op, x) _Generic((x), PLD_SHMEM_REDUCE_ARITH_BASE_TYPES(PLD_SEL_##op) default: pld_shmem_generic_bad_type)
#define PLD_RSUM_SEL(op, x) _Generic((x), PLD_SHMEM_REDUCE_SUM_BASE_TYPES(PLD_SEL_##op) default: pld_shmem_generic_bad_type)
#define shmem_and_reduce(team, dest, source, n) PLD_RBIT_SEL(and_reduce, *(dest))(team, dest, source, n)
#define shmem_or_reduce(team, dest, source, n) PLD_RBIT_SEL(or_reduce, *(dest))(team, dest, source, n)
#define shmem_xor_reduce(team, dest, source, n) PLD_RBIT_SEL(xor_reduce, *(dest))(team, dest, source, n)
#define shmem_max_reduce(team, dest, source, n) PLD_RARITH_SEL(max_reduce, *(dest))(team, dest, source, n)
#define shmem_min_reduce(team, dest, source, n) PLD_RARITH_SEL(min_reduce, *(dest))(team, dest, source, n)
#define shmem_sum_reduce(team, dest, source, n) PLD_RSUM_SEL(sum_reduce, *(dest))(team, dest, source, n)
#define shmem_prod_reduce(team, dest, source, n) PLD_RSUM_SEL(prod_reduce, *(dest))(team, dest, source, n)
/* shmem_sync(team) is the team barrier; the 1.4 four-argument form stays. */
#define shmem_sync(...) PLD_CAT(PLD_G_sync_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_sync_1(team) shmem_team_sync(team)
#define PLD_G_sync_4(PE_start, logPE_stride, PE_size, pSync) (shmem_sync)(PE_start, logPE_stride, PE_size, pSync)

#define shmem_atomic_fetch(...) PLD_CAT(PLD_G_atomic_fetch_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_2(source, pe) PLD_EXT_SEL(fetch, *(source))(source, pe)
#define PLD_G_atomic_fetch_3(ctx, source, pe) PLD_EXT_SEL(ctx_fetch, *(source))(ctx, source, pe)
#define shmem_atomic_set(...) PLD_CAT(PLD_G_atomic_set_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_set_3(dest, value, pe) PLD_EXT_SEL(set, *(dest))(dest, value, pe)
#define PLD_G_atomic_set_4(ctx, dest, value, pe) PLD_EXT_SEL(ctx_set, *(dest))(ctx, dest, value, pe)
#define shmem_atomic_swap(...) PLD_CAT(PLD_G_atomic_swap_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_swap_3(dest, value, pe) PLD_EXT_SEL(swap, *(dest))(dest, value, pe)
#define PLD_G_atomic_swap_4(ctx, dest, value, pe) PLD_EXT_SEL(ctx_swap, *(dest))(ctx, dest, value, pe)
#define shmem_atomic_fetch_nbi(...) PLD_CAT(PLD_G_atomic_fetch_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_nbi_3(fetch, source, pe) PLD_EXT_SEL(fetch_nbi, *(source))(fetch, source, pe)
#define PLD_G_atomic_fetch_nbi_4(ctx, fetch, source, pe) PLD_EXT_SEL(ctx_fetch_nbi, *(source))(ctx, fetch, source, pe)
#define shmem_atomic_swap_nbi(...) PLD_CAT(PLD_G_atomic_swap_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_swap_nbi_4(fetch, dest, value, pe) PLD_EXT_SEL(swap_nbi, *(dest))(fetch, dest, value, pe)
#define PLD_G_atomic_swap_nbi_5(ctx, fetch, dest, value, pe) PLD_EXT_SEL(ctx_swap_nbi, *(dest))(ctx, fetch, dest, value, pe)
#define shmem_atomic_compare_swap(...) PLD_CAT(PLD_G_atomic_compare_swap_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_compare_swap_4(dest, cond, value, pe) PLD_AMO_SEL(compare_swap, *(dest))(dest, cond, value, pe)
#define PLD_G_atomic_compare_swap_5(ctx, dest, cond, value, pe) PLD_AMO_SEL(ctx_compare_swap, *(dest))(ctx, dest, cond, value, pe)
#define shmem_atomic_compare_swap_nbi(...) PLD_CAT(PLD_G_atomic_compare_swap_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_compare_swap_nbi_5(fetch, dest, cond, value, pe) PLD_AMO_SEL(compare_swap_nbi, *(dest))(fetch, dest, cond, value, pe)
#define PLD_G_atomic_compare_swap_nbi_6(ctx, fetch, dest, cond, value, pe) PLD_AMO_SEL(ctx_compare_swap_nbi, *(dest))(ctx, fetch, dest, cond, value, pe)
#define shmem_atomic_fetch_inc(...) PLD_CAT(PLD_G_atomic_fetch_inc_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_inc_2(dest, pe) PLD_AMO_SEL(fetch_inc, *(dest))(dest, pe)
#define PLD_G_atomic_fetch_inc_3(ctx, dest, pe) PLD_AMO_SEL(ctx_fetch_inc, *(dest))(ctx, dest, pe)
#define shmem_atomic_fetch_inc_nbi(...) PLD_CAT(PLD_G_atomic_fetch_inc_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_inc_nbi_3(fetch, dest, pe) PLD_AMO_SEL(fetch_inc_nbi, *(dest))(fetch, dest, pe)
#define PLD_G_atomic_fetch_inc_nbi_4(ctx, fetch, dest, pe) PLD_AMO_SEL(ctx_fetch_inc_nbi, *(dest))(ctx, fetch, dest, pe)
#define shmem_atomic_inc(...) PLD_CAT(PLD_G_atomic_inc_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_inc_2(dest, pe) PLD_AMO_SEL(inc, *(dest))(dest, pe)
#define PLD_G_atomic_inc_3(ctx, dest, pe) PLD_AMO_SEL(ctx_inc, *(dest))(ctx, dest, pe)
#define shmem_atomic_fetch_add(...) PLD_CAT(PLD_G_atomic_fetch_add_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_add_3(dest, value, pe) PLD_AMO_SEL(fetch_add, *(dest))(dest, value, pe)
#define PLD_G_atomic_fetch_add_4(ctx, dest, value, pe) PLD_AMO_SEL(ctx_fetch_add, *(dest))(ctx, dest, value, pe)
#define shmem_atomic_fetch_add_nbi(...) PLD_CAT(PLD_G_atomic_fetch_add_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_add_nbi_4(fetch, dest, value, pe) PLD_AMO_SEL(fetch_add_nbi, *(dest))(fetch, dest, value, pe)
#define PLD_G_atomic_fetch_add_nbi_5(ctx, fetch, dest, value, pe) PLD_AMO_SEL(ctx_fetch_add_nbi, *(dest))(ctx, fetch, dest, value, pe)
#define shmem_atomic_add(...) PLD_CAT(PLD_G_atomic_add_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_add_3(dest, value, pe) PLD_AMO_SEL(add, *(dest))(dest, value, pe)
#define PLD_G_atomic_add_4(ctx, dest, value, pe) PLD_AMO_SEL(ctx_add, *(dest))(ctx, dest, value, pe)
#define shmem_atomic_fetch_and(...) PLD_CAT(PLD_G_atomic_fetch_and_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_and_3(dest, value, pe) PLD_BIT_SEL(fetch_and, *(dest))(dest, value, pe)
#define PLD_G_atomic_fetch_and_4(ctx, dest, value, pe) PLD_BIT_SEL(ctx_fetch_and, *(dest))(ctx, dest, value, pe)
#define shmem_atomic_fetch_and_nbi(...) PLD_CAT(PLD_G_atomic_fetch_and_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_and_nbi_4(fetch, dest, value, pe) PLD_BIT_SEL(fetch_and_nbi, *(dest))(fetch, dest, value, pe)
#define PLD_G_atomic_fetch_and_nbi_5(ctx, fetch, dest, value, pe) PLD_BIT_SEL(ctx_fetch_and_nbi, *(dest))(ctx, fetch, dest, value, pe)
#define shmem_atomic_and(...) PLD_CAT(PLD_G_atomic_and_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_and_3(dest, value, pe) PLD_BIT_SEL(and, *(dest))(dest, value, pe)
#define PLD_G_atomic_and_4(ctx, dest, value, pe) PLD_BIT_SEL(ctx_and, *(dest))(ctx, dest, value, pe)
#define shmem_atomic_fetch_or(...) PLD_CAT(PLD_G_atomic_fetch_or_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_or_3(dest, value, pe) PLD_BIT_SEL(fetch_or, *(dest))(dest, value, pe)
#define PLD_G_atomic_fetch_or_4(ctx, dest, value, pe) PLD_BIT_SEL(ctx_fetch_or, *(dest))(ctx, dest, value, pe)
#define shmem_atomic_fetch_or_nbi(...) PLD_CAT(PLD_G_atomic_fetch_or_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_or_nbi_4(fetch, dest, value, pe) PLD_BIT_SEL(fetch_or_nbi, *(dest))(fetch, dest, value, pe)
#define PLD_G_atomic_fetch_or_nbi_5(ctx, fetch, dest, value, pe) PLD_BIT_SEL(ctx_fetch_or_nbi, *(dest))(ctx, fetch, dest, value, pe)
#define shmem_atomic_or(...) PLD_CAT(PLD_G_atomic_or_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_or_3(dest, value, pe) PLD_BIT_SEL(or, *(dest))(dest, value, pe)
#define PLD_G_atomic_or_4(ctx, dest, value, pe) PLD_BIT_SEL(ctx_or, *(dest))(ctx, dest, value, pe)
#define shmem_atomic_fetch_xor(...) PLD_CAT(PLD_G_atomic_fetch_xor_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_xor_3(dest, value, pe) PLD_BIT_SEL(fetch_xor, *(dest))(dest, value, pe)
#define PLD_G_atomic_fetch_xor_4(ctx, dest, value, pe) PLD_BIT_SEL(ctx_fetch_xor, *(dest))(ctx, dest, value, pe)
#define shmem_atomic_fetch_xor_nbi(...) PLD_CAT(PLD_G_atomic_fetch_xor_nbi_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_fetch_xor_nbi_4(fetch, dest, value, pe) PLD_BIT_SEL(fetch_xor_nbi, *(dest))(fetch, dest, value, pe)
#define PLD_G_atomic_fetch_xor_nbi_5(ctx, fetch, dest, value, pe) PLD_BIT_SEL(ctx_fetch_xor_nbi, *(dest))(ctx, fetch, dest, value, pe)
#define shmem_atomic_xor(...) PLD_CAT(PLD_G_atomic_xor_, PLD_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PLD_G_atomic_xor_3(dest, value, pe) PLD_BIT_SEL(xor, *(dest))(dest, value, pe)
#define PLD_G_atomic_xor_4(ctx, dest, value, pe) PLD_BIT_SEL(ctx_xor, *(dest))(ctx, dest, value, pe)

#define shmem_wait_until(ivar, cmp, cmp_value) PLD_P2P_SEL(wait_until, *(ivar))(ivar, cmp, cmp_value)
#define shmem_wait_until_all(ivars, n, status, cmp, v) PLD_P2P_SEL(wait_until_all, *(ivars))(ivars, n, status, cmp, v)
#define shmem_wait_until_any(ivars, n, status, cmp, v) PLD_P2P_SEL(wait_until_any, *(ivars))(ivars, n, status, cmp, v)
#define shmem_wait_until_some(ivars, n, idx, status, cmp, v) PLD_P2P_SEL(wait_until_some, *(ivars))(ivars, n, idx, status, cmp, v)
#define shmem_wait_until_all_vector(ivars, n, status, cmp, v) PLD_P2P_SEL(wait_until_all_vector, *(ivars))(ivars, n, status, cmp, v)
#define shmem_wait_until_any_vector(ivars, n, status, cmp, v) PLD_P2P_SEL(wait_until_any_vector, *(ivars))(ivars, n, status, cmp, v)
#define shmem_wait_until_some_vector(ivars, n, idx, status, cmp, v) PLD_P2P_SEL(wait_until_some_vector, *(ivars))(ivars, n, idx, status, cmp, v)
#define shmem_test(ivar, cmp, cmp_value) PLD_P2P_SEL(test, *(ivar))(ivar, cmp, cmp_value)
#define shmem_test_all(ivars, n, status, cmp, v) PLD_P2P_SEL(test_all, *(ivars))(ivars, n, status, cmp, v)
#define shmem_test_any(ivars, n, status, cmp, v) PLD_P2P_SEL(test_any, *(ivars))(ivars, n, status, cmp, v)
#define shmem_test_some(ivars, n, idx, status, cmp, v) PLD_P2P_SEL(test_some, *(ivars))(ivars, n, idx, status, cmp, v)
#define shmem_test_all_vector(ivars, n, status, cmp, v) PLD_P2P_SEL(test_all_vector, *(ivars))(ivars, n, status, cmp, v)
#define shmem_test_any_vector(ivars, n, status, cmp, v) PLD_P2P_SEL(test_any_vector, *(ivars))(ivars, n, status, cmp, v)
#define shmem_test_some_vector(ivars, n, idx, status, cmp, v) PLD_P2P_SEL(test_some_vector, *(ivars))(ivars, n, idx, status, cmp, v)

#endif /* C11 */

#endif /* PLD_SHMEM_H */
