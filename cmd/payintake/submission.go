package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/payintake/payintake/records"
)

// cmdSubmissionBytes writes a submission's file as it was received (the
// envelope's kept bytes) to stdout or --output, checked against the SHA-256
// taken when it arrived: what an auditor compares with what a partner says
// it sent.
func cmdSubmissionBytes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("submission bytes", stderr)
	output := fs.String("output", "", "write to this new file instead of stdout (an existing file is not overwritten)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("submission bytes takes one submission ID (the envelope number `ingest` prints, the id of GET /v1/submissions)")
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id < 1 {
		return usagef("submission bytes %q: give a submission ID, a positive number", pos[0])
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	env, err := e.store.Envelope(ctx, id)
	if errors.Is(err, records.ErrNotFound) {
		return fmt.Errorf("there is no submission %d", id)
	}
	if err != nil {
		return err
	}
	switch env.Status {
	case records.StatusIncomplete:
		return fmt.Errorf("submission %d (%s, %q) is an upload cut off after %d bytes: it was never received whole, and none of it is kept", id, env.PartnerID, env.FileName, env.Size)
	case records.StatusRepeat:
		// A repeat keeps no bytes of its own: its file is the first one's
		// (for OpenPGP, the same payroll, maybe encrypted otherwise).
		fmt.Fprintf(stderr, "submission %d is a repeat of submission %d (the same payroll under the same key) and keeps no bytes of its own: writing those of %d\n", id, env.RepeatOf, env.RepeatOf)
		if env, err = e.store.Envelope(ctx, env.RepeatOf); err != nil {
			return err
		}
	}
	w, done := stdout, func(ok bool) error { return nil }
	if *output != "" {
		f, err := os.OpenFile(*output, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		w = f
		done = func(ok bool) error {
			err := f.Close()
			if !ok {
				_ = os.Remove(*output) // never leave a file that is not the one received
				return nil
			}
			return err
		}
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), e.store.EnvelopeBytes(ctx, env.ID))
	if err == nil && !bytes.Equal(h.Sum(nil), env.SHA256) {
		err = fmt.Errorf("the bytes kept for submission %d do not hash to the SHA-256 recorded when it arrived (%x): do not rely on them", env.ID, env.SHA256)
	}
	if cerr := done(err == nil); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "submission %d: %s, %q, from %s, received %s: %d bytes, sha256 %s (as recorded on arrival)\n",
		env.ID, env.PartnerID, env.FileName, env.Source, env.ReceivedAt.UTC().Format(time.RFC3339), n, hex.EncodeToString(env.SHA256))
	return nil
}
