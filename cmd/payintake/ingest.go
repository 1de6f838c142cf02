package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/records"
)

// outcomes in the order summaries print them.
var outcomes = records.Outcomes

func cmdIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("ingest", stderr)
	partner := fs.String("partner", "", "partner ID (required)")
	resultsDir := fs.String("results-dir", "", "also write each result file here as NAME.result.csv (NAME.result.csv.pgp when sealed for an OpenPGP partner)")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *partner == "" {
		return usagef("ingest needs --partner ID")
	}
	if len(files) == 0 {
		return usagef("ingest needs at least one FILE")
	}
	for _, f := range files {
		if err := intake.CheckIngestName(f); err != nil {
			return err
		}
		if st, err := os.Stat(f); err != nil {
			return fmt.Errorf("cannot read %s: %w", f, err)
		} else if st.IsDir() {
			return fmt.Errorf("%s is a folder, not a file", f)
		}
	}
	e, err := g.open(ctx, g.logger(stderr), 4)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.needPartner(ctx, *partner); err != nil {
		return err
	}
	for _, f := range files {
		got, out, err := e.intake.IngestFile(ctx, *partner, f, "cli")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, summary(got, out))
		if *resultsDir != "" {
			if err := writeResultFile(ctx, e.intake, *resultsDir, got, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// summary is the one line ingest prints per file.
func summary(got, out records.Envelope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: envelope %d %s", got.FileName, got.ID, got.Status)
	if got.Status == records.StatusRepeat {
		fmt.Fprintf(&b, " of envelope %d (nothing applied again)", got.RepeatOf)
	}
	counts := out.Counts
	if got.Status == records.StatusKeyReuse {
		counts = got.Counts
	}
	for _, o := range outcomes {
		fmt.Fprintf(&b, " %s=%d", o, counts[string(o)])
	}
	var extra []string
	for k := range counts {
		if !records.Outcome(k).Valid() {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		fmt.Fprintf(&b, " %s=%d", k, counts[k])
	}
	return b.String()
}

// writeResultFile writes the result of got (out: its outcome) as the
// partner reads it — sealed when its upload asked for that — atomically: a
// temp file in the same folder, synced, then renamed.
func writeResultFile(ctx context.Context, in *intake.Intake, dir string, got, out records.Envelope) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create results dir: %w", err)
	}
	f, err := in.ResultFile(ctx, got, out, true)
	if err != nil {
		return err
	}
	name := intake.ResultName(got.FileName)
	if f.Sealed {
		name += intake.SealedSuffix
	}
	final := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, ".result-*.tmp")
	if err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := f.WriteTo(ctx, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write result: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}
