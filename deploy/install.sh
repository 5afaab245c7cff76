#!/bin/sh
# Install bcd, the Better Compute node daemon, and its systemd unit.
#
#   install.sh --release-url https://releases.example.com/bc --version v1.2.3 --pubkey minisign.pub
#   install.sh --binary ./bcd [--sha256 HEX]
#   install.sh --url https://releases.example.com/bcd-v1.2.3-linux-amd64 --sha256 HEX
#
# then, optionally, join and start in the same run:
#
#   ... --token bcj_… --gateway gw.example.com:443 --ca-cert-hash sha256:…   (or --ca-file root-ca.pem)
#
# From a release (made by `better-compute release build`, see docs/operations.md) it downloads
# BASE/VERSION/SHA256SUMS and SHA256SUMS.minisig, verifies the signature with the operator's public
# key using minisign (which must be installed: apt-get install minisign) and that it signs this
# version, then downloads BASE/VERSION/bcd_VERSION_linux_ARCH for this host's architecture and
# checks it against SHA256SUMS. Otherwise the binary comes from a local file or from the URL you
# give, and is installed only when its SHA-256 matches (required for a URL; checked for a file when
# given). Every binary must also run and say it is bcd. Nothing is ever fetched from anywhere else
# (in particular not from this repository's CI). The binary goes to PREFIX/bin/bcd (atomically, by
# rename), the unit to /etc/systemd/system/bcd.service, and the state directory /var/lib/bcd is
# created 0700.
#
# Installed from a release, the node also upgrades itself from that release URL: the public key
# is copied to /etc/bcd/release.pub and the drop-in /etc/systemd/system/bcd.service.d/release.conf
# starts bcd with --release-url BASE --release-key /etc/bcd/release.pub (the unit keeps
# Restart=always, which brings the old binary back if a new one fails).
#
# Options:
#   --release-url BASE the release base URL: the release is the directory BASE/VERSION/
#   --version V        the release to install (with --release-url)
#   --pubkey FILE|KEY  the release signing public key: a minisign.pub file or its base64 line
#   --binary FILE      install this file
#   --url URL          download the binary from URL (needs --sha256)
#   --sha256 HEX       the binary's SHA-256
#   --unit FILE        the unit to install (default: bcd.service beside this script)
#   --prefix DIR       install the binary to DIR/bin (default /usr/local)
#   --root DIR         install under DIR instead of / (packaging, tests); implies --no-systemctl
#   --no-systemctl     do not run systemctl (and so do not join or start)
#   --token TOKEN      join with this token (or env BCD_JOIN_TOKEN), then start the service
#   --gateway H:P      the gateway to join through
#   --ca-cert-hash H   the pin of the deployment's root CA, sha256:HEX, as joinTokens/create prints
#                      it beside the token: bcd fetches the root from the gateway and refuses one
#                      that does not match (repeatable, for a root and its successor)
#   --ca-file FILE     the deployment's root CA (better-compute pki export-root writes it); joining
#                      needs this or --ca-cert-hash
#   --transport MODE   how bcd reaches the gateway: h2 (default), websocket or auto (bcd join
#                      records it for bcd run); the WebSocket uses HTTPS_PROXY and NO_PROXY, from
#                      this environment when joining and from /etc/default/bcd when running
#   --websocket-url U  the gateway's WebSocket listener (default wss://GATEWAY-HOST:443/...)
#   --websocket-ca-file FILE  the CA of the WebSocket's outer TLS, when a load balancer's or
#                      proxy's certificate is signed by neither the system's roots nor the
#                      deployment's root (bcd join keeps a copy for bcd run)
set -eu

release= version= pubkey= binary= url= sha= unit= prefix=/usr/local root= systemctl=yes token=${BCD_JOIN_TOKEN:-} gateway= cafile= pins= transport= wsurl= wscafile=
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "install.sh: $*" >&2; exit 1; }
need() { [ $# -ge 2 ] || die "$1 needs a value"; }

while [ $# -gt 0 ]; do
	case $1 in
	--release-url) need "$@"; release=${2%/}; shift 2 ;;
	--version) need "$@"; version=$2; shift 2 ;;
	--pubkey) need "$@"; pubkey=$2; shift 2 ;;
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
	--ca-cert-hash) need "$@"; pins="$pins $2"; shift 2 ;;
	--websocket-ca-file) need "$@"; wscafile=$2; shift 2 ;;
	--transport) need "$@"; transport=$2; shift 2 ;;
	--websocket-url) need "$@"; wsurl=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

if [ -n "$release" ]; then
	if [ -n "$binary" ] || [ -n "$url" ] || [ -n "$sha" ]; then die "give --release-url or --binary/--url/--sha256, not both"; fi
	[ -n "$version" ] || die "--release-url needs --version"
	[ -n "$pubkey" ] || die "--release-url needs --pubkey: a release is installed only when its signature verifies"
	printf %s "$version" | grep -Eq '^[A-Za-z0-9][A-Za-z0-9.+-]{0,63}$' || die "--version $version is not a release version (e.g. v1.2.3)"
	case $release in https://*|http://*) ;; *) die "--release-url must be an http(s) URL" ;; esac
	# The URL goes on the unit's command line: nothing systemd or a shell would read as syntax.
	case $release in *[!A-Za-z0-9._~:/@+=,%-]*) die "--release-url $release has characters bcd's unit cannot carry (spaces, quotes, \$, ...)" ;; esac
	if [ -f "$pubkey" ]; then keyflag=-p
	elif printf %s "$pubkey" | grep -Eq '^[A-Za-z0-9+/]{56}$'; then keyflag=-P
	else die "--pubkey $pubkey is neither a file nor a minisign public key"
	fi
	command -v minisign >/dev/null 2>&1 || die "minisign is not installed; it verifies the release signature (apt-get install minisign); nothing installed"
	[ "$(uname -s)" = Linux ] || die "releases carry Linux binaries only; this is $(uname -s)"
	case $(uname -m) in
	x86_64|amd64) arch=amd64 ;;
	aarch64|arm64) arch=arm64 ;;
	*) die "no release binary for this architecture ($(uname -m))" ;;
	esac
elif [ -n "$version" ] || [ -n "$pubkey" ]; then
	die "--version and --pubkey go with --release-url"
else
	if [ -n "$binary" ] && [ -n "$url" ]; then die "give --binary or --url, not both"; fi
	if [ -z "$binary" ] && [ -z "$url" ]; then die "give the binary: --release-url BASE --version V --pubkey KEY, --binary FILE or --url URL --sha256 HEX"; fi
fi
if [ -n "$url" ] && [ -z "$sha" ]; then die "--url needs --sha256: a downloaded binary is installed only when its checksum matches"; fi
if [ -n "$sha" ]; then
	printf %s "$sha" | grep -Eq '^[0-9a-f]{64}$' || die "--sha256 must be 64 hex digits"
fi
case $url in ''|https://*|http://*) ;; *) die "--url must be an http(s) URL" ;; esac
if [ -n "$token" ] && [ -z "$gateway" ]; then die "--token needs --gateway"; fi
case $transport in ''|h2|websocket|auto) ;; *) die "--transport must be h2, websocket or auto" ;; esac
for pin in $pins; do
	printf %s "$pin" | grep -Eq '^sha256:[0-9A-Fa-f]{64}$' || die "--ca-cert-hash $pin: want sha256:<64 hex digits>"
done
if [ -n "$token" ] && [ -z "$cafile" ] && [ -z "$pins" ]; then
	die "--token needs --ca-cert-hash sha256:… (printed by joinTokens/create) or --ca-file root-ca.pem: bcd never trusts a gateway it cannot check"
fi
[ -z "$cafile" ] || [ -f "$cafile" ] || die "--ca-file $cafile: no such file"
[ -z "$wscafile" ] || [ -f "$wscafile" ] || die "--websocket-ca-file $wscafile: no such file"
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

# download URL FILE
download() {
	echo "Downloading $1"
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --proto '=https,http' -o "$2" "$1" || die "download of $1 failed; nothing installed"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -O "$2" "$1" || die "download of $1 failed; nothing installed"
	else
		die "neither curl nor wget is installed"
	fi
}

bindir=$root$prefix/bin
mkdir -p "$bindir"
# The new binary is prepared beside the old one, so the final rename is atomic.
tmp=$(mktemp "$bindir/.bcd.install.XXXXXX")
sums=
trap 'rm -f "$tmp"; [ -z "$sums" ] || rm -rf "$sums"' EXIT INT TERM

if [ -n "$release" ]; then
	# The signature is checked before anything else is trusted: SHA256SUMS names the checksum.
	sums=$(mktemp -d)
	download "$release/$version/SHA256SUMS" "$sums/SHA256SUMS"
	download "$release/$version/SHA256SUMS.minisig" "$sums/SHA256SUMS.minisig"
	comment=$(minisign -Q -V -m "$sums/SHA256SUMS" -x "$sums/SHA256SUMS.minisig" "$keyflag" "$pubkey" 2>&1) ||
		die "the signature of $release/$version/SHA256SUMS does not verify with the given public key ($comment); nothing installed"
	[ "$comment" = "better-compute release $version file:SHA256SUMS" ] ||
		die "SHA256SUMS is signed for another release (its trusted comment is: $comment); nothing installed"
	echo "Verified the signature of SHA256SUMS: $comment"
	name=bcd_${version}_linux_$arch
	sha=$(awk -v n="$name" '$2 == n { print $1 }' "$sums/SHA256SUMS")
	printf %s "$sha" | grep -Eq '^[0-9a-f]{64}$' || die "SHA256SUMS has no single checksum for $name; nothing installed"
	download "$release/$version/$name" "$tmp"
elif [ -n "$url" ]; then
	download "$url" "$tmp"
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
[ -z "$sums" ] || rm -rf "$sums"
trap - EXIT INT TERM
echo "Installed $version to $bindir/bcd"

unitdir=$root/etc/systemd/system
mkdir -p "$unitdir"
sed "s#/usr/local/bin/bcd#$prefix/bin/bcd#g" "$unit" > "$unitdir/.bcd.service.tmp"
chmod 0644 "$unitdir/.bcd.service.tmp"
mv -f "$unitdir/.bcd.service.tmp" "$unitdir/bcd.service"
echo "Installed the unit to $unitdir/bcd.service"

if [ -n "$release" ]; then
	# The key the node verifies its own upgrades with, and the flags that let it upgrade.
	mkdir -p "$root/etc/bcd"
	if [ -f "$pubkey" ]; then cp "$pubkey" "$root/etc/bcd/.release.pub.tmp"
	else printf 'untrusted comment: minisign public key (installed by install.sh)\n%s\n' "$pubkey" > "$root/etc/bcd/.release.pub.tmp"
	fi
	chmod 0644 "$root/etc/bcd/.release.pub.tmp"
	mv -f "$root/etc/bcd/.release.pub.tmp" "$root/etc/bcd/release.pub"
	mkdir -p "$unitdir/bcd.service.d"
	cat > "$unitdir/bcd.service.d/.release.conf.tmp" <<EOF
# Written by install.sh --release-url: bcd upgrades itself to releases from this URL signed by
# /etc/bcd/release.pub (see docs/operations.md, "Fleet upgrades"). Flags of your own go in
# /etc/default/bcd (BCD_ARGS).
[Service]
ExecStart=
ExecStart=$prefix/bin/bcd run --release-url $(printf %s "$release" | sed 's/%/%%/g') --release-key /etc/bcd/release.pub \$BCD_ARGS
EOF
	chmod 0644 "$unitdir/bcd.service.d/.release.conf.tmp"
	mv -f "$unitdir/bcd.service.d/.release.conf.tmp" "$unitdir/bcd.service.d/release.conf"
	echo "Installed the release key to /etc/bcd/release.pub; bcd upgrades itself from $release"
fi

mkdir -p "$root/var/lib"
[ -d "$root/var/lib/bcd" ] || mkdir -m 0700 "$root/var/lib/bcd"
chmod 0700 "$root/var/lib/bcd"
if [ ! -e "$root/etc/default/bcd" ]; then
	mkdir -p "$root/etc/default"
	cat > "$root/etc/default/bcd" <<'EOF'
# Flags for `bcd run` (see bcd run --help), for example:
# BCD_ARGS="--allow-exec /usr/bin/nvidia-smi --allow-reboot"
# Never allow a shell, an interpreter or systemctl: exec runs as root. Upgrades need
# --release-url https://releases.example.com/bc --release-key /etc/bcd/release.pub
# (install.sh --release-url ... --pubkey ... sets both in bcd.service.d/release.conf)
# Tunnels reach only the ports of 127.0.0.1 listed with --tunnel-port (none by default), e.g.
# --tunnel-port 22
BCD_ARGS=""
# Behind an HTTP proxy (bcd join/run --transport websocket or auto), the WebSocket goes through:
# HTTPS_PROXY=http://proxy.example.com:3128
# NO_PROXY=.internal.example.com
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
	for pin in $pins; do set -- "$@" --ca-cert-hash "$pin"; done
	[ -z "$wscafile" ] || set -- "$@" --websocket-ca-file "$wscafile"
	[ -z "$transport" ] || set -- "$@" --transport "$transport"
	[ -z "$wsurl" ] || set -- "$@" --websocket-url "$wsurl"
	BCD_JOIN_TOKEN=$token "$bindir/bcd" "$@"
fi
if [ -e /var/lib/bcd/node.json ]; then
	systemctl restart bcd.service
	echo "bcd is running: bcd status"
else
	echo "Join the node, then start bcd: bcd join --token … --gateway host:port --ca-cert-hash sha256:… && systemctl start bcd"
fi
