#!/usr/bin/env bash
# Upload speed of the SFTP drop zone against OpenSSH's own SFTP server, side
# by side in one run, with the OpenSSH sftp client (as partners send files).
#
#   scripts/sftp-upload-speed.sh [SIZE_MB] [RUNS] [random|csv]
#                                 (defaults: 60 MB, 5 runs, random bytes)
#
# random: bytes from /dev/urandom (incompressible); csv: a payroll-like CSV
# (compresses about 2x, as partners' files do).
#
# Measured: upload start to the answered close of one SIZE_MB file, i.e. the
# time of `sftp -b` running `put FILE` minus the time of the same client
# session running nothing (connect, key exchange, login, exit), median of
# RUNS runs, the two servers taking turns:
#   - payintake: `payintake serve` (embedded PostgreSQL, --workers 0: the
#     close is answered once the file is hashed and stored in the database);
#   - openssh:   Debian's sshd with `Subsystem sftp internal-sftp`, writing to
#     a file in a temp folder, on another loopback port, started from a
#     config in a temp folder (nothing on the system is changed).
# Also the CPU time each server spent on a put (payintake: serve and its
# PostgreSQL; openssh: sshd and its session processes), median of the runs:
# on a machine other work keeps busy, the times swing by a factor of two
# from run to run, the CPU much less.
# Needs: go, the Debian packages openssh-client and openssh-server, and
# PostgreSQL server binaries (as for the tests). Run as any user.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-60}
runs=${2:-5}
kind=${3:-random}
case $kind in random|csv) ;; *) echo "sftp-upload-speed: the file kind is random or csv, not $kind" >&2; exit 2;; esac

for bin in /usr/bin/sftp /usr/sbin/sshd /usr/bin/ssh-keygen; do
	[ -x "$bin" ] || { echo "sftp-upload-speed: $bin is missing: apt-get install openssh-client openssh-server" >&2; exit 1; }
done

work=$(mktemp -d /tmp/payintake-sftp-speed.XXXXXX)
chmod 0755 "$work"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { # a loopback port nobody listens on
	local p
	while :; do
		p=$(shuf -i 20000-60000 -n 1)
		(echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}

go build -o "$work/payintake" ./cmd/payintake
ssh-keygen -q -t ed25519 -N '' -f "$work/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -f "$work/host_ed25519"
if [ "$kind" = csv ]; then
	awk -v n="$((size_mb * 1000 * 1000))" 'BEGIN {
		srand(1); split("base_salary overtime bonus tax_withholding pension", c, " ")
		h = "employee_ref,pay_period,component,amount,currency"; print h; m = length(h) + 1
		while (m < n) {
			l = sprintf("E%07d,2026-%02d,%s,%d.%02d,EUR", int(rand() * 1e7), 1 + int(rand() * 12), c[1 + int(rand() * 5)], int(rand() * 1e5), int(rand() * 100))
			print l; m += length(l) + 1
		}
	}' | head -c "$((size_mb * 1000 * 1000))" >"$work/upload.bin"
else
	head -c "$((size_mb * 1000 * 1000))" /dev/urandom >"$work/upload.bin"
fi

# payintake: a data dir of its own, one partner with the key.
export PAYINTAKE_DATA_DIR="$work/data"
pport=$(free_port)
hport=$(free_port)
"$work/payintake" partner add bench --authorized-keys "$work/id_ed25519.pub" >/dev/null
"$work/payintake" serve --sftp-addr "127.0.0.1:$pport" --http-addr "127.0.0.1:$hport" --workers 0 \
	--max-file-size 2GiB >"$work/serve.log" 2>&1 &
pids+=($!)
serve_pid=$!

# OpenSSH: sshd with internal-sftp, as the current user.
sport=$(free_port)
mkdir -p "$work/sshd" "$work/openssh-inbox"
cp "$work/id_ed25519.pub" "$work/sshd/authorized_keys"
chmod 0600 "$work/sshd/authorized_keys"
cat >"$work/sshd/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $sport
HostKey $work/host_ed25519
PidFile $work/sshd/sshd.pid
AuthorizedKeysFile $work/sshd/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp -d $work/openssh-inbox
EOF
# As root, sshd insists on its privilege separation folder (what Debian's
# service creates at start; an empty folder in /run, nothing else).
if [ "$(id -u)" = 0 ] && [ ! -d /run/sshd ]; then mkdir -p -m 0755 /run/sshd; fi
/usr/sbin/sshd -D -e -f "$work/sshd/sshd_config" 2>"$work/sshd.log" &
pids+=($!)
sshd_pid=$!

# Each server's host key is accepted on first use, in a known_hosts file of
# this run only.
client() { # port user batch
	/usr/bin/sftp -q -F /dev/null -i "$work/id_ed25519" -P "$1" -o IdentitiesOnly=yes -o BatchMode=yes \
		-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile="$work/known_hosts" -b "$3" "$2@127.0.0.1" >/dev/null
}
for i in $(seq 100); do
	if client "$pport" bench /dev/null 2>/dev/null && client "$sport" "$(id -un)" /dev/null 2>/dev/null; then break; fi
	[ "$i" = 100 ] && { echo "sftp-upload-speed: the servers did not come up:" >&2; cat "$work/serve.log" "$work/sshd.log" >&2; exit 1; }
	sleep 0.2
done

now() { date +%s.%N; }
# time_batch PORT USER BATCHFILE: seconds taken by one sftp session.
time_batch() {
	local t0 t1
	t0=$(now)
	client "$1" "$2" "$3"
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}'
}
calc() { awk "BEGIN {print $1}"; }
# cpu PID...: CPU seconds used so far by these processes and all their
# descendants (children that ended and were waited for included).
cpu() {
	# cat, not awk, opens them: a process may end between the glob and the
	# read, which cat skips and mawk does not survive.
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v roots=" $* " -v hz="$(getconf CLK_TCK)" '
		{ pid = $1; line = $0; sub(/^.*\) /, "", line); split(line, f, " ")
		  parent[pid] = f[2]; t[pid] = f[12] + f[13] + f[14] + f[15] }
		END { for (p in t) { q = p; while (q > 1) { if (index(roots, " " q " ")) { s += t[p]; break }; q = parent[q] } }
		      printf "%.2f\n", s / hz }'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# The embedded cluster's postmaster (pg_ctl starts it outside serve's tree).
pg_pid=$(head -1 "$(find "$work/data" -name postmaster.pid | head -1)")
echo "pwd" >"$work/empty.batch"
ours=() theirs=() ourcpu=() theircpu=() servecpu=()
for r in $(seq "$runs"); do
	echo "put $work/upload.bin /inbox/upload-$r.bin" >"$work/ours.batch"
	echo "put $work/upload.bin upload-$r.bin" >"$work/theirs.batch"
	c=$(time_batch "$pport" bench "$work/empty.batch")
	a=$(cpu "$serve_pid" "$pg_pid")
	as=$(cpu "$serve_pid")
	t=$(time_batch "$pport" bench "$work/ours.batch")
	ourcpu+=("$(calc "$(cpu "$serve_pid" "$pg_pid") - $a")")
	servecpu+=("$(calc "$(cpu "$serve_pid") - $as")")
	ours+=("$(calc "$t - $c")")
	c=$(time_batch "$sport" "$(id -un)" "$work/empty.batch")
	a=$(cpu "$sshd_pid")
	t=$(time_batch "$sport" "$(id -un)" "$work/theirs.batch")
	theircpu+=("$(calc "$(cpu "$sshd_pid") - $a")")
	theirs+=("$(calc "$t - $c")")
	rm -f "$work/openssh-inbox/upload-$r.bin"
done
o=$(printf '%s\n' "${ours[@]}" | median)
t=$(printf '%s\n' "${theirs[@]}" | median)
printf 'file: %d MB (%s), %d runs each, OpenSSH sftp client %s\n' "$size_mb" "$kind" "$runs" "$(ssh -V 2>&1)"
printf 'payintake (hashed and stored in PostgreSQL before the close is answered): median %.2f s (%.0f MB/s); runs: %s\n' \
	"$o" "$(calc "$size_mb / $o")" "${ours[*]}"
printf 'openssh internal-sftp (written to a local file):                        median %.2f s (%.0f MB/s); runs: %s\n' \
	"$t" "$(calc "$size_mb / $t")" "${theirs[*]}"
printf 'payintake / openssh: %.2fx\n' "$(calc "$o / $t")"
oc=$(printf '%s\n' "${ourcpu[@]}" | median)
tc=$(printf '%s\n' "${theircpu[@]}" | median)
sc=$(printf '%s\n' "${servecpu[@]}" | median)
printf 'CPU a put: payintake (serve + PostgreSQL) median %.2f s (%s; serve alone %.2f s), openssh (sshd) median %.2f s (%s): %.2fx\n' \
	"$oc" "${ourcpu[*]}" "$sc" "$tc" "${theircpu[*]}" "$(calc "$oc / $tc")"
received=$(grep -c 'envelope received' "$work/serve.log" || true)
[ "$received" = "$runs" ] || { echo "sftp-upload-speed: payintake received $received files, want $runs" >&2; exit 1; }
