package sftpd

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/records"
)

// The server holds one active host key of each of these types (SSH key
// formats), and clients choose among them: Ed25519 for OpenSSH and most,
// ECDSA P-256 for clients without Ed25519 (JSch 0.1.55, FIPS-mode
// clients), RSA for the oldest (signing with rsa-sha2-256/512; SHA-1
// ssh-rsa only with Config.LegacyAlgorithms).
var hostKeyTypes = []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoRSA}

// rsaHostKeyBits is the size of a generated RSA host key (OpenSSH's
// ssh-keygen default).
const rsaHostKeyBits = 3072

// retiredAnnounced is how long a retired host key is still announced
// after its retirement: servers that have not read the rotation yet still
// serve it, and a client that logged in to one that has must not drop it
// from known_hosts meanwhile. It is longer than serve's host key refresh.
const retiredAnnounced = 10 * time.Minute

// HostKeys are what a server serves and announces: one active key of each
// type, and, told to clients after login (OpenSSH's
// hostkeys-00@openssh.com), the active, next and just retired keys.
type HostKeys struct {
	Active    []ssh.Signer
	Announced []ssh.Signer
}

// served are the active keys of the given types (nil: all).
func (h *HostKeys) served(types []string) []ssh.Signer {
	if types == nil {
		return h.Active
	}
	var keys []ssh.Signer
	for _, k := range h.Active {
		if slices.Contains(types, k.PublicKey().Type()) {
			keys = append(keys, k)
		}
	}
	return keys
}

// fingerprints lists keys' fingerprints, for logs.
func fingerprints(keys []ssh.Signer) []string {
	var fps []string
	for _, k := range keys {
		fps = append(fps, ssh.FingerprintSHA256(k.PublicKey()))
	}
	return fps
}

// GenerateHostKey makes a new host key of typ (one of the SSH key formats
// of hostKeyTypes), not stored yet.
func GenerateHostKey(typ string) (records.HostKey, error) {
	var priv crypto.Signer
	var err error
	switch typ {
	case ssh.KeyAlgoED25519:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case ssh.KeyAlgoECDSA256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ssh.KeyAlgoRSA:
		priv, err = rsa.GenerateKey(rand.Reader, rsaHostKeyBits)
	default:
		return records.HostKey{}, fmt.Errorf("host key type %q: want one of %s", typ, strings.Join(hostKeyTypes, ", "))
	}
	if err != nil {
		return records.HostKey{}, fmt.Errorf("generate a %s host key: %w", typ, err)
	}
	return hostKeyOf(priv, "generated")
}

// ParseHostKey reads a private host key file (OpenSSH's format, or PEM:
// PKCS#1, PKCS#8, SEC 1) of one of the three types.
func ParseHostKey(data []byte, origin string) (records.HostKey, error) {
	raw, err := ssh.ParseRawPrivateKey(data)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return records.HostKey{}, errors.New("the key is protected by a passphrase: remove it on a copy (ssh-keygen -p -N '' -f COPY) and import the copy")
	}
	if err != nil {
		return records.HostKey{}, fmt.Errorf("not a private SSH key: %w", err)
	}
	priv, ok := raw.(crypto.Signer)
	if p, isPtr := raw.(*ed25519.PrivateKey); isPtr {
		priv, ok = *p, true
	}
	if !ok {
		return records.HostKey{}, fmt.Errorf("a %T cannot be a host key", raw)
	}
	switch k := priv.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return records.HostKey{}, fmt.Errorf("an ECDSA host key must be on P-256 (this one is on %s): clients that need ECDSA know that curve", k.Curve.Params().Name)
		}
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return records.HostKey{}, fmt.Errorf("an RSA host key of %d bits is too weak: give one of at least 2048 (ssh-keygen -t rsa -b 3072)", k.N.BitLen())
		}
	case ed25519.PrivateKey:
	default:
		return records.HostKey{}, fmt.Errorf("a %T host key is not served: give an Ed25519, ECDSA P-256 or RSA key", priv)
	}
	return hostKeyOf(priv, origin)
}

// hostKeyOf is a private key as the store keeps it: its public half, its
// fingerprint, and the private key in OpenSSH's format.
func hostKeyOf(priv crypto.Signer, origin string) (records.HostKey, error) {
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return records.HostKey{}, fmt.Errorf("host key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "payintake host key")
	if err != nil {
		return records.HostKey{}, fmt.Errorf("encode host key: %w", err)
	}
	pub := signer.PublicKey()
	return records.HostKey{Type: pub.Type(), Fingerprint: ssh.FingerprintSHA256(pub), PublicKey: pub.Marshal(),
		Private: pem.EncodeToMemory(block), Origin: origin}, nil
}

// LoadHostKeys reads the host keys from the store.
func LoadHostKeys(ctx context.Context, st *records.Store) (*HostKeys, error) {
	keys, err := st.HostKeys(ctx)
	if err != nil {
		return nil, err
	}
	return hostKeysOf(keys, time.Now())
}

func hostKeysOf(keys []records.HostKey, now time.Time) (*HostKeys, error) {
	h := &HostKeys{}
	for _, typ := range hostKeyTypes {
		for _, k := range keys {
			if k.Type != typ {
				continue
			}
			announce := k.State != records.HostKeyRetired || k.RetiredAt != nil && now.Sub(*k.RetiredAt) < retiredAnnounced
			if !announce {
				continue
			}
			s, err := ssh.ParsePrivateKey(k.Private)
			if err != nil {
				return nil, fmt.Errorf("SSH host key %s: %w", k.Fingerprint, err)
			}
			if k.State == records.HostKeyActive {
				h.Active = append(h.Active, s)
			}
			h.Announced = append(h.Announced, s)
		}
	}
	if len(h.Active) == 0 {
		return nil, errors.New("the database holds no active SSH host key: start `payintake serve` once, which creates them, or `payintake hostkey import FILE --activate`")
	}
	return h, nil
}

// EnsureHostKeys makes sure the store holds an active host key of each
// type and returns the keys. Servers starting at once on one database may
// each add keys: one of each type is kept (records.AddHostKey), and all
// return the same.
func EnsureHostKeys(ctx context.Context, st *records.Store, log *slog.Logger) (*HostKeys, error) {
	keys, err := st.HostKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, typ := range hostKeyTypes {
		if slices.ContainsFunc(keys, func(k records.HostKey) bool { return k.Type == typ && k.State == records.HostKeyActive }) {
			continue
		}
		k, err := GenerateHostKey(typ)
		if err != nil {
			return nil, err
		}
		k.State = records.HostKeyActive
		added, err := st.AddHostKey(ctx, k)
		if err != nil {
			return nil, err
		}
		if added {
			log.Info("ssh host key generated", "type", k.Type, "fingerprint", k.Fingerprint)
		}
	}
	if keys, err = st.HostKeys(ctx); err != nil {
		return nil, err
	}
	return hostKeysOf(keys, time.Now())
}

// ReadPrivateKey reads an unencrypted OpenSSH private key file.
func ReadPrivateKey(path string) (ssh.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read SSH key %s: %w", path, err)
	}
	s, err := ssh.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("SSH key %s is not an unencrypted OpenSSH private key (%v): move it away to have a new one generated", path, err)
	}
	return s, nil
}

// EnsureKeyPair creates an Ed25519 key pair at path (private, 0600) and
// path+".pub" (authorized_keys line) unless the private key exists. It
// reports whether it created one.
func EnsureKeyPair(path, comment string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("check %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("create folder for %s: %w", path, err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return false, fmt.Errorf("generate key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return false, fmt.Errorf("encode key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return false, fmt.Errorf("encode public key: %w", err)
	}
	// Write aside and link into place: a concurrent creator wins or loses
	// whole, and a crash never leaves half a key.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-key-*")
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := pem.Encode(tmp, block); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	line := append(ssh.MarshalAuthorizedKey(sshPub)[:len(ssh.MarshalAuthorizedKey(sshPub))-1], []byte(" "+comment+"\n")...)
	if err := os.WriteFile(path+".pub", line, 0o644); err != nil {
		return false, fmt.Errorf("write %s.pub: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			// Another process made one first; keep its public half in step.
			if s, rerr := ReadPrivateKey(path); rerr == nil {
				_ = os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(s.PublicKey()), 0o644)
			}
			return false, nil
		}
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

// The algorithms offered follow OpenSSH's defaults (ssh_config(5),
// KexAlgorithms, Ciphers, MACs) as far as x/crypto/ssh implements them
// (no sntrup761x25519, diffie-hellman-group18-sha512 or umac); the client's
// preference picks among them. JSch 0.1.55, the oldest client partners run,
// meets them with ecdh-sha2-nistp256, aes128-ctr, hmac-sha2-256 and the
// ECDSA host key.
var (
	kexAlgorithms = []string{ssh.KeyExchangeMLKEM768X25519, ssh.KeyExchangeCurve25519,
		ssh.KeyExchangeECDHP256, ssh.KeyExchangeECDHP384, ssh.KeyExchangeECDHP521,
		ssh.KeyExchangeDHGEXSHA256, ssh.KeyExchangeDH16SHA512, ssh.KeyExchangeDH14SHA256}
	cipherAlgorithms = []string{ssh.CipherChaCha20Poly1305, ssh.CipherAES128CTR, ssh.CipherAES192CTR,
		ssh.CipherAES256CTR, ssh.CipherAES128GCM, ssh.CipherAES256GCM}
	macAlgorithms = []string{ssh.HMACSHA256ETM, ssh.HMACSHA512ETM, ssh.HMACSHA256, ssh.HMACSHA512}
	// rsaSignatures are the RSA host key's signature algorithms (RFC 8332).
	rsaSignatures = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}

	// With LegacyAlgorithms, after the others: SHA-1 key exchange and MACs,
	// and SHA-1 signatures by the RSA host key (JSch 0.1.55 with an RSA
	// host key in its known_hosts, or old appliances).
	legacyKex = []string{ssh.InsecureKeyExchangeDH14SHA1}
	legacyMAC = []string{ssh.HMACSHA1, ssh.InsecureHMACSHA196}
	legacyRSA = []string{ssh.KeyAlgoRSA}
)

// setAlgorithms gives cfg the algorithms and the active host keys.
func (s *Server) setAlgorithms(cfg *ssh.ServerConfig) {
	cfg.KeyExchanges = slices.Clone(kexAlgorithms)
	cfg.Ciphers = slices.Clone(cipherAlgorithms)
	cfg.MACs = slices.Clone(macAlgorithms)
	rsaAlgos := rsaSignatures
	if s.cfg.LegacyAlgorithms {
		cfg.KeyExchanges = append(cfg.KeyExchanges, legacyKex...)
		cfg.MACs = append(cfg.MACs, legacyMAC...)
		rsaAlgos = slices.Concat(rsaSignatures, legacyRSA)
	}
	for _, k := range s.hostKeys.Load().served(s.cfg.HostKeyTypes) {
		if as, ok := k.(ssh.AlgorithmSigner); ok && k.PublicKey().Type() == ssh.KeyAlgoRSA {
			if ms, err := ssh.NewSignerWithAlgorithms(as, rsaAlgos); err == nil {
				k = ms
			}
		}
		cfg.AddHostKey(k)
	}
}

// refreshHostKeys reads the host keys again; on failure the server goes on
// with the keys it has.
func (s *Server) refreshHostKeys(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := LoadHostKeys(cctx, s.cfg.Store)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("read the ssh host keys again (serving the ones read before)", "err", err)
		}
		return
	}
	old := s.hostKeys.Swap(h)
	if !slices.Equal(fingerprints(old.Active), fingerprints(h.Active)) || !slices.Equal(fingerprints(old.Announced), fingerprints(h.Announced)) {
		s.log.Info("ssh host keys changed", "active", fingerprints(h.Active), "announced", fingerprints(h.Announced))
	}
}

// OpenSSH's host key rotation extension (PROTOCOL §2.5): after login the
// server names every host key it has; a client with UpdateHostKeys asks it
// to prove it holds the ones it does not know, then adds them to
// known_hosts (and drops the ones no longer named). So a next key is known
// to partners before it is served.
const (
	reqHostKeys      = "hostkeys-00@openssh.com"
	reqHostKeysProve = "hostkeys-prove-00@openssh.com"
)

// announceHostKeys sends hostkeys-00@openssh.com (once per connection).
func (s *Server) announceHostKeys(conn ssh.Conn, keys *HostKeys, log *slog.Logger) {
	var payload []byte
	for _, k := range keys.Announced {
		payload = append(payload, ssh.Marshal(struct{ Key []byte }{k.PublicKey().Marshal()})...)
	}
	if _, _, err := conn.SendRequest(reqHostKeys, false, payload); err != nil {
		log.Debug("announce host keys", "err", err)
	}
}

// globalRequests answers a connection's global requests in one goroutine,
// in the order they arrive: a proof of host keys, and a refusal for
// anything else (keep-alives included, as OpenSSH expects of a server that
// does not know them).
//
// An OpenSSH client asks for its proof as soon as it reads the
// announcement, before it asks for the sftp subsystem, and it exits when
// its session closes, dropping a proof that comes later; OpenSSH's own
// server answers in order on one loop. So a session, before it closes,
// settles: it waits until every global request that arrived before it is
// answered. Else a short batch session (one ls) beats the signatures and
// the partner never learns the next key.
type globalRequests struct {
	barrier chan chan struct{}
	done    chan struct{}
}

// serveGlobalRequests answers reqs until the connection closes them.
func (s *Server) serveGlobalRequests(reqs <-chan *ssh.Request, conn ssh.Conn, keys *HostKeys, log *slog.Logger) *globalRequests {
	return newGlobalRequests(reqs, func(req *ssh.Request) {
		if req.Type != reqHostKeysProve {
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
			return
		}
		sigs, err := proveHostKeys(req.Payload, conn, keys, s.cfg.LegacyAlgorithms)
		if err != nil {
			log.Info("host key proof refused", "err", err)
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, sigs)
	})
}

// newGlobalRequests answers reqs with answer, one at a time in their
// order, until the connection closes them.
func newGlobalRequests(reqs <-chan *ssh.Request, answer func(*ssh.Request)) *globalRequests {
	g := &globalRequests{barrier: make(chan chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for {
			select {
			case req, ok := <-reqs:
				if !ok {
					return
				}
				answer(req)
			case settled := <-g.barrier:
				// The requests the connection has queued arrived before
				// the settling session's own; answer them first.
				for queued := true; queued; {
					select {
					case req, ok := <-reqs:
						if !ok {
							close(settled)
							return
						}
						answer(req)
					default:
						queued = false
					}
				}
				close(settled)
			}
		}
	}()
	return g
}

// settle returns once every global request that arrived before the call is
// answered, or the connection is gone, or ctx is done.
func (g *globalRequests) settle(ctx context.Context) {
	settled := make(chan struct{})
	select {
	case g.barrier <- settled:
	case <-g.done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-settled:
	case <-g.done:
	case <-ctx.Done():
	}
}

// proveHostKeys signs, with each key the client names (all of them
// announced), "hostkeys-prove-00@openssh.com", the session identifier and
// the key, and returns the signatures in the client's order.
func proveHostKeys(payload []byte, conn ssh.Conn, keys *HostKeys, legacy bool) ([]byte, error) {
	var negotiated string
	if a, ok := conn.(ssh.AlgorithmsConnMetadata); ok {
		negotiated = a.Algorithms().HostKey
	}
	var out []byte
	for rest := payload; len(rest) > 0; {
		var blob struct {
			Key  []byte
			Rest []byte `ssh:"rest"`
		}
		if err := ssh.Unmarshal(rest, &blob); err != nil {
			return nil, fmt.Errorf("malformed %s request: %w", reqHostKeysProve, err)
		}
		rest = blob.Rest
		i := slices.IndexFunc(keys.Announced, func(k ssh.Signer) bool { return string(k.PublicKey().Marshal()) == string(blob.Key) })
		if i < 0 {
			return nil, errors.New("asked to prove a host key this server does not announce")
		}
		k := keys.Announced[i]
		data := ssh.Marshal(struct {
			Name, SessionID, Key string
		}{reqHostKeysProve, string(conn.SessionID()), string(blob.Key)})
		var sig *ssh.Signature
		var err error
		if as, ok := k.(ssh.AlgorithmSigner); ok && k.PublicKey().Type() == ssh.KeyAlgoRSA {
			// OpenSSH checks an RSA proof against the RSA algorithm of the
			// key exchange when that used RSA; else any SHA-2 one does.
			algo := ssh.KeyAlgoRSASHA512
			if slices.Contains(rsaSignatures, negotiated) || legacy && negotiated == ssh.KeyAlgoRSA {
				algo = negotiated
			}
			sig, err = as.SignWithAlgorithm(rand.Reader, data, algo)
		} else {
			sig, err = k.Sign(rand.Reader, data)
		}
		if err != nil {
			return nil, fmt.Errorf("sign with host key %s: %w", ssh.FingerprintSHA256(k.PublicKey()), err)
		}
		out = append(out, ssh.Marshal(struct{ Sig []byte }{ssh.Marshal(sig)})...)
	}
	return out, nil
}
