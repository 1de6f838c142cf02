package pgserver

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/internal/eventually"
)

const helperEnv = "PGSERVER_TEST_HELPER_DATADIR"

// newDataDir returns a fresh data dir path (not yet created). t.TempDir
// makes 0700 directories; when the tests run as root the cluster runs as the
// postgres user, which must be able to traverse them.
func newDataDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	dataDir := filepath.Join(base, "data")
	t.Cleanup(func() { forceStop(t, dataDir) })
	return dataDir
}

// forceStop kills a cluster a failed test left running.
func forceStop(t *testing.T, dataDir string) {
	dir := filepath.Join(dataDir, "postgres")
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); err != nil {
		return
	}
	binDir, err := FindBinDir()
	if err != nil {
		return
	}
	id, err := serverIdentity()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, _ = runner{binDir: binDir, id: id}.run(ctx, "pg_ctl", "stop", "-D", dir, "-m", "immediate", "-w", "-s")
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func start(t *testing.T, ctx context.Context, dataDir string) *Server {
	t.Helper()
	s, err := Start(ctx, Options{DataDir: dataDir})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func exec1(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// up reports whether the cluster at url accepts connections: true when a
// connection and a ping succeed, false when the socket refuses them or is
// gone. Anything else (a connection still not made when the test's time is
// up, on a loaded machine) is neither answer and fails the test.
func up(t *testing.T, ctx context.Context, url string) bool {
	t.Helper()
	isUp, err := probe(ctx, url)
	if err != nil {
		t.Fatalf("is the cluster at %s up? no answer: %v", url, err)
	}
	return isUp
}

// probe is up's question; err is set when the answer is neither.
func probe(ctx context.Context, url string) (bool, error) {
	conn, err := pgx.Connect(ctx, url)
	if err == nil {
		defer conn.Close(context.WithoutCancel(ctx))
		if err = conn.Ping(ctx); err == nil {
			return true, nil
		}
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return false, nil
	}
	return false, err
}

func TestStartStopReuse(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dataDir := newDataDir(t)

	s := start(t, ctx, dataDir)
	if !strings.Contains(s.URL(), "host="+filepath.Join(dataDir, "postgres")+" ") || !strings.Contains(s.URL(), "dbname=payintake") {
		t.Errorf("URL = %q, want the socket in the cluster dir and dbname=payintake", s.URL())
	}
	conn := connect(t, ctx, s.URL())
	var one int
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("select 1 = %d, %v", one, err)
	}
	var listen, fsync, walBuffers, walWriterDelay string
	if err := conn.QueryRow(ctx, "select current_setting('listen_addresses'), current_setting('fsync'), current_setting('wal_buffers'), current_setting('wal_writer_delay')").
		Scan(&listen, &fsync, &walBuffers, &walWriterDelay); err != nil {
		t.Fatal(err)
	}
	if listen != "" || fsync != "on" {
		t.Errorf("listen_addresses = %q, fsync = %q; want empty and on", listen, fsync)
	}
	if walBuffers != "64MB" || walWriterDelay != "10ms" {
		t.Errorf("wal_buffers = %q, wal_writer_delay = %q; want 64MB and 10ms (uploads' WAL written behind them)", walBuffers, walWriterDelay)
	}
	exec1(t, ctx, conn, "create table kept (v text)")
	exec1(t, ctx, conn, "insert into kept values ('survives')")
	exec1(t, ctx, conn, "create database other")
	other := connect(t, ctx, s.URLFor("other"))
	var db string
	if err := other.QueryRow(ctx, "select current_database()").Scan(&db); err != nil || db != "other" {
		t.Fatalf("current_database = %q, %v", db, err)
	}
	conn.Close(ctx)
	other.Close(ctx)

	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if up(t, ctx, s.URL()) {
		t.Fatal("cluster still reachable after Stop")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postgres", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("postmaster.pid still there after Stop: %v", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	s2 := start(t, ctx, dataDir)
	defer s2.Stop(ctx)
	conn2 := connect(t, ctx, s2.URL())
	var v string
	if err := conn2.QueryRow(ctx, "select v from kept").Scan(&v); err != nil || v != "survives" {
		t.Fatalf("after restart: v = %q, %v", v, err)
	}
	conn2.Close(ctx)
	if err := s2.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestSharedUseInProcess(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dataDir := newDataDir(t)

	s1 := start(t, ctx, dataDir)
	s2 := start(t, ctx, dataDir)
	if !s1.started || s2.started {
		t.Fatalf("started = %v, %v; want only the first to start the cluster", s1.started, s2.started)
	}
	if err := s1.Stop(ctx); err != nil {
		t.Fatalf("s1.Stop: %v", err)
	}
	if !up(t, ctx, s2.URL()) {
		t.Fatal("the first Stop stopped the cluster while the second handle still uses it")
	}
	// The last user out stops a cluster payintake started.
	if err := s2.Stop(ctx); err != nil {
		t.Fatalf("s2.Stop: %v", err)
	}
	if up(t, ctx, s2.URL()) {
		t.Fatal("cluster still running after the last Stop")
	}
}

// TestHelperProcess is not a real test: TestSharedUseAcrossProcesses runs
// the test binary with helperEnv set so this holds a Server in another
// process until its stdin closes.
func TestHelperProcess(t *testing.T) {
	dataDir := os.Getenv(helperEnv)
	if dataDir == "" {
		return
	}
	ctx := context.Background()
	s, err := Start(ctx, Options{DataDir: dataDir})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("READY")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := s.Stop(ctx); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("STOPPED")
	os.Exit(0)
}

func TestSharedUseAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dataDir := newDataDir(t)

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dataDir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "READY" {
		t.Fatalf("helper: %q", lines.Text())
	}

	// The helper process started the cluster; we join and leave.
	s := start(t, ctx, dataDir)
	if s.started {
		t.Fatal("second process started the cluster again")
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !up(t, ctx, s.URL()) {
		t.Fatal("our Stop stopped the cluster the helper process still uses")
	}

	// Join again, let the helper finish first: it must not stop the cluster
	// under us; our Stop, as the last user, stops it.
	s = start(t, ctx, dataDir)
	stdin.Close()
	if !lines.Scan() || lines.Text() != "STOPPED" {
		t.Fatalf("helper: %q", lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	if !up(t, ctx, s.URL()) {
		t.Fatal("the helper's Stop stopped the cluster while we still use it")
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if up(t, ctx, s.URL()) {
		t.Fatal("cluster still running after the last Stop")
	}
}

func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dataDir := newDataDir(t)

	s := start(t, ctx, dataDir)
	conn := connect(t, ctx, s.URL())
	exec1(t, ctx, conn, "create table kept (v int)")
	exec1(t, ctx, conn, "insert into kept values (42)")
	conn.Close(ctx)

	pid, err := readPostmasterPID(filepath.Join(dataDir, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid.pid, err)
	}
	// The kill has taken effect when the socket refuses connections (the
	// postmaster may not be a zombie yet: Start must wait for it, not take
	// it for a live one).
	eventually.NoError(t, time.Minute, func() error {
		if isUp, err := probe(ctx, s.URL()); err != nil || isUp {
			return fmt.Errorf("postmaster still answering after kill -9 (up %v, %v)", isUp, err)
		}
		return nil
	})
	// The crashed process's handle goes away without a clean stop.
	s.users.Close()

	s2 := start(t, ctx, dataDir)
	if !s2.started {
		t.Error("Start after the crash did not start the cluster")
	}
	conn2 := connect(t, ctx, s2.URL())
	var v int
	if err := conn2.QueryRow(ctx, "select v from kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after crash recovery: v = %d, %v", v, err)
	}
	conn2.Close(ctx)
	if err := s2.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestChildrenInheritNoFiles: a descriptor this process holds without
// close-on-exec, as one inherited from `flock LOCKFILE go test`, is not
// handed down to the cluster: once we close it, its lock is free, while the
// postmaster we started runs on.
func TestChildrenInheritNoFiles(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dataDir := newDataDir(t)
	path := filepath.Join(t.TempDir(), "outer.lock")
	syscall.ForkLock.RLock() // a descriptor without close-on-exec is made under it
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT, 0o600)
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}

	s := start(t, ctx, dataDir)
	defer s.Stop(ctx)
	pid, err := readPostmasterPID(filepath.Join(dataDir, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid.pid, e.Name())); l == path {
			t.Errorf("the postmaster (pid %d) holds %s as descriptor %s", pid.pid, path, e.Name())
		}
	}
	syscall.Close(fd)
	other, err := tryFlockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if other == nil {
		t.Fatal("our lock is still held after we closed it: a child of ours inherited it")
	}
	other.Close()
	if !up(t, ctx, s.URL()) {
		t.Fatal("the cluster is not running")
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestLongPathSocketFallback(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dataDir := newDataDir(t)
	long := filepath.Join(dataDir, strings.Repeat("x", 60), strings.Repeat("y", 60))
	for _, d := range []string{dataDir, filepath.Dir(long)} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { forceStop(t, long) })

	s := start(t, ctx, long)
	if !strings.Contains(s.URL(), "host="+filepath.Join(os.TempDir(), "payintake-pg-")) {
		t.Errorf("URL = %q, want a socket dir under %s", s.URL(), os.TempDir())
	}
	if !up(t, ctx, s.URL()) {
		t.Fatal("cluster not reachable through the fallback socket dir")
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := os.RemoveAll(s.host); err != nil {
		t.Error(err)
	}
}

func TestNotACluster(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	if err := os.MkdirAll(filepath.Join(dataDir, "postgres"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "postgres", "notes.txt"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(testCtx(t), Options{DataDir: dataDir})
	if err == nil || !strings.Contains(err.Error(), "is not a PostgreSQL cluster") {
		t.Fatalf("Start on a non-cluster dir: %v", err)
	}
}

func TestUntraversableParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CI runs as root): only root runs the cluster as another user")
	}
	t.Parallel()
	base := t.TempDir() // 0700, root-owned: postgres cannot enter it
	dataDir := filepath.Join(base, "data")
	fallback := traversableTempDir(t)
	ctx := testCtx(t)

	s, err := Start(ctx, Options{DataDir: dataDir, FallbackDir: fallback})
	if err != nil {
		t.Fatalf("Start under an untraversable dir: %v", err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	want := filepath.Join(fallback, clusterHomeName(t, dataDir), "postgres")
	if s.dir != want {
		t.Fatalf("cluster dir = %s, want %s", s.dir, want)
	}
	if _, err := os.Stat(filepath.Join(want, "PG_VERSION")); err != nil {
		t.Fatalf("no cluster in the fallback: %v", err)
	}
	loc, err := os.ReadFile(filepath.Join(dataDir, "postgres.location"))
	if err != nil || !strings.HasPrefix(string(loc), want+"\n") {
		t.Fatalf("postgres.location = %q, %v; want it to start with %s", loc, err, want)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postgres")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a cluster dir was made in the data dir as well: %v", err)
	}
	conn, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatalf("connect to the fallback cluster: %v", err)
	}
	conn.Close(ctx)

	// A second Start of the same data dir finds the same cluster.
	s2, err := Start(ctx, Options{DataDir: dataDir, FallbackDir: fallback})
	if err != nil {
		t.Fatalf("second Start: %v", err)
	}
	defer s2.Stop(context.Background())
	if s2.dir != want {
		t.Fatalf("second Start uses %s, want %s", s2.dir, want)
	}
}

func TestUntraversableParentKeepsExistingCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CI runs as root): only root runs the cluster as another user")
	}
	t.Parallel()
	base := t.TempDir()
	dataDir := filepath.Join(base, "data")
	if err := os.MkdirAll(filepath.Join(dataDir, "postgres"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Start(testCtx(t), Options{DataDir: dataDir, FallbackDir: traversableTempDir(t)})
	if err == nil || !strings.Contains(err.Error(), "cannot enter") || !strings.Contains(err.Error(), "chmod o+x") {
		t.Fatalf("Start with a cluster dir the account cannot reach: %v", err)
	}
}

// traversableTempDir is a temp dir (and parent) that every account may enter.
func traversableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "payintake-fallback-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// clusterHomeName is the fallback folder name for a data dir, computed here
// from the documented rule (first 8 bytes of SHA-256 of the absolute path).
func clusterHomeName(t *testing.T, dataDir string) string {
	t.Helper()
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(abs))
	return fmt.Sprintf("%x", sum[:8])
}

func TestFindBinDir(t *testing.T) {
	dir, err := FindBinDir()
	if err != nil {
		t.Fatalf("FindBinDir: %v (the tests need the PostgreSQL server binaries)", err)
	}
	for _, name := range requiredBinaries {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestFindBinDirOverrideEmpty(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(BinDirEnv, empty)
	_, err := FindBinDir()
	if err == nil {
		t.Fatal("FindBinDir with an empty override succeeded")
	}
	if !errors.Is(err, ErrNoBinaries) {
		t.Errorf("error does not wrap ErrNoBinaries: %v", err)
	}
	for _, want := range []string{"apt-get install postgresql-15", BinDirEnv, empty, "initdb"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestVersionLess(t *testing.T) {
	if !versionLess("9.6", "15") || versionLess("16", "15") || !versionLess("14", "15") {
		t.Fatal("versionLess orders versions wrongly")
	}
}

func TestParseStat(t *testing.T) {
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	comm, state, exiting, ok := parseStat(raw)
	if !ok || comm == "" || exiting || (state != 'R' && state != 'S') {
		t.Errorf("parseStat(/proc/self/stat) = %q, %q, exiting %v, %v; from %q", comm, state, exiting, ok, raw)
	}
	// A postmaster killed, in exit: PF_EXITING (0x4) among its flags.
	dying := []byte("4242 (postgres) R 1 4242 4242 0 -1 4194628 137 0 0 0 1 0 0 0 20 0 1 0 100 225095680 5000")
	if comm, state, exiting, ok := parseStat(dying); !ok || comm != "postgres" || state != 'R' || !exiting {
		t.Errorf("parseStat(%q) = %q, %q, exiting %v, %v; want postgres, R, exiting", dying, comm, state, exiting, ok)
	}
	// Names may hold spaces and parentheses.
	odd := []byte("7 (a (b) c) S 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0")
	if comm, state, exiting, ok := parseStat(odd); !ok || comm != "a (b) c" || state != 'S' || exiting {
		t.Errorf("parseStat(%q) = %q, %q, exiting %v, %v", odd, comm, state, exiting, ok)
	}
}
