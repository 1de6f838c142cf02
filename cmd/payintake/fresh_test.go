package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hideDeps, run by bash in a new mount namespace (unshare --mount
// --propagation unchanged), makes the machine look like a fresh Debian one
// with only Go: /usr/lib/postgresql is an empty tmpfs, and pg_config (and
// pg_ctl, initdb, postgres) and the clients the demo's printed lines run
// (sftp, curl, openssl) are on no folder of PATH: each folder that has one is
// covered by an overlay whose upper layer, in $HIDE_WORK, holds whiteouts for
// those names. Then it runs its arguments.
//
// Its mounts must never show outside the namespace. Where "/" is a mount
// point it is made private first. Where it is not (a chroot, where unshare's
// own --propagation private fails with "cannot change root filesystem
// propagation"), the mount holding "/" lies outside the chroot and nothing
// inside can make it private, so a mount made here may be propagated out:
// every mount is undone when the script ends, and an unmount reaches every
// copy the mount was propagated to.
const hideDeps = `set -e
names="pg_config pg_ctl initdb postgres sftp curl openssl"
mounted=()
undo() { for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[i]}"; done; }
trap undo EXIT
if mountpoint -q /; then mount --make-rprivate /; fi
mount -t tmpfs -o mode=0755 tmpfs /usr/lib/postgresql; mounted+=(/usr/lib/postgresql)
mount -t tmpfs tmpfs "$HIDE_WORK"; mounted+=("$HIDE_WORK")
i=0
for d in $(for p in $(type -ap $names); do readlink -f "$(dirname "$p")"; done | sort -u); do
	i=$((i+1)); mkdir "$HIDE_WORK/$i" "$HIDE_WORK/$i/up" "$HIDE_WORK/$i/work"
	for n in $names; do
		if [ -e "$d/$n" ] || [ -L "$d/$n" ]; then mknod "$HIDE_WORK/$i/up/$n" c 0 0; fi
	done
	mount -t overlay overlay -o "lowerdir=$d,upperdir=$HIDE_WORK/$i/up,workdir=$HIDE_WORK/$i/work" "$d"; mounted+=("$d")
done
hash -r
if type -ap $names >/dev/null || ls /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
	echo "hideDeps: still visible: $(type -ap $names) $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null)" >&2; exit 99
fi
"$@"`

// TestFreshMachine runs the README's first Quick start command where the
// PostgreSQL server binaries and the clients the demo's printed lines run
// are missing: as a plain user it prints one
// sentence saying what to run and exits non-zero; as root it runs the
// install script that .ci/run runs (scripts/install-deps.sh, embedded in the
// binary), here in its dry-run mode, and prints that script's commands.
func TestFreshMachine(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("TestFreshMachine needs root: it builds a mount namespace (unshare -m) with /usr/lib/postgresql empty; CI (.ci/run) runs as root")
	}
	for _, tool := range []string{"unshare", "mountpoint", "setpriv", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (Debian: util-linux, bash): %v", tool, err)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	first := readmeFirstCommand(t, filepath.Join(root, "README.md"))
	if !strings.HasPrefix(first, "go run ./cmd/payintake serve") {
		t.Fatalf("README's first Quick start command is %q; this test runs it as `go run` (root) and as the built binary (plain user): adapt it", first)
	}

	// Folders a plain user can reach: the built binary and the data dir.
	open := func(pattern string, mode os.FileMode) string {
		dir, err := os.MkdirTemp("", pattern)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	binDir, dataDir := open("payintake-fresh-bin-", 0o755), open("payintake-fresh-data-", 0o777)
	bin := filepath.Join(binDir, "payintake")
	copyFile(t, payintakeBinary(t), bin, 0o755)

	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "PAYINTAKE_PG_BINDIR", "PAYINTAKE_DATABASE_URL", "PAYINTAKE_DATA_DIR", dryRunEnv:
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PAYINTAKE_DATA_DIR="+dataDir, "HIDE_WORK="+t.TempDir())
	inNamespace := func(extraEnv []string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "unchanged", "--", "bash", "-c", hideDeps, "hideDeps"}, args...)...)
		cmd.Dir, cmd.Env = root, append(append([]string{}, env...), extraEnv...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			code = ee.ExitCode()
		default:
			t.Fatalf("%v: %v", args, err)
		}
		if code == 99 {
			t.Fatalf("the namespace does not hide PostgreSQL and the demo's clients: %s", errb.String())
		}
		return out.String(), errb.String(), code
	}

	// What the shared script would run here for serve --demo (the embedded
	// database's profile and the demo's), asked directly.
	out, errOut, code := inNamespace(nil, "bash", "scripts/install-deps.sh", "--dry-run", "serve", "demo")
	if code != 0 {
		t.Fatalf("install-deps.sh --dry-run serve demo: exit %d: %s", code, errOut)
	}
	commands := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.Contains(out, "apt-get install") || !strings.Contains(out, " postgresql-15") {
		t.Fatalf("install-deps.sh --dry-run serve demo should install Debian's postgresql-15 with apt-get; it prints:\n%s", out)
	}
	for _, pkg := range []string{"openssh-client", "curl", "openssl"} {
		if !strings.Contains(out, " "+pkg) {
			t.Fatalf("install-deps.sh --dry-run serve demo should install %s, which the demo's printed lines run; it prints:\n%s", pkg, out)
		}
	}

	t.Run("plain user", func(t *testing.T) {
		stdout, stderr, code := inNamespace(nil, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
			bin, "serve", "--demo")
		if code == 0 {
			t.Fatalf("serve --demo as nobody without PostgreSQL exited 0:\n%s%s", stdout, stderr)
		}
		sentence := strings.TrimSpace(stderr)
		if stdout != "" || strings.Contains(sentence, "\n") || !strings.HasPrefix(sentence, "payintake: ") || !strings.HasSuffix(sentence, ".") {
			t.Fatalf("want one sentence on stderr and nothing on stdout; got stdout %q, stderr:\n%s", stdout, stderr)
		}
		if want := "`" + strings.Join(commands, " && ") + "`"; !strings.Contains(sentence, want) || !strings.Contains(sentence, "root") {
			t.Fatalf("the sentence should say to run %s as root; it says:\n%s", want, sentence)
		}
		t.Logf("as nobody: %s", sentence)
	})

	t.Run("root", func(t *testing.T) {
		stdout, stderr, code := inNamespace([]string{dryRunEnv + "=1"}, "sh", "-c", first)
		if code == 0 {
			t.Fatalf("%s in dry-run mode without PostgreSQL exited 0:\n%s%s", first, stdout, stderr)
		}
		if !strings.Contains(stderr, strings.Join(commands, "\n")+"\n") {
			t.Fatalf("%s as root should run install-deps.sh, which prints\n%s\nit printed:\n%s%s", first, out, stdout, stderr)
		}
		if !strings.Contains(stderr, dryRunEnv+" is set") {
			t.Fatalf("%s should say that nothing was installed; it printed:\n%s", first, stderr)
		}
		t.Logf("as root (dry run):\n%s", stderr)
	})

	// .ci/run, the second Quick start command, installs through the same
	// script and keeps no list of its own.
	ci, err := os.ReadFile(filepath.Join(root, ".ci/run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\nscripts/install-deps.sh test\n") || strings.Contains(string(ci), "apt-get") {
		t.Fatal(".ci/run should install with `scripts/install-deps.sh test` and run no apt-get of its own")
	}
}

// readmeFirstCommand is the first line of the README's Quick start block,
// without its comment.
func readmeFirstCommand(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Quick start")
	j := strings.Index(s[max(i, 0):], "```sh\n")
	if i < 0 || j < 0 {
		t.Fatal("README.md has no Quick start sh block")
	}
	line, _, _ := strings.Cut(s[i+j+len("```sh\n"):], "\n")
	cmd, _, _ := strings.Cut(line, "#")
	return strings.TrimSpace(cmd)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
