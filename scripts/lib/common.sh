# Shared by scripts/start and scripts/test: install what ums needs on a fresh Debian machine.
# Every install step of the project lives here, so a new machine needs nothing done by hand.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

# ensure_apt_packages PKG...: installs the Debian packages that are missing.
ensure_apt_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    step "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
}

# ensure_nginx: Debian's nginx for the proxy benchmark (bench/proxy.mjs runs its own instance);
# installed without starting the package's service (policy-rc.d says no while it installs).
ensure_nginx() {
  command -v nginx >/dev/null && return 0
  local policy=/usr/sbin/policy-rc.d made=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 755 "$policy"
    made=1
  fi
  ensure_apt_packages nginx
  ((made)) && as_root rm -f "$policy"
  command -v nginx >/dev/null
}

ensure_node() {
  if ! command -v node >/dev/null; then
    ensure_apt_packages nodejs npm
  fi
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  if ((major < 20)); then
    echo "ums needs Node.js >= 20 (found $(node --version))" >&2
    exit 1
  fi
}

# Install the locked npm packages when node_modules is missing or older than the lockfile; then build.
# `npm install`, not `npm ci`: the registry reachable here lacks some optional platform packages
# (e.g. other OSes' biome binaries), which `npm ci` insists on finding in the lockfile.
ensure_built() {
  cd "$ROOT"
  local stamp=node_modules/.ums-installed
  if [[ ! -f $stamp || package-lock.json -nt $stamp ]]; then
    step "installing npm packages (builds better-sqlite3 from source when no prebuilt binary is reachable)"
    npm install --no-audit --no-fund >&2
    touch "$stamp"
  fi
  step "building (tsc -b, then the unit agent and CLI bundles, and the web console)"
  npx tsc -b >&2
  npm run --silent build:agent >&2
  npm run --silent build:cli >&2
  npm run --silent build:console >&2
}

# What the host needs to run units (docs/ARCHITECTURE.md section 1).
HOST_PACKAGES=(runc catatonit btrfs-progs mmdebstrap iproute2 nftables util-linux debian-archive-keyring python3)
