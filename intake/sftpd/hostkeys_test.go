package sftpd_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/payintake/payintake/intake/sftpd"
	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// testKeys are host keys of the three types, made once for the drop zones
// that do not read theirs from the store (an RSA key takes a while).
var testKeys = sync.OnceValues(func() (*sftpd.HostKeys, error) {
	h := &sftpd.HostKeys{}
	for _, typ := range []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoRSA} {
		k, err := sftpd.GenerateHostKey(typ)
		if err != nil {
			return nil, err
		}
		s, err := ssh.ParsePrivateKey(k.Private)
		if err != nil {
			return nil, err
		}
		h.Active = append(h.Active, s)
		h.Announced = append(h.Announced, s)
	}
	return h, nil
})

func testHostKeys(t testing.TB) *sftpd.HostKeys {
	t.Helper()
	h, err := testKeys()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// activeKey is the active host key of type typ.
func activeKey(t testing.TB, h *sftpd.HostKeys, typ string) ssh.PublicKey {
	t.Helper()
	for _, k := range h.Active {
		if k.PublicKey().Type() == typ {
			return k.PublicKey()
		}
	}
	t.Fatalf("no active %s host key", typ)
	return nil
}

// Several servers starting at once on an empty database end up with the
// same keys: one of each type.
func TestHostKeysCreatedOnceByConcurrentServers(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	const n = 5
	stores := make([]*records.Store, n)
	for i := range n {
		st, err := records.Open(ctx, url, records.Options{SecretKeys: pgtest.TestSecretKeys})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		stores[i] = st
	}
	got := make([][]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			h, err := sftpd.EnsureHostKeys(ctx, stores[i], slog.New(slog.DiscardHandler))
			if err != nil {
				errs <- err
				return
			}
			for _, k := range h.Active {
				got[i] = append(got[i], ssh.FingerprintSHA256(k.PublicKey()))
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	keys, err := stores[0].HostKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	types := map[string]int{}
	for _, k := range keys {
		if k.State == records.HostKeyActive {
			want = append(want, k.Fingerprint)
			types[k.Type]++
		}
	}
	if len(keys) != 3 || len(want) != 3 || types[ssh.KeyAlgoED25519] != 1 || types[ssh.KeyAlgoECDSA256] != 1 || types[ssh.KeyAlgoRSA] != 1 {
		t.Fatalf("active keys by type: %v (%d rows in all)", types, len(keys))
	}
	for i := range n {
		if !slices.Equal(slices.Sorted(slices.Values(got[i])), slices.Sorted(slices.Values(want))) {
			t.Fatalf("server %d serves %v, the database holds %v", i, got[i], want)
		}
	}
	for _, k := range keys {
		if k.Origin != "generated" {
			t.Fatalf("the %s key %s came from %q, want generated", k.Type, k.Fingerprint, k.Origin)
		}
	}
	// At rest the private keys are sealed: no private key's bytes are in the table.
	var dump []byte
	if err := stores[0].Pool().QueryRow(ctx, `SELECT string_agg(sealed, ''::bytea) FROM ssh_host_keys`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		raw, err := ssh.ParseRawPrivateKey(k.Private)
		if err != nil {
			t.Fatal(err)
		}
		var secret []byte
		switch p := raw.(type) {
		case *ed25519.PrivateKey:
			secret = p.Seed()
		case *ecdsa.PrivateKey:
			if secret, err = p.Bytes(); err != nil {
				t.Fatal(err)
			}
		case *rsa.PrivateKey:
			secret = p.D.Bytes()
		}
		if len(secret) < 32 || bytes.Contains(dump, k.Private) || bytes.Contains(dump, secret) {
			t.Fatalf("host key %s is stored in plain", k.Fingerprint)
		}
	}
}

// keyscan returns the host key of type typ (ssh-keyscan's -t name) that the
// server at addr serves, as an authorized_keys line without comment.
func keyscan(t *testing.T, addr, typ string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(keyscanBin, "-T", "10", "-p", port, "-t", typ, host).Output()
	if err != nil {
		t.Fatalf("ssh-keyscan -t %s %s: %v", typ, addr, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && !strings.HasPrefix(line, "#") {
			return f[1] + " " + f[2]
		}
	}
	t.Fatalf("ssh-keyscan -t %s %s: no key in %q", typ, addr, out)
	return ""
}

const keyscanBin = "/usr/bin/ssh-keyscan"

func authorizedLine(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// The fleet: two servers on one database serve the same host key of each
// type, and OpenSSH restricted to each type logs in to both against one
// known_hosts naming the database's keys.
func TestFleetServesTheSameHostKeys(t *testing.T) {
	requireBinary(t, opensshClient, "openssh-client")
	requireBinary(t, keyscanBin, "openssh-client")
	a := newDropZone(t, zoneOpts{fromStore: true})
	b := newDropZone(t, zoneOpts{url: a.url, fromStore: true})
	keys, err := sftpd.LoadHostKeys(a.ctx, a.store)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a.partner("acme")
	key := a.keyFile("acme", dir)
	var kh strings.Builder
	for _, z := range []*dropZone{a, b} {
		for _, k := range keys.Active {
			kh.WriteString(knownhosts.Line([]string{knownhosts.Normalize(z.addr)}, k.PublicKey()) + "\n")
		}
	}
	khFile := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(khFile, []byte(kh.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ scan, algos, typ string }{
		{"ed25519", "ssh-ed25519", ssh.KeyAlgoED25519},
		{"ecdsa", "ecdsa-sha2-nistp256", ssh.KeyAlgoECDSA256},
		{"rsa", "rsa-sha2-512,rsa-sha2-256", ssh.KeyAlgoRSA},
	} {
		want := authorizedLine(activeKey(t, keys, c.typ))
		for _, z := range []*dropZone{a, b} {
			if got := keyscan(t, z.addr, c.scan); got != want {
				t.Fatalf("%s serves %s key %s, the database holds %s", z.addr, c.scan, got, want)
			}
			_, port, _ := net.SplitHostPort(z.addr)
			out, err := exec.Command(opensshClient, "-F", "/dev/null", "-i", key, "-P", port, "-o", "UserKnownHostsFile="+khFile,
				"-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "UpdateHostKeys=no",
				"-o", "HostKeyAlgorithms="+c.algos, "-b", "-", "acme@127.0.0.1").CombinedOutput()
			if err != nil {
				t.Fatalf("sftp -o HostKeyAlgorithms=%s to %s: %v\n%s", c.algos, z.addr, err, out)
			}
		}
	}
}

// sftpLs logs in to z as acme with OpenSSH, known_hosts kh, and lists /inbox.
func sftpLs(z *dropZone, key, kh string, opts ...string) ([]byte, error) {
	_, port, _ := net.SplitHostPort(z.addr)
	args := []string{"-F", "/dev/null", "-i", key, "-P", port, "-o", "UserKnownHostsFile=" + kh,
		"-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"}
	for _, o := range opts {
		args = append(args, "-o", o)
	}
	cmd := exec.Command(opensshClient, append(args, "-b", "-", "acme@127.0.0.1")...)
	cmd.Stdin = strings.NewReader("ls\n")
	return cmd.CombinedOutput()
}

// knownHosts writes dir/known_hosts naming the zone's active host keys
// (testHostKeys) and returns its path.
func (z *dropZone) knownHosts(dir string) string {
	z.t.Helper()
	var kh strings.Builder
	for _, k := range testHostKeys(z.t).Active {
		kh.WriteString(knownhosts.Line([]string{knownhosts.Normalize(z.addr)}, k.PublicKey()) + "\n")
	}
	path := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(path, []byte(kh.String()), 0o600); err != nil {
		z.t.Fatal(err)
	}
	return path
}

// knows reports whether known_hosts file kh holds key k.
func knows(t *testing.T, kh string, k ssh.PublicKey) bool {
	t.Helper()
	b, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), strings.Fields(authorizedLine(k))[1])
}

// The documented rotation: a next key is announced after login
// (hostkeys-00@openssh.com) and a client with UpdateHostKeys adds it to
// known_hosts, having checked the server's proof; once promoted it is
// served, and that client connects without a warning while one that never
// learned it refuses. A key retired a while ago is no longer announced,
// and the client drops it.
func TestHostKeyRotationAnnouncedBeforeUse(t *testing.T) {
	requireBinary(t, opensshClient, "openssh-client")
	requireBinary(t, keyscanBin, "openssh-client")
	ctx := context.Background()
	url := pgtest.New(t)
	st, err := records.Open(ctx, url, records.Options{SecretKeys: pgtest.TestSecretKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	h, err := sftpd.EnsureHostKeys(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	old := activeKey(t, h, ssh.KeyAlgoED25519)
	next, err := sftpd.GenerateHostKey(ssh.KeyAlgoED25519)
	if err != nil {
		t.Fatal(err)
	}
	next.State = records.HostKeyNext
	if added, err := st.AddHostKey(ctx, next); err != nil || !added {
		t.Fatalf("add the next key: %v %v", added, err)
	}
	nextKey, err := ssh.ParsePublicKey(next.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	z := newDropZone(t, zoneOpts{url: url, fromStore: true})
	z.partner("acme")
	dir := t.TempDir()
	key := z.keyFile("acme", dir)
	// A partner who knows only the Ed25519 key (the one OpenSSH picks).
	kh, stale := filepath.Join(dir, "known_hosts"), filepath.Join(dir, "known_hosts.stale")
	line := knownhosts.Line([]string{knownhosts.Normalize(z.addr)}, old) + "\n"
	for _, f := range []string{kh, stale} {
		if err := os.WriteFile(f, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	out, err := sftpLs(z, key, kh, "UpdateHostKeys=yes", "LogLevel=DEBUG3")
	if err != nil {
		t.Fatalf("sftp with UpdateHostKeys: %v\n%s", err, out)
	}
	for _, k := range append(h.Active, mustSigner(t, next.Private)) {
		if !knows(t, kh, k.PublicKey()) {
			b, _ := os.ReadFile(kh)
			t.Fatalf("after login, known_hosts lacks the announced %s key %s:\n%s\nDEBUG %s", k.PublicKey().Type(), ssh.FingerprintSHA256(k.PublicKey()), b, out)
		}
	}

	promoted, err := st.PromoteHostKeys(ctx)
	if err != nil || !slices.Equal(promoted, []string{next.Fingerprint}) {
		t.Fatalf("promote: %v %v", promoted, err)
	}
	// The server reads its keys again (every 50ms here): the new key is served.
	eventually.True(t, 30*time.Second, func() bool { return keyscan(t, z.addr, "ed25519") == authorizedLine(nextKey) },
		"the promoted key %s served", next.Fingerprint)
	if out, err := sftpLs(z, key, stale, "UpdateHostKeys=no", "HostKeyAlgorithms=ssh-ed25519"); err == nil {
		t.Fatalf("a client that never learned the new key connected:\n%s", out)
	}
	if out, err := sftpLs(z, key, kh, "UpdateHostKeys=yes", "HostKeyAlgorithms=ssh-ed25519"); err != nil {
		t.Fatalf("a client that learned the new key before its use: %v\n%s", err, out)
	}
	if !knows(t, kh, old) {
		t.Fatal("the key retired a moment ago was dropped from known_hosts (servers that have not read the rotation yet still serve it)")
	}

	// Retired long ago: no longer announced, and dropped by the client.
	if _, err := st.Pool().Exec(ctx, `UPDATE ssh_host_keys SET retired_at = now() - interval '1 hour' WHERE state = 'retired'`); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 30*time.Second, func() bool {
		if out, err := sftpLs(z, key, kh, "UpdateHostKeys=yes"); err != nil {
			t.Fatalf("sftp: %v\n%s", err, out)
		}
		return !knows(t, kh, old)
	}, "the key retired an hour ago dropped from known_hosts")
}

func mustSigner(t *testing.T, private []byte) ssh.Signer {
	t.Helper()
	s, err := ssh.ParsePrivateKey(private)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The weak algorithms are offered only with LegacyAlgorithms: a client
// that insists on one of them is refused by default and served with it.
func TestLegacyAlgorithmsOnlyWithTheFlag(t *testing.T) {
	requireBinary(t, opensshClient, "openssh-client")
	for _, legacy := range []bool{false, true} {
		z := newDropZone(t, zoneOpts{legacy: legacy, workers: -1})
		z.partner("acme")
		dir := t.TempDir()
		key := z.keyFile("acme", dir)
		khFile := z.knownHosts(dir)
		for _, opts := range [][]string{
			{"HostKeyAlgorithms=ssh-rsa", "PubkeyAcceptedAlgorithms=+ssh-rsa"},
			{"KexAlgorithms=diffie-hellman-group14-sha1"},
			{"Ciphers=aes128-ctr", "MACs=hmac-sha1-96"},
			{"Ciphers=aes128-ctr", "MACs=hmac-sha1"},
		} {
			out, err := sftpLs(z, key, khFile, append(opts, "UpdateHostKeys=no")...)
			if legacy && err != nil {
				t.Fatalf("with legacy algorithms, %v: %v\n%s", opts, err, out)
			}
			if !legacy && err == nil {
				t.Fatalf("without legacy algorithms, %v connected:\n%s", opts, out)
			}
		}
	}
}

// A session closes only after the global requests that arrived before its
// end are answered, however long an answer takes (a host-key proof signs
// with three keys): the client learns its next keys from those answers.
func TestSessionEndWaitsForGlobalRequestsBeforeIt(t *testing.T) {
	t.Parallel()
	reqs := make(chan *ssh.Request, 2)
	gate := make(chan struct{})
	var mu sync.Mutex
	var answered []string
	settle := sftpd.GlobalRequests(reqs, func(req *ssh.Request) {
		if req.Type == "slow" {
			<-gate
		}
		mu.Lock()
		answered = append(answered, req.Type)
		mu.Unlock()
	})
	reqs <- &ssh.Request{Type: "slow"}
	reqs <- &ssh.Request{Type: "queued"}
	settled := make(chan struct{})
	go func() {
		settle(t.Context())
		close(settled)
	}()
	// Blocked on the slow answer, settle must not return: give a wrong
	// settle time to show it.
	select {
	case <-settled:
		t.Fatal("settle returned while a request that arrived before it was being answered")
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	select {
	case <-settled:
	case <-time.After(10 * time.Second):
		t.Fatal("settle still waiting 10 s after the slow answer was let through")
	}
	mu.Lock()
	got := slices.Clone(answered)
	mu.Unlock()
	if !slices.Equal(got, []string{"slow", "queued"}) {
		t.Fatalf("answered %q before settle returned, want both requests queued before it, in order", got)
	}

	// The connection gone, settle returns at once; so does a cancelled one.
	close(reqs)
	settle(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	blocked := make(chan *ssh.Request)
	sftpd.GlobalRequests(blocked, func(*ssh.Request) {})(ctx)
	close(blocked)
}
