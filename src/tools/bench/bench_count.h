/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counting mode of the benchmarks: instructions and simulated cache misses
 * per operation, from valgrind's callgrind, for rows whose cost is the
 * process's own code (not the kernel's).
 *
 * Contract:
 * - The driver (not under valgrind) starts each worker with the command
 *   bench_count_argv() prepends: callgrind with instrumentation and
 *   collection off at start, cache simulation on with a fixed geometry
 *   (BENCH_COUNT_GEOMETRY), dumps into a directory of its own.
 * - The worker brackets each row with bench_count_row(): the loop runs
 *   once to warm the simulated caches (not counted), then once counted;
 *   the dump is named "KEY/ITERS".
 * - After the worker exits, bench_count_collect() reads the dumps and
 *   hands each row's figures per operation to a callback.
 * Outside valgrind bench_count_row() runs nothing and returns -1.
 */
#ifndef BENCH_COUNT_H_
#define BENCH_COUNT_H_

#include <stddef.h>

/* The simulated caches, the same on every host */
#define BENCH_COUNT_I1 "32768,8,64"
#define BENCH_COUNT_D1 "32768,8,64"
#define BENCH_COUNT_LL "8388608,16,64"
#define BENCH_COUNT_GEOMETRY                                                   \
    "I1 and D1 32 KiB 8-way, LL 8 MiB 16-way, 64 B lines"

/* Per operation: instructions, first-level data misses (reads + writes),
 * last-level data misses (reads + writes) */
typedef struct {
    double ir;
    double d1;
    double ll;
} bench_count_t;

typedef void (*bench_count_cb_t)(void *arg, const char *key,
                                 const bench_count_t *count);

/* Non-zero when this process runs under callgrind (the worker side) */
int bench_count_active(void);

/* Run loop(iters) warm, then counted, and dump it as key; 0 on success,
 * -1 when not under callgrind. */
int bench_count_row(const char *key, void (*loop)(long), long iters);

/* Lower level: count from begin to end (no warm pass), dump as key with
 * iters operations; end returns -1 when not under callgrind. */
void bench_count_begin(void);
int bench_count_end(const char *key, long iters);

/* The same for a loop that takes an argument */
int bench_count_row_arg(const char *key, void (*loop)(void *, long), void *arg,
                        long iters);

/* Fills argv[0..] with the valgrind command (up to 16 entries, dumps
 * under dir/cg) and returns how many; 0 when valgrind is not in PATH. */
int bench_count_argv(const char **argv, const char *dir, char *buf, size_t max);

/* A fresh directory for a worker's dumps in dir (max bytes); 0 on success */
int bench_count_mkdir(char *dir, size_t max);

/* Reads every dump of dir, calls cb per row, removes the dumps and dir;
 * the number of rows read, -1 on error. */
int bench_count_collect(const char *dir, bench_count_cb_t cb, void *arg);

#endif
