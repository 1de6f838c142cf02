package sftpd_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/intake/sftpd"
)

// The cipher is the client's first choice among the server's offer, and
// the server offers only AES-GCM to a client that lists it when the CPU
// runs it in hardware (x/crypto's ChaCha20 is plain Go on amd64).
func TestCipherIsAESGCMWhenTheClientOffersIt(t *testing.T) {
	requireBinary(t, opensshClient, "openssh-client")
	z := newDropZone(t, zoneOpts{workers: -1})
	z.partner("acme")
	dir := t.TempDir()
	key := z.keyFile("acme", dir)
	khFile := z.knownHosts(dir)
	hw := func(aes, soft string) string {
		if sftpd.AESHardware {
			return aes
		}
		return soft
	}
	negotiated := regexp.MustCompile(`kex: client->server cipher: (\S+)`)
	for _, c := range []struct {
		ciphers string // the client's Ciphers; empty: OpenSSH's default list
		want    string
	}{
		{"", hw("aes128-gcm@openssh.com", "chacha20-poly1305@openssh.com")},
		{"aes128-ctr,aes256-gcm@openssh.com", hw("aes256-gcm@openssh.com", "aes128-ctr")},
		{"chacha20-poly1305@openssh.com,aes128-ctr", "chacha20-poly1305@openssh.com"},
		{"aes192-ctr", "aes192-ctr"},
	} {
		opts := []string{"LogLevel=DEBUG1"}
		if c.ciphers != "" {
			opts = append(opts, "Ciphers="+c.ciphers)
		}
		out, err := sftpLs(z, key, khFile, opts...)
		if err != nil {
			t.Fatalf("Ciphers=%q: %v\n%s", c.ciphers, err, out)
		}
		m := negotiated.FindSubmatch(out)
		if m == nil || string(m[1]) != c.want {
			t.Fatalf("Ciphers=%q: negotiated %q, want %s\n%s", c.ciphers, m, c.want, out)
		}
	}
}

// A client that waits for the server's key exchange offer before sending
// its own (SSH allows it) gets it all the same.
func TestServerOffersKeyExchangeToAClientThatWaits(t *testing.T) {
	z := newDropZone(t, zoneOpts{workers: -1})
	c, err := net.Dial("tcp", z.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
		t.Fatalf("server version line %q: %v", line, err)
	}
	if _, err := io.WriteString(c, "SSH-2.0-waits\r\n"); err != nil {
		t.Fatal(err)
	}
	var head [6]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		t.Fatalf("no key exchange offer from the server: %v", err)
	}
	if n := binary.BigEndian.Uint32(head[:]); n < 16 || head[5] != 20 {
		t.Fatalf("the server's first packet is not SSH_MSG_KEXINIT: length %d, type %d", n, head[5])
	}
}
