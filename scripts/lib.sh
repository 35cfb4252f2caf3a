# Shared helpers for scripts/demo, scripts/test, scripts/bench and scripts/fuzz.
# Source it; it sets REPO and makes sure swift is on PATH.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

# The system libraries the stack links (codecs, SRTP, TLS) and the tools to find them.
BASE_PACKAGES=(libopus-dev libsrtp2-dev libssl-dev openssl pkg-config)

log() { printf '==> %s\n' "$*" >&2; }

# ensure_packages PKG...: installs the Debian packages that are missing (quick when none are).
ensure_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    # Keep apt from starting daemons (kamailio would bind 0.0.0.0:5060).
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null && $sudo chmod +x /usr/sbin/policy-rc.d
    fi
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections 2>/dev/null || true
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

require_swift() {
    command -v swift >/dev/null 2>&1 || { echo "swift is not installed (expected at /opt/swift/usr/bin)" >&2; exit 1; }
}

# bench_build PRODUCT: builds one executable of the Benchmarks package (Benchmarks/, its own
# package depending on the root by path) in release mode and prints its path. The scratch path
# is $BENCH_SCRATCH when set, else the Benchmarks package's own .build.
bench_build() {
    local product=$1 scratch="${BENCH_SCRATCH:-$REPO/Benchmarks/.build}"
    swift build -c release --package-path "$REPO/Benchmarks" --scratch-path "$scratch" --product "$product" >&2 || return 1
    printf '%s/%s\n' "$(swift build -c release --package-path "$REPO/Benchmarks" --scratch-path "$scratch" --show-bin-path)" "$product"
}

# free_ports SPAN: prints the first of SPAN consecutive UDP and TCP ports on 127.0.0.1 that
# nothing is bound to, picked at random between 10000 and 31999 (below Linux's ephemeral range,
# so SIPp's own `-p 0` sockets do not land there); bounded tries. Benchmarks call it per server
# so two runs at once, or a port left in use, do not clash.
free_ports() {
    local span=${1:-1} base used
    for _ in $(seq 1 100); do
        base=$(( 10000 + RANDOM % (22000 - span) ))
        used=$(ss -Hltuan "( sport >= :$base and sport < :$(( base + span )) )" 2>/dev/null | wc -l)
        [ "$used" -eq 0 ] && { echo "$base"; return 0; }
    done
    echo "free_ports: no $span free consecutive ports found" >&2
    return 1
}
