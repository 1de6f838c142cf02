package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/payintake/payintake/pgp"
	"github.com/payintake/payintake/records"
)

// The platform's OpenPGP keys (docs/pgp.md): partners encrypt uploads to
// them; the newest active one signs results.

func cmdPGPKeyCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("pgp key create", stderr)
	rsa := fs.Bool("rsa", false, "RSA 4096 (primary and subkey) instead of Ed25519/Cv25519, for partners whose tools know no elliptic curves")
	uid := fs.String("user-id", "payintake", "the key's user ID, as partners' keyrings show it")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("use: pgp key create [--rsa] [--user-id NAME]")
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	// A process with the wrong secret key would seal the new key under a
	// key the servers do not have: refuse, saying so.
	if err := e.store.CheckWebhookSecrets(ctx); err != nil {
		return err
	}
	if _, err := e.store.PlatformPGPSecrets(ctx); err != nil {
		return err
	}
	kp, err := pgp.NewKeyPair(*uid, *rsa, time.Now())
	if err != nil {
		return err
	}
	err = e.store.AddPlatformPGPKey(ctx, records.PlatformPGPKey{Fingerprint: kp.Fingerprint, Algorithm: kp.Algorithm,
		PublicKey: string(kp.Public), CreatedAt: kp.Created}, kp.Secret)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "OpenPGP key %s (%s) created: it signs results from now on; older active keys still decrypt until retired\n", kp.Fingerprint, kp.Algorithm)
	fmt.Fprintln(stdout, "give partners its public key: payintake pgp key export")
	return nil
}

func cmdPGPKeyExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("pgp key export", stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("use: pgp key export [FINGERPRINT]")
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	keys, err := e.store.PlatformPGPKeys(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, k := range keys {
		if k.RetiredAt != nil || (len(pos) == 1 && !strings.EqualFold(pos[0], k.Fingerprint)) {
			continue
		}
		io.WriteString(stdout, k.PublicKey)
		n++
	}
	if n == 0 {
		if len(pos) == 1 {
			return fmt.Errorf("no active OpenPGP key %s: see payintake pgp key list", pos[0])
		}
		return errors.New("the platform has no active OpenPGP key: create one with payintake pgp key create")
	}
	return nil
}

func cmdPGPKeyList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("pgp key list", stderr)
	signer := true // the first active key (they are listed newest first)
	return runList(ctx, fs, g, args, stdout, stderr, listing[records.PlatformPGPKey]{
		fetch:  func(e *env) ([]records.PlatformPGPKey, error) { return e.store.PlatformPGPKeys(ctx) },
		header: "FINGERPRINT\tALGORITHM\tCREATED\tSTATE",
		row: func(tw io.Writer, k records.PlatformPGPKey) {
			state := "decrypts"
			switch {
			case k.RetiredAt != nil:
				state = "retired " + k.RetiredAt.UTC().Format(time.RFC3339)
			case signer:
				state, signer = "signs, decrypts", false
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Fingerprint, k.Algorithm, k.CreatedAt.UTC().Format(time.RFC3339), state)
		},
	})
}

func cmdPGPKeyRetire(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("pgp key retire", stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("use: pgp key retire FINGERPRINT")
	}
	fp := strings.ToUpper(strings.ReplaceAll(pos[0], " ", ""))
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.store.RetirePlatformPGPKey(ctx, fp); err != nil {
		if errors.Is(err, records.ErrNotFound) {
			return fmt.Errorf("no active OpenPGP key %s: see payintake pgp key list", fp)
		}
		return err
	}
	fmt.Fprintf(stdout, "OpenPGP key %s retired: files encrypted to it are refused (pgp_wrong_key) from now on\n", fp)
	return nil
}
