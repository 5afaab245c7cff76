#!/bin/sh
# Install bcd, the Better Compute node daemon, and its systemd unit.
#
#   install.sh --binary ./bcd [--sha256 HEX]
#   install.sh --url https://releases.example.com/bcd-v1.2.3-linux-amd64 --sha256 HEX
#
# then, optionally, join and start in the same run:
#
#   ... --token bcj_… --gateway gw.example.com:443 [--ca-file root-ca.pem]
#
# The binary comes from a local file or from the URL you give, and is installed only when its
# SHA-256 matches (required for a URL; checked for a file when given) and it runs. Nothing is
# ever fetched from anywhere else (in particular not from this repository's CI). The binary goes
# to PREFIX/bin/bcd (atomically, by rename), the unit to /etc/systemd/system/bcd.service, and
# the state directory /var/lib/bcd is created 0700.
#
# Options:
#   --binary FILE      install this file
#   --url URL          download the binary from URL (needs --sha256)
#   --sha256 HEX       the binary's SHA-256
#   --unit FILE        the unit to install (default: bcd.service beside this script)
#   --prefix DIR       install the binary to DIR/bin (default /usr/local)
#   --root DIR         install under DIR instead of / (packaging, tests); implies --no-systemctl
#   --no-systemctl     do not run systemctl (and so do not join or start)
#   --token TOKEN      join with this token (or env BCD_JOIN_TOKEN), then start the service
#   --gateway H:P      the gateway to join through
#   --ca-file FILE     the deployment's root CA, to verify the gateway when joining
set -eu

binary= url= sha= unit= prefix=/usr/local root= systemctl=yes token=${BCD_JOIN_TOKEN:-} gateway= cafile=
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "install.sh: $*" >&2; exit 1; }
need() { [ $# -ge 2 ] || die "$1 needs a value"; }

while [ $# -gt 0 ]; do
	case $1 in
	--binary) need "$@"; binary=$2; shift 2 ;;
	--url) need "$@"; url=$2; shift 2 ;;
	--sha256) need "$@"; sha=$(printf %s "$2" | tr 'A-F' 'a-f'); shift 2 ;;
	--unit) need "$@"; unit=$2; shift 2 ;;
	--prefix) need "$@"; prefix=$2; shift 2 ;;
	--root) need "$@"; root=$2; systemctl=no; shift 2 ;;
	--no-systemctl) systemctl=no; shift ;;
	--token) need "$@"; token=$2; shift 2 ;;
	--gateway) need "$@"; gateway=$2; shift 2 ;;
	--ca-file) need "$@"; cafile=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

if [ -n "$binary" ] && [ -n "$url" ]; then die "give --binary or --url, not both"; fi
if [ -z "$binary" ] && [ -z "$url" ]; then die "give the binary: --binary FILE or --url URL --sha256 HEX"; fi
if [ -n "$url" ] && [ -z "$sha" ]; then die "--url needs --sha256: a downloaded binary is installed only when its checksum matches"; fi
if [ -n "$sha" ]; then
	printf %s "$sha" | grep -Eq '^[0-9a-f]{64}$' || die "--sha256 must be 64 hex digits"
fi
case $url in ''|https://*|http://*) ;; *) die "--url must be an http(s) URL" ;; esac
if [ -n "$token" ] && [ -z "$gateway" ]; then die "--token needs --gateway"; fi
[ -n "$unit" ] || unit=$here/bcd.service
[ -f "$unit" ] || die "no unit file at $unit (give --unit)"
[ "$root" = "" ] || [ -d "$root" ] || die "--root $root is not a directory"
case $prefix in /*) ;; *) die "--prefix must be absolute" ;; esac

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
	elif command -v shasum >/dev/null 2>&1; then shasum -a 256 "$1" | cut -d' ' -f1
	else die "neither sha256sum nor shasum is installed"
	fi
}

bindir=$root$prefix/bin
mkdir -p "$bindir"
# The new binary is prepared beside the old one, so the final rename is atomic.
tmp=$(mktemp "$bindir/.bcd.install.XXXXXX")
trap 'rm -f "$tmp"' EXIT INT TERM

if [ -n "$url" ]; then
	echo "Downloading $url"
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --proto '=https,http' -o "$tmp" "$url" || die "download of $url failed"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -O "$tmp" "$url" || die "download of $url failed"
	else
		die "neither curl nor wget is installed"
	fi
else
	[ -f "$binary" ] || die "no file at $binary"
	cp "$binary" "$tmp"
fi
if [ -n "$sha" ]; then
	got=$(sha256 "$tmp")
	[ "$got" = "$sha" ] || die "checksum mismatch: the binary's SHA-256 is $got, not $sha; nothing installed"
fi
chmod 0755 "$tmp"
version=$("$tmp" version 2>&1) || die "the binary does not run here ($version); nothing installed"
case $version in "bcd "*) ;; *) die "this is not bcd (its version command says: $version); nothing installed" ;; esac
mv -f "$tmp" "$bindir/bcd"
trap - EXIT INT TERM
echo "Installed $version to $bindir/bcd"

unitdir=$root/etc/systemd/system
mkdir -p "$unitdir"
sed "s#/usr/local/bin/bcd#$prefix/bin/bcd#g" "$unit" > "$unitdir/.bcd.service.tmp"
chmod 0644 "$unitdir/.bcd.service.tmp"
mv -f "$unitdir/.bcd.service.tmp" "$unitdir/bcd.service"
echo "Installed the unit to $unitdir/bcd.service"

mkdir -p "$root/var/lib"
[ -d "$root/var/lib/bcd" ] || mkdir -m 0700 "$root/var/lib/bcd"
chmod 0700 "$root/var/lib/bcd"
if [ ! -e "$root/etc/default/bcd" ]; then
	mkdir -p "$root/etc/default"
	cat > "$root/etc/default/bcd" <<'EOF'
# Flags for `bcd run` (see bcd run --help), for example:
# BCD_ARGS="--allow-exec /usr/bin/nvidia-smi --allow-reboot"
# Never allow a shell, an interpreter or systemctl: exec runs as root. Upgrades need
# --allow-upgrade --upgrade-source https://releases.example.com/bcd/
# Tunnels reach only the ports of 127.0.0.1 listed with --tunnel-port (none by default), e.g.
# --tunnel-port 22
BCD_ARGS=""
EOF
fi

if [ "$systemctl" = no ]; then
	echo "Not running systemctl: join with 'bcd join', then 'systemctl enable --now bcd'."
	exit 0
fi
command -v systemctl >/dev/null 2>&1 || die "systemctl not found (use --no-systemctl)"
systemctl daemon-reload
systemctl enable bcd.service
if [ -n "$token" ]; then
	set -- join --state-dir /var/lib/bcd --gateway "$gateway"
	[ -z "$cafile" ] || set -- "$@" --ca-file "$cafile"
	BCD_JOIN_TOKEN=$token "$bindir/bcd" "$@"
fi
if [ -e /var/lib/bcd/node.json ]; then
	systemctl restart bcd.service
	echo "bcd is running: bcd status"
else
	echo "Join the node, then start bcd: bcd join --token … --gateway host:port --ca-file root-ca.pem && systemctl start bcd"
fi
