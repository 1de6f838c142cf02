package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync/atomic"
	"time"
)

// certFiles serves the HTTP address's certificate from --tls-cert and
// --tls-key. Each handshake reads the one loaded last (GetCertificate), so
// a reload (SIGHUP, after a renewal replaced the files) swaps it for new
// connections while open ones carry on with theirs.
type certFiles struct {
	cert, key string
	current   atomic.Pointer[tls.Certificate]
}

// load reads the pair; on an error the certificate served stays the one
// loaded before.
func (c *certFiles) load() (*x509.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return nil, fmt.Errorf("load --tls-cert %s and --tls-key %s: %w", c.cert, c.key, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--tls-cert %s: %w", c.cert, err)
		}
	}
	if time.Now().After(leaf.NotAfter) {
		return nil, fmt.Errorf("--tls-cert %s expired on %s: renew it", c.cert, leaf.NotAfter.Format(time.DateOnly))
	}
	c.current.Store(&pair)
	return leaf, nil
}

func (c *certFiles) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.current.Load(), nil
}

// config is the HTTP address's TLS configuration.
func (c *certFiles) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.getCertificate}
}
