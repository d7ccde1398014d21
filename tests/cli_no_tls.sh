#!/bin/sh
# SPDX-License-Identifier: MIT
# cli_no_tls.sh HUGIFY: the command loads no HTTP server and no TLS library at its start (ldd): the agent's
# --listen dlopens libmicrohttpd only when given (src/cli/agent/agent_metrics.c), so `hugify run -- /bin/true`
# pays for none of it (docs/run.md, "What run costs").
set -eu
found=$(ldd "$1" | grep -E 'microhttpd|gnutls|libssl|libcrypto|nettle|hogweed|p11-kit|libtasn1|libidn2' || true)
if [ -n "$found" ]; then
  echo "$1 loads at its start:"; echo "$found"; exit 1
fi
echo "$1: $(ldd "$1" | wc -l) libraries at start, none of them an HTTP server or a TLS library"
