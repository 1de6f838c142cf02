package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/pgserver"
	"github.com/payintake/payintake/records"
)

// pgNode is one PostgreSQL server of a primary/standby pair, run with
// Debian's server binaries as the postgres user when the test runs as root
// (PostgreSQL refuses root), on its own loopback port.
type pgNode struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	cred *syscall.Credential
}

func (n *pgNode) run(name string, args ...string) {
	n.t.Helper()
	cmd := exec.Command(filepath.Join(n.bin, name), args...)
	if n.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: n.cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		n.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// stop stops the server if it still runs (immediate shutdown), as the
// postgres user: pg_ctl, like postgres, refuses root.
func (n *pgNode) stop() {
	cmd := exec.Command(filepath.Join(n.bin, "pg_ctl"), "-D", n.dir, "-m", "immediate", "stop")
	if n.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: n.cred}
	}
	_ = cmd.Run() // already stopped is fine
}

func (n *pgNode) ctl(args ...string) {
	n.t.Helper()
	n.run("pg_ctl", append([]string{"-D", n.dir, "-l", n.dir + ".log", "-w", "-t", "60"}, args...)...)
}

// loopbackPort is a loopback port free at the time of the call.
func loopbackPort(t *testing.T) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(freePort(t))
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// newPGPair starts a primary and a streaming standby made from it by
// pg_basebackup, as a platform's PostgreSQL with a standby runs.
func newPGPair(t *testing.T) (primary, standby *pgNode) {
	t.Helper()
	bin, err := pgserver.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	// The postgres user must reach the clusters' folders: a folder of our
	// own in the system temp dir, open for traversal (t.TempDir's parent is not).
	root, err := os.MkdirTemp("", "payintake-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres system user (postgresql-15): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	primary = &pgNode{t: t, bin: bin, dir: filepath.Join(root, "primary"), port: loopbackPort(t), cred: cred}
	standby = &pgNode{t: t, bin: bin, dir: filepath.Join(root, "standby"), port: loopbackPort(t), cred: cred}
	opts := func(n *pgNode) string {
		return fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c fsync=off", n.port, root)
	}
	primary.run("initdb", "-D", primary.dir, "--auth=trust", "--username=postgres", "--no-sync")
	primary.ctl("-o", opts(primary), "start")
	t.Cleanup(primary.stop)
	primary.run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres", "payintake")
	standby.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", standby.dir, "-R", "-X", "stream", "--no-sync")
	standby.ctl("-o", opts(standby), "start")
	t.Cleanup(standby.stop)
	return primary, standby
}

// TestPostgresFailover: serve on a multi-host URL with
// target_session_attrs=read-write carries on when the primary dies and its
// standby is promoted: files uploaded before and after are all received and
// processed (none lost), the ones before read back from the promoted node.
func TestPostgresFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a failover: not in -short")
	}
	primary, standby := newPGPair(t)
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/payintake?target_session_attrs=read-write&sslmode=disable",
		primary.port, standby.port)
	srv := startServer(t, url, t.TempDir(), nil, "--workers", "2")
	ctx := context.Background()
	st, err := records.Open(ctx, url, records.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys := addPartners(t, st, "acme")

	upload := func(name string) {
		t.Helper()
		// A partner whose upload failed sends it again; a failover may
		// cost an upload or two while the pool finds the new primary.
		eventually.NoError(t, 90*time.Second, func() error {
			c, err := srv.dial("acme", keys["acme"])
			if err != nil {
				return fmt.Errorf("upload %s: %w", name, err)
			}
			defer c.Close()
			if err := c.upload(name, payrollFile(name[:1], 50)); err != nil {
				return fmt.Errorf("upload %s: %w", name, err)
			}
			c.waitResult(t, name, 60*time.Second)
			return nil
		})
	}
	started := time.Now()
	for _, name := range []string{"a1.csv", "b1.csv", "c1.csv"} {
		upload(name)
	}
	t.Logf("three files before the failover: %v", time.Since(started).Round(time.Millisecond))
	// Wait until the standby has replayed what the primary committed, so
	// the files before the failover are the standby's to keep (a replica
	// behind an asynchronous standby may lose its last commits: a platform
	// that cannot lose them runs a synchronous one).
	waitReplayed(t, primary, standby)

	primary.ctl("-m", "immediate", "stop")
	standby.ctl("promote")
	st.Close()

	promoted := time.Now()
	for _, name := range []string{"d2.csv", "e2.csv", "f2.csv"} {
		upload(name)
		t.Logf("%s received and processed %v after the promotion", name, time.Since(promoted).Round(time.Millisecond))
	}
	st2, err := records.Open(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/payintake?sslmode=disable", standby.port), records.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	led := audit(t, st2, "acme")
	if len(led.processed) != 6 || led.records != 300 {
		t.Fatalf("after the failover the promoted node has %d processed files and %d records of acme; want 6 and 300 (%+v)", len(led.processed), led.records, led)
	}
	for key, n := range led.processed {
		if n != 1 {
			t.Errorf("%s processed %d times", key, n)
		}
	}
	if !srv.alive() {
		t.Fatal("serve exited during the failover")
	}
}

// waitReplayed waits until standby has replayed the primary's current WAL position.
func waitReplayed(t *testing.T, primary, standby *pgNode) {
	t.Helper()
	ctx := context.Background()
	p, err := records.Open(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/payintake?sslmode=disable", primary.port), records.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var lsn string
	if err := p.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	s, err := records.Open(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/payintake?sslmode=disable", standby.port), records.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eventually.NoError(t, 30*time.Second, func() error {
		var caught bool
		if err := s.Pool().QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&caught); err != nil {
			t.Fatal(err)
		}
		if !caught {
			return fmt.Errorf("the standby has not replayed up to %s", lsn)
		}
		return nil
	})
}
