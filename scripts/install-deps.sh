#!/usr/bin/env bash
# install-deps.sh [--dry-run] PROFILE... — the one list of Debian packages
# payintake needs, shared by `payintake serve` (embedded in the binary: it
# runs this script when something it needs is missing) and by .ci/run (the
# whole test suite). PROFILE is one or more of:
#
#   serve  the PostgreSQL 15 server binaries for the embedded database
#   demo   the clients the lines `serve --demo` prints run: the OpenSSH sftp
#          client, curl and openssl
#   test   serve's and demo's, plus what the tests run: sftp-server, the SFTP
#          clients of the client matrix (with JSch and a JDK to compile its
#          client, PuTTY's psftp), Chromium, npm for the OpenAPI linter,
#          prometheus for promtool, HAProxy for the fleet tests, GnuPG for
#          OpenPGP interop, Python 3 (with openpyxl for workbooks), Node.js, and a C compiler and
#          C library headers for the race detector (go test -race needs cgo)
#
# It installs only what is missing. As root it says what it runs, then runs
# it; as another user it prints one sentence saying what to run as root and
# exits 1. With --dry-run (or PAYINTAKE_INSTALL_DRY_RUN=1) it prints the
# commands it would run, one a line, and changes nothing.
set -euo pipefail

name=${0##*/}
dry_run=${PAYINTAKE_INSTALL_DRY_RUN:-}
[ "$dry_run" = 0 ] && dry_run=
if [ "${1:-}" = --dry-run ]; then
	dry_run=1
	shift
fi
[ $# -gt 0 ] || set -- ""
serve= demo= test=
for profile; do
	case "$profile" in
	serve) serve=1 ;;
	demo) demo=1 ;;
	test) serve=1 demo=1 test=1 ;;
	*)
		echo "usage: $name [--dry-run] serve|demo|test..." >&2
		exit 2
		;;
	esac
done

# pg_bindir finds the PostgreSQL server binaries as payintake does
# (pgserver.FindBinDir): $PAYINTAKE_PG_BINDIR, pg_ctl on PATH, pg_config
# --bindir, then the highest /usr/lib/postgresql/*/bin.
pg_bindir() {
	if [ -n "${PAYINTAKE_PG_BINDIR:-}" ]; then
		echo "$PAYINTAKE_PG_BINDIR"
		return
	fi
	local d
	if d=$(command -v pg_ctl) && d=$(dirname "$(readlink -f "$d")") && has_server "$d"; then
		echo "$d"
		return
	fi
	if command -v pg_config >/dev/null && d=$(pg_config --bindir 2>/dev/null) && has_server "$d"; then
		echo "$d"
		return
	fi
	ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}
has_server() { [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ] && [ -x "$1/postgres" ]; }

# missing lists the Debian packages of the profiles that are not installed.
missing() {
	local need=()
	if [ -n "$serve" ]; then
		has_server "$(pg_bindir)" || need+=(postgresql-15)
	fi
	if [ -n "$demo" ]; then
		# The demo's printed lines: upload and download with sftp, submit
		# with curl, sign a webhook with openssl (also the leg-key test vectors).
		command -v sftp >/dev/null || need+=(openssh-client)
		command -v curl >/dev/null || need+=(curl)
		command -v openssl >/dev/null || need+=(openssl)
	fi
	if [ -n "$test" ]; then
		[ -x /usr/lib/openssh/sftp-server ] || need+=(openssh-sftp-server)
		# scripts/sftp-upload-speed.sh measures against OpenSSH's own server.
		[ -x /usr/sbin/sshd ] || need+=(openssh-server)
		# The SFTP client matrix (intake/sftpd/clients_test.go): the clients partners run.
		/usr/bin/curl -V 2>/dev/null | grep -q sftp || need+=(curl)
		[ -x /usr/bin/lftp ] || need+=(lftp)
		[ -x /usr/bin/rclone ] || need+=(rclone)
		/usr/bin/python3 -c 'import paramiko' 2>/dev/null || need+=(python3-paramiko)
		# JSch 0.1.55, the Java SSH library of integration platforms, driven by a
		# small Java client the test compiles; PuTTY's psftp.
		[ -f /usr/share/java/jsch.jar ] || need+=(libjsch-java)
		[ -x /usr/bin/javac ] && [ -x /usr/bin/java ] || need+=(default-jdk-headless)
		[ -x /usr/bin/psftp ] && [ -x /usr/bin/puttygen ] || need+=(putty-tools)
		command -v chromium >/dev/null || need+=(chromium)
		# OpenPGP interop (pgp, intake): the partner's side is Debian's GnuPG.
		command -v gpg >/dev/null || need+=(gnupg)
		# go test -race needs cgo: a C compiler and the C library's headers.
		command -v gcc >/dev/null || need+=(gcc)
		[ -e /usr/include/stdio.h ] || need+=(libc6-dev)
		# The OpenAPI linter runs on Node.js (npm); promtool checks deploy/'s alerting rules.
		command -v npm >/dev/null || need+=(npm)
		command -v promtool >/dev/null || need+=(prometheus)
		# deploy/haproxy is checked, and the fleet test runs replicas behind it.
		command -v haproxy >/dev/null || need+=(haproxy)
		# dispatch keys are checked against Python's json.dumps and Node's JSON.stringify.
		command -v python3 >/dev/null || need+=(python3)
		# Workbooks (workbook) are made and read back by a real spreadsheet writer.
		/usr/bin/python3 -c 'import openpyxl' 2>/dev/null || need+=(python3-openpyxl)
		command -v node >/dev/null || need+=(nodejs)
	fi
	# curl is listed once even when both of its checks want it.
	printf '%s\n' "${need[@]}" | awk 'NF && !seen[$0]++' | tr '\n' ' '
}

need=$(missing)
need=${need% }
[ -n "$need" ] || exit 0

update="apt-get update -qq"
install="apt-get install -y -qq --no-install-recommends $need"
if [ -n "$dry_run" ]; then
	echo "$update"
	echo "$install"
	exit 0
fi
if ! command -v apt-get >/dev/null; then
	echo "$name: missing $need, and this is not a Debian machine (no apt-get): install what these Debian packages hold yourself (for postgresql-15, the PostgreSQL 15 server binaries: or set PAYINTAKE_PG_BINDIR to the folder holding initdb, pg_ctl and postgres), and run this command again." >&2
	exit 1
fi
if [ "$(id -u)" != 0 ]; then
	echo "$name: Debian packages $need are missing and only root can install them: as root, run \`$update && $install\`, then run this command again." >&2
	exit 1
fi
echo "$name: installing Debian packages $need (running as root): $update && $install" >&2
export DEBIAN_FRONTEND=noninteractive
$update
# shellcheck disable=SC2086 # $install is words on purpose
$install >/dev/null
need=$(missing)
if [ -n "$need" ]; then
	echo "$name: installed, but still missing: ${need% } — check apt-get's output above" >&2
	exit 1
fi
