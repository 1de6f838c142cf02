package sftpd

import (
	"bytes"
	"encoding/binary"
	"slices"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/cpu"
)

// The cipher of a connection.
//
// In SSH the client's order of preference picks the cipher among those the
// server offers; OpenSSH's client (and most others) put
// chacha20-poly1305@openssh.com first. x/crypto's ChaCha20 has no assembly
// on amd64, so decrypting an upload with it costs the server about a third
// more CPU than everything else the upload costs (hashing, spooling and
// streaming into PostgreSQL), while AES-GCM runs on the CPU's AES
// instructions. So when the CPU has them and the client's key exchange
// offer lists AES-GCM, the server offers only the AES-GCM ciphers that
// client listed: the client gets a cipher of its own list, never one it
// refused. Other clients (JSch 0.1.55 has no AES-GCM) get the whole list.

// aesHardware tells whether AES-GCM runs on CPU instructions here (as
// crypto/tls decides whether to prefer it over ChaCha20).
var aesHardware = cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ ||
	cpu.ARM64.HasAES && cpu.ARM64.HasPMULL ||
	cpu.S390X.HasAES && cpu.S390X.HasAESGCM

// kexInitWait bounds the wait for the client's key exchange offer before
// the server sends its own. Clients send theirs right after their version
// line, unprompted; one that waits for the server's first is served the
// whole list after this long.
const kexInitWait = 2 * time.Second

// maxKexInit is the largest client key exchange offer read ahead (OpenSSH
// 9's is about 1.5 KiB); a larger one gets the whole list.
const maxKexInit = 8 << 10

// kexInitMsg is the client's SSH_MSG_KEXINIT (RFC 4253, 7.1).
type kexInitMsg struct {
	Cookie                  [16]byte `sshtype:"20"`
	KexAlgos                []string
	ServerHostKeyAlgos      []string
	CiphersClientServer     []string
	CiphersServerClient     []string
	MACsClientServer        []string
	MACsServerClient        []string
	CompressionClientServer []string
	CompressionServerClient []string
	LanguagesClientServer   []string
	LanguagesServerClient   []string
	FirstKexFollows         bool
	Reserved                uint32
}

// ciphersFor is the list of ciphers offered to a client whose key exchange
// offer is k (nil: not known).
func ciphersFor(k *kexInitMsg) []string {
	if !aesHardware || k == nil {
		return slices.Clone(cipherAlgorithms)
	}
	var gcm []string
	for _, c := range k.CiphersClientServer {
		if (c == ssh.CipherAES128GCM || c == ssh.CipherAES256GCM) && slices.Contains(k.CiphersServerClient, c) {
			gcm = append(gcm, c)
		}
	}
	if len(gcm) == 0 {
		return slices.Clone(cipherAlgorithms)
	}
	return gcm
}

// peekKexInit reads ahead, without consuming them, the client's version
// line and the key exchange offer that follows it; nil when they do not
// come within kexInitWait or are not what SSH 2 sends (the handshake then
// decides what to answer).
func (c *bannerConn) peekKexInit() *kexInitMsg {
	_ = c.Conn.SetReadDeadline(time.Now().Add(kexInitWait))
	// The caller sets the handshake's deadline again.
	var line int // bytes of the version line, its "\n" included
	for {
		b, _ := c.r.Peek(c.r.Buffered())
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			if !bytes.HasPrefix(b, []byte("SSH-2.0-")) {
				return nil
			}
			line = i + 1
			break
		}
		if len(b) >= 255 { // RFC 4253, 4.2: at most 255 bytes
			return nil
		}
		if _, err := c.r.Peek(len(b) + 1); err != nil {
			return nil
		}
	}
	head, err := c.r.Peek(line + 5)
	if err != nil {
		return nil
	}
	length, padding := int(binary.BigEndian.Uint32(head[line:])), int(head[line+4])
	if length > maxKexInit-line-4 || padding+1 >= length {
		return nil
	}
	packet, err := c.r.Peek(line + 4 + length)
	if err != nil {
		return nil
	}
	var k kexInitMsg
	if err := ssh.Unmarshal(packet[line+5:line+4+length-padding], &k); err != nil {
		return nil
	}
	return &k
}
