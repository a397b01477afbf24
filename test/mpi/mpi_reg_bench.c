/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_reg_bench: a registration-heavy MPI workload, for comparing
 * registration caches (contrib/bench-stock-rcache.sh; not run by make check
 * or CI).
 *
 * Rank 0 sends SIZE-byte messages (rendezvous: registered memory) to rank 1
 * from a ring of NBUF buffers; before each send the buffer's slot is freed
 * and malloc()ed again (rank 1 does the same with its receive buffers), so
 * that the registration cache sees memory come and go: with glibc's default
 * allocator settings a freed block is mostly handed back at the same
 * address (cache hits, unless the heap was trimmed in between); with -m
 * (M_MMAP_THRESHOLD fixed below SIZE) every free() is a munmap(), every
 * malloc() a new mapping (invalidation and a new registration per message).
 *
 * Usage: mpirun -np 2 mpi_reg_bench [-s SIZE] [-b NBUF] [-n ITERS] [-w WARMUP]
 * [-m] Output (rank 0): one line mpi_reg_bench: SIZE B x ITERS: MB/s X us/msg Y
 * cpu_us/msg rank0 A rank1 B (cpu: user + system time from
 * getrusage(RUSAGE_SELF) over the timed iterations).  Every 64th message is
 * checked on the receiver; exit 1 on a wrong word.
 */
#include <mpi.h>

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static double bench_cpu_us(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* Touch every page (as an application filling its buffer would); word 0
 * and the last word carry the message number, for the receiver's check. */
static void bench_fill(char *p, size_t size, long msg)
{
    size_t i;

    for (i = 0; i < size; i += 4096) {
        p[i] = (char)msg;
    }
    memcpy(p, &msg, sizeof(msg));
    memcpy(p + size - sizeof(msg), &msg, sizeof(msg));
}

static int bench_check(const char *p, size_t size, long msg)
{
    long a, b;

    memcpy(&a, p, sizeof(a));
    memcpy(&b, p + size - sizeof(b), sizeof(b));
    return (a == msg) && (b == msg);
}

int main(int argc, char **argv)
{
    size_t size = 1ul << 20;
    int nbuf = 8, iters = 200, warmup = 20, mmap_mode = 0;
    int rank, nprocs, opt, i, bad = 0, all_bad = 0;
    double t0 = 0, c0 = 0, wall, cpu, cpu1 = 0;
    char **bufs;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    while ((opt = getopt(argc, argv, "s:b:n:w:m")) != -1) {
        switch (opt) {
        case 's': size = strtoul(optarg, NULL, 0); break;
        case 'b': nbuf = atoi(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'm': mmap_mode = 1; break;
        default: size = 0; break;
        }
    }
    if ((nprocs != 2) || (size < 2 * sizeof(long)) || (size > (1ul << 30)) ||
        (nbuf < 1) || (iters < 1) || (warmup < 0)) {
        if (rank == 0) {
            fprintf(stderr,
                    "usage: mpirun -np 2 %s [-s SIZE] [-b NBUF] [-n ITERS] "
                    "[-w WARMUP] [-m]\n",
                    argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    if (mmap_mode) {
        mallopt(M_MMAP_THRESHOLD, (int)(size / 2));
    }
    bufs = calloc(nbuf, sizeof(*bufs));
    for (i = 0; (bufs != NULL) && (i < nbuf); ++i) {
        bufs[i] = malloc(size);
        if (bufs[i] == NULL) {
            bufs = NULL;
        }
    }
    if (bufs == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    for (i = 0; i < warmup + iters; ++i) {
        int slot = i % nbuf;

        if (i == warmup) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            c0 = bench_cpu_us();
        }
        free(bufs[slot]);
        bufs[slot] = malloc(size);
        if (bufs[slot] == NULL) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (rank == 0) {
            bench_fill(bufs[slot], size, i);
            MPI_Send(bufs[slot], (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        } else {
            MPI_Recv(bufs[slot], (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            if (((i % 64) == 0) && !bench_check(bufs[slot], size, i)) {
                ++bad;
            }
        }
    }
    /* the last receive completed: rank 0's time ends with it */
    MPI_Barrier(MPI_COMM_WORLD);
    wall = MPI_Wtime() - t0;
    cpu  = bench_cpu_us() - c0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 1) {
        MPI_Send(&cpu, 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&cpu1, 1, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("mpi_reg_bench: %zu B x %d (%d buffers%s): MB/s %.2f "
               "us/msg %.1f cpu_us/msg rank0 %.1f rank1 %.1f%s\n",
               size, iters, nbuf, mmap_mode ? ", mmap()ed blocks" : "",
               (double)size * iters / wall / 1e6, wall * 1e6 / iters,
               cpu / iters, cpu1 / iters,
               all_bad ? " WRONG DATA received" : "");
    }
    for (i = 0; i < nbuf; ++i) {
        free(bufs[i]);
    }
    free(bufs);
    MPI_Finalize();
    return (rank == 0) && all_bad;
}
