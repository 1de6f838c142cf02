package intake

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/records"
)

// ParseAuthorizedKeys reads OpenSSH authorized_keys data (one key a line,
// comments and blank lines allowed) into partner keys.
func ParseAuthorizedKeys(partner string, data []byte) ([]records.PartnerKey, error) {
	var keys []records.PartnerKey
	line := 0
	for _, raw := range bytes.Split(data, []byte("\n")) {
		line++
		t := bytes.TrimSpace(raw)
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		pk, comment, _, _, err := ssh.ParseAuthorizedKey(t)
		if err != nil {
			return nil, fmt.Errorf("line %d is not an OpenSSH public key (%v): give lines like \"ssh-ed25519 AAAA... name\"", line, err)
		}
		keys = append(keys, records.PartnerKey{
			PartnerID:   partner,
			Fingerprint: ssh.FingerprintSHA256(pk),
			PublicKey:   strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk))),
			Comment:     comment,
		})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no public key found: give an OpenSSH authorized_keys file")
	}
	return keys, nil
}
