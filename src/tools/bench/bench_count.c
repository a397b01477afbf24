/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counting mode of the benchmarks (see bench_count.h): the callgrind client
 * requests around a row, the valgrind command line, the dump reader.
 */
#include "config.h"
#include "bench_count.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#define CALLGRIND_START_INSTRUMENTATION                                        \
    do {                                                                       \
    } while (0)
#define CALLGRIND_STOP_INSTRUMENTATION                                         \
    do {                                                                       \
    } while (0)
#define CALLGRIND_ZERO_STATS                                                   \
    do {                                                                       \
    } while (0)
#define CALLGRIND_TOGGLE_COLLECT                                               \
    do {                                                                       \
    } while (0)
#define CALLGRIND_DUMP_STATS_AT(_name)                                         \
    do {                                                                       \
        (void)(_name);                                                         \
    } while (0)
#endif

#define BENCH_COUNT_TRIGGER "desc: Trigger: Client Request: "

int bench_count_active(void)
{
    return RUNNING_ON_VALGRIND ? 1 : 0;
}

static void bench_count_loop_plain(void *arg, long iters)
{
    void (*loop)(long) = *(void (**)(long))arg;

    loop(iters);
}

void bench_count_begin(void)
{
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
    CALLGRIND_TOGGLE_COLLECT;
}

int bench_count_end(const char *key, long iters)
{
    char name[160];

    CALLGRIND_TOGGLE_COLLECT;
    snprintf(name, sizeof(name), "%s/%ld", key, iters);
    CALLGRIND_DUMP_STATS_AT(name);
    CALLGRIND_STOP_INSTRUMENTATION;
    return bench_count_active() ? 0 : -1;
}

int bench_count_row_arg(const char *key, void (*loop)(void *, long), void *arg,
                        long iters)
{
    char name[160];

    if (!bench_count_active()) {
        return -1;
    }
    snprintf(name, sizeof(name), "%s/%ld", key, iters);
    /* simulated from here on: the first pass fills the caches */
    CALLGRIND_START_INSTRUMENTATION;
    loop(arg, iters);
    CALLGRIND_ZERO_STATS;
    CALLGRIND_TOGGLE_COLLECT;
    loop(arg, iters);
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT(name);
    CALLGRIND_STOP_INSTRUMENTATION;
    return 0;
}

int bench_count_row(const char *key, void (*loop)(long), long iters)
{
    return bench_count_row_arg(key, bench_count_loop_plain, &loop, iters);
}

/* valgrind's path in buf, from PATH; 0 when found */
static int bench_count_find_valgrind(char *buf, size_t max)
{
    const char *path = getenv("PATH");
    const char *dir, *end;
    size_t len;

    for (dir = (path != NULL) ? path : "/usr/bin:/bin"; *dir != '\0';
         dir = (*end != '\0') ? end + 1 : end) {
        end = strchr(dir, ':');
        if (end == NULL) {
            end = dir + strlen(dir);
        }
        len = end - dir;
        if ((len == 0) || (len + sizeof("/valgrind") > max)) {
            continue;
        }
        snprintf(buf, max, "%.*s/valgrind", (int)len, dir);
        if (access(buf, X_OK) == 0) {
            return 0;
        }
    }
    return -1;
}

int bench_count_argv(const char **argv, const char *dir, char *buf, size_t max)
{
    static char out_file[4200];
    int argc = 0;

    if (bench_count_find_valgrind(buf, max) != 0) {
        return 0;
    }
    snprintf(out_file, sizeof(out_file), "--callgrind-out-file=%s/cg", dir);
    argv[argc++] = buf;
    argv[argc++] = "--tool=callgrind";
    argv[argc++] = "--quiet";
    argv[argc++] = "--trace-children=no";
    /* bistro mode rewrites libc's code: valgrind must see the new bytes */
    argv[argc++] = "--smc-check=all";
    argv[argc++] = "--instr-atstart=no";
    argv[argc++] = "--collect-atstart=no";
    argv[argc++] = "--cache-sim=yes";
    argv[argc++] = "--I1=" BENCH_COUNT_I1;
    argv[argc++] = "--D1=" BENCH_COUNT_D1;
    argv[argc++] = "--LL=" BENCH_COUNT_LL;
    argv[argc++] = out_file;
    return argc;
}

int bench_count_mkdir(char *dir, size_t max)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(dir, max, "%s/bench-count.XXXXXX",
             ((tmp != NULL) && (tmp[0] != '\0')) ? tmp : "/tmp");
    return (mkdtemp(dir) != NULL) ? 0 : -1;
}

/* Column of name in an "events:" line, -1 if absent */
static int bench_count_column(const char *events, const char *name)
{
    char copy[256], *save = NULL, *word;
    int col = 0;

    snprintf(copy, sizeof(copy), "%s", events);
    for (word = strtok_r(copy, " \n", &save); word != NULL;
         word = strtok_r(NULL, " \n", &save), ++col) {
        if (!strcmp(word, name)) {
            return col;
        }
    }
    return -1;
}

/* One dump file: its row name and figures; 0 when it is a row's dump */
static int bench_count_read_dump(const char *path, char *key, size_t max,
                                 bench_count_t *count)
{
    static const char *names[] = {"Ir", "D1mr", "D1mw", "DLmr", "DLmw"};
    char line[512], events[256] = "";
    double value[5] = {0, 0, 0, 0, 0}, field[32];
    int col[5], nfield = 0, found = 0, i;
    char *slash, *pos, *next;
    long iters;
    FILE *file;

    file = fopen(path, "r");
    if (file == NULL) {
        return -1;
    }
    key[0] = '\0';
    while (fgets(line, sizeof(line), file) != NULL) {
        if (!strncmp(line, BENCH_COUNT_TRIGGER, strlen(BENCH_COUNT_TRIGGER))) {
            snprintf(key, max, "%.*s", (int)max - 1,
                     line + strlen(BENCH_COUNT_TRIGGER));
            key[strcspn(key, "\n")] = '\0';
        } else if (!strncmp(line, "events: ", 8)) {
            snprintf(events, sizeof(events), "%.*s", (int)sizeof(events) - 1,
                     line + 8);
        } else if (!strncmp(line, "summary: ", 9)) {
            for (pos = line + 9; nfield < 32; pos = next) {
                field[nfield] = strtod(pos, &next);
                if (next == pos) {
                    break;
                }
                ++nfield;
            }
            found = 1;
        }
    }
    fclose(file);
    slash = strrchr(key, '/');
    if (!found || (slash == NULL) || (events[0] == '\0')) {
        return -1;
    }
    *slash = '\0';
    iters  = strtol(slash + 1, NULL, 10);
    if (iters <= 0) {
        return -1;
    }
    for (i = 0; i < 5; ++i) {
        /* callgrind leaves trailing zero fields out */
        col[i]   = bench_count_column(events, names[i]);
        value[i] = ((col[i] >= 0) && (col[i] < nfield)) ? field[col[i]] : 0;
    }
    count->ir = value[0] / iters;
    count->d1 = (value[1] + value[2]) / iters;
    count->ll = (value[3] + value[4]) / iters;
    return 0;
}

int bench_count_collect(const char *dir, bench_count_cb_t cb, void *arg)
{
    char path[4352], key[160];
    bench_count_t count;
    struct dirent *entry;
    int rows = 0;
    DIR *d;

    d = opendir(dir);
    if (d == NULL) {
        return -1;
    }
    while ((entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, entry->d_name);
        if (bench_count_read_dump(path, key, sizeof(key), &count) == 0) {
            cb(arg, key, &count);
            ++rows;
        }
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
    return rows;
}
