/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inline system calls for the hook tests: see test/common/rawsys.h.
 */
#ifndef UCMT_RAWSYS_H_
#define UCMT_RAWSYS_H_

#include "../../common/rawsys.h"

#endif
