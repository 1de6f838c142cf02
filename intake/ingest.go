package intake

import (
	"context"
	"fmt"
	"path/filepath"

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

// IngestFile submits the file at path for partner under its base name (the
// submission key, as an upload would) and waits for its outcome (Submit with
// Wait). It returns the envelope as received (a replay or key reuse says so
// in its status) and the envelope that holds the outcome: for a replay, the
// original one.
func (in *Intake) IngestFile(ctx context.Context, partner, path, source string) (got, out records.Envelope, err error) {
	if err := CheckIngestName(path); err != nil {
		return got, out, err
	}
	res, err := in.Submit(ctx, Submission{Partner: partner, Name: filepath.Base(path), Path: path, Source: source}, &SubmitOpts{Wait: true})
	return res.Received, res.Outcome, err
}
