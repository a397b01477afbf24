/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test module standing in for a UCX libucp: exports ucp_get_version() with
 * UCX's signature, reporting the release named by UCMT_FAKE_UCP_VERSION
 * ("major.minor.patch", read at each call; 1.99.0 when unset).
 */
#include <stdio.h>
#include <stdlib.h>

void ucp_get_version(unsigned *major, unsigned *minor, unsigned *patch);

void ucp_get_version(unsigned *major, unsigned *minor, unsigned *patch)
{
    const char *env = getenv("UCMT_FAKE_UCP_VERSION");
    unsigned v[3]   = {1, 99, 0};

    if ((env != NULL) && (sscanf(env, "%u.%u.%u", &v[0], &v[1], &v[2]) != 3)) {
        v[0] = v[1] = v[2] = 0;
    }
    *major = v[0];
    *minor = v[1];
    *patch = v[2];
}
