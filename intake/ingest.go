package intake

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/payintake/payintake/records"
)

// CheckIngestName applies the file name rule of every door
// (records.CheckFileName) to the name of the file at path.
func CheckIngestName(path string) error {
	if err := records.CheckFileName(filepath.Base(path), records.MaxFileNameLen); err != nil {
		return fmt.Errorf("file name %q cannot be sent: %w; rename the file (the same rule holds for SFTP, HTTP and ingest)", filepath.Base(path), err)
	}
	return nil
}

// IngestFile receives the file at path for partner under its base name (the
// submission key, as an upload would) and processes it now. It returns the
// envelope as received (a replay or key reuse says so in its status) and the
// envelope that holds the outcome: for a replay, the original one.
func (in *Intake) IngestFile(ctx context.Context, partner, path, source string) (got, out records.Envelope, err error) {
	if err := CheckIngestName(path); err != nil {
		return got, out, err
	}
	got, err = in.Store.Receive(ctx, records.Incoming{
		PartnerID: partner, FileName: filepath.Base(path), Source: source, Path: path,
	}, nil)
	if err != nil {
		return got, out, fmt.Errorf("receive %s: %w", filepath.Base(path), err)
	}
	in.Log.InfoContext(ctx, "envelope received", "envelope", got.ID, "partner", partner,
		"file", got.FileName, "status", got.Status, "bytes", got.Size)
	// A replay shares the first envelope's result. If that one is still
	// waiting (its processor died, or is busy now), processing it here is
	// safe: Process locks the envelope and does nothing if it is done.
	if out, err = in.Store.Outcome(ctx, got); err != nil {
		return got, out, err
	}
	if out.Status == records.StatusReceived {
		id := out.ID
		out, err = in.Process(ctx, id)
		if errors.Is(err, records.ErrBusy) {
			out, err = in.Store.WaitDone(ctx, id, 50*time.Millisecond)
		}
	}
	if err == nil && out.ID == got.ID {
		got = out
	}
	return got, out, err
}
