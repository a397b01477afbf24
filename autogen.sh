#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Regenerate the autotools build system (configure, Makefile.in).
set -e
cd "$(dirname "$0")"
mkdir -p config/m4 config/aux
autoreconf -ivf
