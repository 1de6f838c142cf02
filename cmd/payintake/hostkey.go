package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/payintake/payintake/intake/sftpd"
	"github.com/payintake/payintake/records"
)

// The SFTP door's host keys live in the database (records/hostkeys.go),
// shared by every serve on it. A rotation has two steps (docs/fleet.md):
// `hostkey rotate` adds next keys, which servers announce to clients after
// login so that OpenSSH clients with UpdateHostKeys learn them; after
// partners have had time to log in, `hostkey rotate --promote` makes them
// the keys served.

// hostKeyView is a host key as list prints it: never the private half.
type hostKeyView struct {
	Type        string     `json:"type"`
	State       string     `json:"state"`
	Fingerprint string     `json:"fingerprint"`
	PublicKey   string     `json:"public_key"` // authorized_keys form
	Origin      string     `json:"origin"`
	CreatedAt   time.Time  `json:"created_at"`
	ActivatedAt *time.Time `json:"activated_at"`
	RetiredAt   *time.Time `json:"retired_at"`
}

func viewHostKey(k records.HostKey) (hostKeyView, error) {
	pub, err := ssh.ParsePublicKey(k.PublicKey)
	if err != nil {
		return hostKeyView{}, fmt.Errorf("host key %s: %w", k.Fingerprint, err)
	}
	return hostKeyView{Type: k.Type, State: string(k.State), Fingerprint: k.Fingerprint,
		PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), Origin: k.Origin,
		CreatedAt: k.CreatedAt, ActivatedAt: k.ActivatedAt, RetiredAt: k.RetiredAt}, nil
}

// cmdHostKeyList: `hostkey list [--format json]`.
func cmdHostKeyList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("hostkey list", stderr)
	return runList(ctx, fs, g, args, stdout, stderr, listing[hostKeyView]{
		fetch: func(e *env) ([]hostKeyView, error) {
			keys, err := e.store.HostKeys(ctx)
			if err != nil {
				return nil, err
			}
			views := make([]hostKeyView, 0, len(keys))
			for _, k := range keys {
				v, err := viewHostKey(k)
				if err != nil {
					return nil, err
				}
				views = append(views, v)
			}
			return views, nil
		},
		header: "TYPE\tSTATE\tFINGERPRINT\tCREATED\tACTIVATED\tRETIRED\tORIGIN",
		row: func(tw io.Writer, k hostKeyView) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Type, k.State, k.Fingerprint, k.CreatedAt.UTC().Format(time.RFC3339),
				timeOrDash(k.ActivatedAt), timeOrDash(k.RetiredAt), k.Origin)
		},
	})
}

// cmdHostKeyKnownHosts: `hostkey known-hosts HOST[:PORT]` prints the
// known_hosts lines partners add: the active and next keys.
func cmdHostKeyKnownHosts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("hostkey known-hosts", stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("use: hostkey known-hosts HOST[:PORT] (the address partners connect to)")
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	keys, err := e.store.HostKeys(ctx)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return errors.New("the database holds no SSH host keys yet: the first `payintake serve` creates them, or `payintake hostkey import FILE --activate`")
	}
	for _, k := range keys {
		if k.State == records.HostKeyRetired {
			continue
		}
		pub, err := ssh.ParsePublicKey(k.PublicKey)
		if err != nil {
			return fmt.Errorf("host key %s: %w", k.Fingerprint, err)
		}
		fmt.Fprintln(stdout, knownhosts.Line([]string{knownhosts.Normalize(pos[0])}, pub))
	}
	return nil
}

// hostKeyTypeNames are the words flags name host key types by, and the
// SSH key formats they mean.
var hostKeyTypeNames = map[string]string{"ed25519": ssh.KeyAlgoED25519, "ecdsa": ssh.KeyAlgoECDSA256, "rsa": ssh.KeyAlgoRSA}

// parseHostKeyTypes reads flag's value: host key type words separated by
// commas.
func parseHostKeyTypes(flag, value string) ([]string, error) {
	var types []string
	for _, w := range strings.Split(value, ",") {
		typ, ok := hostKeyTypeNames[strings.TrimSpace(w)]
		if !ok {
			return nil, usagef("%s %q: give ed25519, ecdsa or rsa, separated by commas", flag, w)
		}
		types = append(types, typ)
	}
	return types, nil
}

// cmdHostKeyRotate: `hostkey rotate [--type T,...]` adds next keys;
// `hostkey rotate --promote` serves them.
func cmdHostKeyRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("hostkey rotate", stderr)
	types := fs.String("type", "ed25519,ecdsa,rsa", "the key types to rotate: ed25519, ecdsa, rsa, separated by commas")
	promote := fs.Bool("promote", false, "serve the next keys from now on (retiring the keys they replace), instead of adding next keys")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("use: hostkey rotate [--type ed25519,ecdsa,rsa] [--promote]")
	}
	want, err := parseHostKeyTypes("--type", *types)
	if err != nil {
		return err
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if *promote {
		if *types != fs.Lookup("type").DefValue {
			return usagef("--promote serves every next key; it takes no --type")
		}
		fps, err := e.store.PromoteHostKeys(ctx)
		if errors.Is(err, records.ErrNoNextHostKey) {
			return fmt.Errorf("%w: add next keys with `payintake hostkey rotate` first, and promote them once partners have logged in", err)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "serving from now on (every server within %s): %s\nthe keys they replace are retired; partners whose clients did not learn the new keys must update known_hosts (docs/fleet.md)\n",
			hostKeyRefresh, strings.Join(fps, ", "))
		return nil
	}
	keys, err := e.store.HostKeys(ctx)
	if err != nil {
		return err
	}
	for _, typ := range want {
		if i := slices.IndexFunc(keys, func(k records.HostKey) bool { return k.Type == typ && k.State == records.HostKeyNext }); i >= 0 {
			fmt.Fprintf(stdout, "%s: next key %s is announced already (since %s)\n", typ, keys[i].Fingerprint, keys[i].CreatedAt.UTC().Format(time.RFC3339))
			continue
		}
		k, err := sftpd.GenerateHostKey(typ)
		if err != nil {
			return err
		}
		k.State = records.HostKeyNext
		added, err := e.store.AddHostKey(ctx, k)
		if err != nil {
			return err
		}
		if !added {
			return fmt.Errorf("%s: another next key was added at the same moment; run `payintake hostkey list`", typ)
		}
		fmt.Fprintf(stdout, "%s: next key %s added\n", typ, k.Fingerprint)
	}
	fmt.Fprint(stdout, "servers announce the next keys after login (OpenSSH clients with UpdateHostKeys learn them); tell partners the new fingerprints, then run `payintake hostkey rotate --promote`\n")
	return nil
}

// cmdHostKeyImport: `hostkey import FILE [--activate]` stores a private
// host key (one partners know already, from another server, or one of your own).
func cmdHostKeyImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("hostkey import", stderr)
	activate := fs.Bool("activate", false, "serve it at once, retiring the active key of its type (for a key partners know already); without: add it as the next key, announced until promoted")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("use: hostkey import FILE [--activate]")
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return fmt.Errorf("read the host key: %w", err)
	}
	k, err := sftpd.ParseHostKey(data, "imported from "+pos[0])
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if *activate {
		if err := e.store.ActivateHostKey(ctx, k); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s key %s is served from now on (every server within %s); the key it replaces is retired\n", k.Type, k.Fingerprint, hostKeyRefresh)
		return nil
	}
	k.State = records.HostKeyNext
	added, err := e.store.AddHostKey(ctx, k)
	if err != nil {
		return err
	}
	if !added {
		keys, err := e.store.HostKeys(ctx)
		if err != nil {
			return err
		}
		for _, o := range keys {
			if o.Fingerprint == k.Fingerprint {
				return fmt.Errorf("%s key %s is stored already (%s)", k.Type, k.Fingerprint, o.State)
			}
			if o.Type == k.Type && o.State == records.HostKeyNext {
				return fmt.Errorf("a next %s key is announced already (%s): promote it (`payintake hostkey rotate --promote`) first, or import with --activate", k.Type, o.Fingerprint)
			}
		}
		return fmt.Errorf("%s key %s was not stored; run `payintake hostkey list`", k.Type, k.Fingerprint)
	}
	fmt.Fprintf(stdout, "%s key %s added as the next key: announced after login; serve it with `payintake hostkey rotate --promote`\n", k.Type, k.Fingerprint)
	return nil
}
