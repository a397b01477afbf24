/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_peer_loss: a transfer loop between two ranks that keeps going until
 * it is told to stop or the peer is gone, for the test that kills one node
 * of a two-node job (contrib/vm-tests/60-two-nodes.sh).
 *
 * Each iteration both ranks exchange SIZE bytes with MPI_Sendrecv (large
 * enough for UCX's rendezvous zero-copy protocol, i.e. RDMA on registered
 * memory) and check every 64-bit word of what they received against the
 * pattern the peer wrote for that iteration: the data really crossed the
 * link.  Rank 0 prints one progress line per second and, after SECONDS,
 * sets a stop flag in its message; both ranks then finish normally.
 *
 * MPI_COMM_WORLD returns errors instead of aborting: a rank whose transfer
 * fails prints one line naming the iteration and MPI's error string, and
 * exits 1 without MPI_Finalize (the peer is gone: nothing can be agreed
 * with it).
 *
 * Usage: mpirun -np 2 mpi_peer_loss [-s SIZE] [-t SECONDS]
 *   SIZE: bytes per message, a multiple of 8 (default 1 MiB)
 *   SECONDS: run time before the stop flag (default 600)
 * Output (stdout, flushed per line):
 *   "mpi_peer_loss: rank R: N iterations, T s"   rank 0, once a second
 *   "mpi_peer_loss: rank R: done, N iterations"  normal end
 *   "mpi_peer_loss: rank R: error: ..."          failed transfer or data
 * Exit status: 0 done; 1 a transfer failed or the data was wrong; 2 usage
 * or setup error.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define LOSS_TAG 7

/* The word IDX of rank RANK's message in iteration ITER (word 0 is the stop
 * flag). */
static uint64_t loss_word(int rank, uint64_t iter, size_t idx)
{
    return (iter << 32) ^ ((uint64_t)rank << 24) ^ (uint64_t)idx ^
           0x5a5a000000000000ull;
}

static double loss_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void loss_fill(uint64_t *buf, size_t words, int rank, uint64_t iter,
                      uint64_t stop)
{
    size_t i;

    buf[0] = stop;
    for (i = 1; i < words; i++) {
        buf[i] = loss_word(rank, iter, i);
    }
}

/* Returns the index of the first wrong word, or 0 when all are right. */
static size_t loss_check(const uint64_t *buf, size_t words, int peer,
                         uint64_t iter)
{
    size_t i;

    for (i = 1; i < words; i++) {
        if (buf[i] != loss_word(peer, iter, i)) {
            return i;
        }
    }
    return 0;
}

static void loss_fail(int rank, uint64_t iter, const char *what, int err)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    msg[0] = '\0';
    if (err != MPI_SUCCESS) {
        MPI_Error_string(err, msg, &len);
    }
    printf("mpi_peer_loss: rank %d: error: iteration %llu: %s%s%s\n", rank,
           (unsigned long long)iter, what, len > 0 ? ": " : "", msg);
    fflush(stdout);
    exit(1);
}

int main(int argc, char **argv)
{
    size_t size    = 1 << 20, words, bad;
    double seconds = 600, t0, next, now;
    uint64_t *sbuf, *rbuf, iter, stop = 0;
    int rank, nranks, peer, opt, err;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "s:t:")) != -1) {
        switch (opt) {
        case 's': size = strtoul(optarg, NULL, 0); break;
        case 't': seconds = strtod(optarg, NULL); break;
        default: size = 0; break;
        }
    }
    if (nranks != 2 || size < 16 || size % 8 != 0) {
        if (rank == 0) {
            fprintf(stderr,
                    "usage: mpirun -np 2 %s [-s SIZE] [-t SECONDS]"
                    " (SIZE a multiple of 8, at least 16)\n",
                    argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    peer  = 1 - rank;
    words = size / 8;
    sbuf  = malloc(size);
    rbuf  = malloc(size);
    if (sbuf == NULL || rbuf == NULL) {
        printf("mpi_peer_loss: rank %d: error: cannot allocate %zu bytes\n",
               rank, size);
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 2;
    }

    t0   = loss_now();
    next = t0 + 1;
    for (iter = 0; !stop; iter++) {
        now = loss_now();
        loss_fill(sbuf, words, rank, iter, rank == 0 && now - t0 >= seconds);
        err = MPI_Sendrecv(sbuf, (int)size, MPI_BYTE, peer, LOSS_TAG, rbuf,
                           (int)size, MPI_BYTE, peer, LOSS_TAG, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) {
            loss_fail(rank, iter, "MPI_Sendrecv failed", err);
        }
        bad = loss_check(rbuf, words, peer, iter);
        if (bad != 0) {
            printf("mpi_peer_loss: rank %d: error: iteration %llu: word %zu"
                   " is 0x%llx, not 0x%llx\n",
                   rank, (unsigned long long)iter, bad,
                   (unsigned long long)rbuf[bad],
                   (unsigned long long)loss_word(peer, iter, bad));
            fflush(stdout);
            exit(1);
        }
        /* the flag of either message ends the loop on both ranks */
        stop = sbuf[0] | rbuf[0];
        if (rank == 0 && now >= next) {
            printf("mpi_peer_loss: rank %d: %llu iterations, %.0f s\n", rank,
                   (unsigned long long)iter + 1, now - t0);
            fflush(stdout);
            next = now + 1;
        }
    }
    printf("mpi_peer_loss: rank %d: done, %llu iterations\n", rank,
           (unsigned long long)iter);
    fflush(stdout);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
