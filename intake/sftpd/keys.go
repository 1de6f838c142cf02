package sftpd

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
)

// HostKeyFile is the name of the SSH host key inside the data dir.
const HostKeyFile = "ssh_host_ed25519_key"

// LoadOrCreateHostKey returns the server's Ed25519 host key kept at path,
// generating it on first use (OpenSSH private key format, mode 0600). Two
// processes starting at once end up with the same key.
func LoadOrCreateHostKey(path string) (ssh.Signer, error) {
	if _, err := EnsureKeyPair(path, "payintake host key"); err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	return ReadPrivateKey(path)
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
