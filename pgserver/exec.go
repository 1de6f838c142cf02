package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// identity is the OS account the cluster runs as.
type identity struct {
	name string
	uid  int
	gid  int
	gids []uint32
	home string
	// cred is set when this process runs as root and the binaries must be
	// run as the postgres system user; nil means "run as ourselves".
	cred *syscall.Credential
}

// serverIdentity picks the account for the cluster: ourselves, or the
// `postgres` system user when we are root (initdb and postgres refuse root).
func serverIdentity() (identity, error) {
	if os.Geteuid() != 0 {
		id := identity{uid: os.Geteuid(), gid: os.Getegid(), home: os.Getenv("HOME")}
		if u, err := user.Current(); err == nil {
			id.name = u.Username
		}
		return id, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return identity{}, fmt.Errorf("running as root, PostgreSQL refuses to run as root and there is no `postgres` system user to run it as (create one, e.g. by installing the postgresql-15 package, or run payintake as a normal user): %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return identity{}, fmt.Errorf("postgres user uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return identity{}, fmt.Errorf("postgres user gid %q: %w", u.Gid, err)
	}
	id := identity{name: u.Username, uid: uid, gid: gid, home: u.HomeDir}
	if groups, err := u.GroupIds(); err == nil {
		for _, g := range groups {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil && int(n) != gid {
				id.gids = append(id.gids, uint32(n))
			}
		}
	}
	id.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: id.gids}
	return id, nil
}

// inGroup reports whether gid is one of the identity's groups.
func (id identity) inGroup(gid uint32) bool {
	if int(gid) == id.gid {
		return true
	}
	for _, g := range id.gids {
		if g == gid {
			return true
		}
	}
	return false
}

// canTraverse reports whether the identity may search (x) the directory fi.
func (id identity) canTraverse(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || id.uid == 0 {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case int(st.Uid) == id.uid:
		return perm&0o100 != 0
	case id.inGroup(st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// chown gives path to the cluster account when we run the cluster as
// another user; otherwise it does nothing.
func (id identity) chown(path string) error {
	if id.cred == nil {
		return nil
	}
	if err := os.Lchown(path, id.uid, id.gid); err != nil {
		return fmt.Errorf("give %s to user %s: %w", path, id.name, err)
	}
	return nil
}

// runner runs PostgreSQL binaries as the cluster account.
type runner struct {
	binDir string
	id     identity
}

// run executes binDir/name with args and returns its combined output. A
// failure's error carries the output.
func (r runner) run(ctx context.Context, name string, args ...string) (string, int, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(r.binDir, name), args...)
	cmd.Dir = "/"
	cmd.Env = r.env()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 5 * time.Second
	if r.id.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.id.cred}
	}
	keepFilesFromChildren()
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if err != nil {
		code := -1
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
		}
		if text != "" {
			return text, code, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, text)
		}
		return text, code, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return text, 0, nil
}

// env is our environment minus libpq's PG* variables (which would redirect
// pg_ctl or initdb), with HOME/USER set for the cluster account.
func (r runner) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || k == "LC_ALL" {
			continue
		}
		if r.id.cred != nil && (k == "HOME" || k == "USER" || k == "LOGNAME") {
			continue
		}
		env = append(env, kv)
	}
	if r.id.cred != nil {
		env = append(env, "HOME="+r.id.home, "USER="+r.id.name, "LOGNAME="+r.id.name)
	}
	return env
}

// keepFilesFromChildren marks every file descriptor of this process above
// stderr close-on-exec, so the PostgreSQL binaries, and the postmaster that
// outlives us, inherit only stdin, stdout and stderr. Go opens its own
// files close-on-exec, but not the descriptors this process inherited:
// `flock LOCKFILE go test ./...` hands its lock's descriptor to go test,
// which hands it to the test binaries, and a postmaster started beneath
// kept the lock held for as long as it ran. A descriptor Go passes on
// deliberately (exec.Cmd's ExtraFiles) is dup'ed into the child, which
// clears the flag there, so nothing else changes.
func keepFilesFromChildren() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return // no /proc to list them with
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
