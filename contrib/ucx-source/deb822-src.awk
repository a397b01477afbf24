# SPDX-License-Identifier: BSD-3-Clause
# deb822 apt sources (one stanza per paragraph) in, the deb-src copies of
# the enabled stanzas whose Types include "deb" out.  With -v uris="U1 U2"
# only stanzas with one of those URIs (trailing '/' ignored) are kept.
# Used by contrib/ucx-source.sh (ucx_source_fetch).
BEGIN {
    RS = ""
    FS = "\n"
    nwant = split(uris, want, " ")
}
{
    types = ""
    enabled = 1
    uri_ok = (nwant == 0)
    for (i = 1; i <= NF; i++) {
        line = $i
        if (line ~ /^Types:/) {
            types = " " substr(line, 7) " "
        } else if (line ~ /^Enabled:[ \t]*no/) {
            enabled = 0
        } else if (line ~ /^URIs:/) {
            n = split(substr(line, 6), u, " ")
            for (k = 1; k <= n; k++) {
                sub(/\/+$/, "", u[k])
                for (j = 1; j <= nwant; j++)
                    if (u[k] == want[j])
                        uri_ok = 1
            }
        }
    }
    if (!enabled || !uri_ok || types !~ /[ \t]deb[ \t]/)
        next
    for (i = 1; i <= NF; i++)
        print ($i ~ /^Types:/ ? "Types: deb-src" : $i)
    print ""
}
