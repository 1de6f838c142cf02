// Package intake turns received files into applied records: it records each
// file as an envelope, normalises its rows (package normalize), and applies
// them through the store (package records). Every door — the CLI, the
// SFTP drop zone (intake/sftpd), the HTTP API (intake/httpapi) — goes
// through the same Intake.
package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/internal/fault"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// Intake processes envelopes for all partners.
type Intake struct {
	Store *records.Store
	// Engine applies envelopes, webhook changes and leg replays to Store.
	Engine *apply.Engine
	Log    *slog.Logger
	// Metrics, when set, counts every envelope processed here, whatever
	// the door (nil: not counted).
	Metrics *Metrics
	// MaxPlaintext bounds an OpenPGP upload's plaintext (0:
	// DefaultMaxPlaintext).
	MaxPlaintext int64

	batches chan *rowBatch // kept for the next parallel reads (rowSource); nil keeps none
}

// New returns an Intake on store.
func New(store *records.Store, log *slog.Logger) *Intake {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Intake{Store: store, Engine: apply.New(store, apply.Options{Logger: log}), Log: log,
		batches: make(chan *rowBatch, keptBatches())}
}

// Settings turns a partner's stored conventions into normaliser settings.
func Settings(p records.Partner) normalize.Settings {
	s := normalize.Settings{DecimalComma: p.DecimalComma, DateFormat: p.DateFormat, Currency: p.Currency}
	if p.Delimiter != "" {
		s.Delimiter = []rune(p.Delimiter)[0]
	}
	return s
}

// FileSettings are Settings with the partner's profile, if it has one: the
// settings a file is read with. (Webhooks and leg replays carry
// payintake's own fields and codes, so they are read with Settings.)
func FileSettings(p records.Partner) normalize.Settings {
	s := Settings(p)
	if pr := p.Profile; pr != nil {
		s.Columns, s.Components, s.UnknownComponent = pr.Columns, pr.Components, pr.UnknownComponent
		if len(pr.Decided) > 0 {
			// The codes reviewers said the meaning of, where the profile
			// says none.
			s.Components = maps.Clone(pr.Components)
			for code, c := range pr.Decided {
				if _, ok := s.Components[code]; !ok {
					s.Components[code] = c
				}
			}
		}
		s.Profile = fmt.Sprintf("partner profile %s (version %d)", p.ID, pr.Version)
		if pr.Version == 0 {
			s.Profile = fmt.Sprintf("the profile being checked for partner %s (not stored)", p.ID)
		}
	}
	return s
}

// profileAttr names in a log line the profile version env was read with;
// nothing for a partner without a profile.
func profileAttr(env records.Envelope) slog.Attr {
	if env.ProfileVersion == 0 {
		return slog.Attr{}
	}
	return slog.Int("profile_version", env.ProfileVersion)
}

// CheckFilePattern validates a partner's --file-pattern: a Go regular
// expression whose optional named group "seq" can match digits only (the
// file's sequence number).
func CheckFilePattern(pattern string) error {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("not a Go regular expression: %w", err)
	}
	if re.SubexpIndex("seq") < 0 {
		if strings.Contains(pattern, "seq") {
			return errors.New(`it mentions seq but has no sequence group: name it (?P<seq>\d+)`)
		}
		return nil
	}
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return fmt.Errorf("not a Go regular expression: %w", err)
	}
	if seq := findCapture(tree, "seq"); seq != nil && !digitsOnly(seq) {
		return errors.New(`the group (?P<seq>...) must match digits only, e.g. (?P<seq>\d+)`)
	}
	return nil
}

func findCapture(re *syntax.Regexp, name string) *syntax.Regexp {
	if re.Op == syntax.OpCapture && re.Name == name {
		return re
	}
	for _, sub := range re.Sub {
		if c := findCapture(sub, name); c != nil {
			return c
		}
	}
	return nil
}

// digitsOnly reports whether every string re matches is made of ASCII digits.
func digitsOnly(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] < '0' || re.Rune[i+1] > '9' {
				return false
			}
		}
		return len(re.Rune) > 0
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat, syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			if !digitsOnly(sub) {
				return false
			}
		}
		return true
	}
	return false
}

// FileSeq extracts the sequence number from a file name with the partner's
// pattern. It returns a *normalize.ParseError when the partner has a pattern
// and the name does not match it, or its sequence number is not a whole
// number that fits in 64 bits; seq is nil when there is no pattern or no
// seq group.
func FileSeq(pattern, name string) (*int64, error) {
	if pattern == "" {
		return nil, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("file pattern %q: %w", pattern, err)
	}
	m := re.FindStringSubmatch(name)
	if m == nil {
		return nil, &normalize.ParseError{Err: normalize.CodeFileNameMismatch, Message: fmt.Sprintf(
			"the file name %q does not match the agreed pattern %s; nothing was applied: rename the file to match the pattern and send it again", name, pattern)}
	}
	i := re.SubexpIndex("seq")
	if i < 0 || m[i] == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(m[i], 10, 64)
	if err != nil || n < 0 {
		return nil, &normalize.ParseError{Err: normalize.CodeInvalidSequence, Message: fmt.Sprintf(
			"the sequence number %q in the file name is not a whole number below 2^63; nothing was applied: number the file with digits only, as agreed", m[i])}
	}
	return &n, nil
}

// Process applies a received envelope. It is idempotent: an envelope that
// already has its outcome is returned unchanged.
func (in *Intake) Process(ctx context.Context, id int64) (records.Envelope, error) {
	return in.process(ctx, id, false)
}

// ProcessIfPartnerFree is Process, but returns records.ErrPartnerBusy at
// once (the envelope's PartnerID set) when another transaction holds the
// envelope's partner, rather than waiting for it.
func (in *Intake) ProcessIfPartnerFree(ctx context.Context, id int64) (records.Envelope, error) {
	return in.process(ctx, id, true)
}

// process opens the envelope (the engine locks it and its partner), reads
// it into a plan, and has the engine apply the plan.
func (in *Intake) process(ctx context.Context, id int64, ifPartnerFree bool) (env records.Envelope, err error) {
	fault.Point(fault.AfterReceive)
	start := time.Now()
	ctx, span := in.Store.Tracer().Start(ctx, "process", trace.WithAttributes(attribute.Int64("payintake.envelope_id", id)))
	defer func() {
		span.SetAttributes(attribute.String("payintake.status", env.Status), attribute.Bool("payintake.applied", env.Applied))
		if errors.Is(err, records.ErrBusy) || errors.Is(err, records.ErrPartnerBusy) { // another transaction works: not a failure
			span.SetAttributes(attribute.Bool("payintake.busy", true))
			span.End()
			return
		}
		records.EndSpan(span, err)
	}()
	env, err = in.apply(fault.Processing(ctx), id, ifPartnerFree)
	if err != nil {
		return env, err
	}
	fault.Point(fault.AfterCommit)
	if env.Applied {
		in.Metrics.processed(env, time.Since(start))
		in.Log.InfoContext(ctx, "envelope processed", "envelope", env.ID, "door", env.Source, "partner", env.PartnerID,
			"file", env.FileName, "status", env.Status, records.CountsAttr(env.Counts), profileAttr(env), "duration", time.Since(start))
	}
	return env, nil
}

func (in *Intake) apply(ctx context.Context, id int64, ifPartnerFree bool) (records.Envelope, error) {
	job, err := in.Engine.Open(ctx, id, ifPartnerFree)
	if err != nil {
		if job != nil {
			return job.Envelope, err // records.ErrPartnerBusy: the envelope says whose partner
		}
		return records.Envelope{}, err
	}
	defer job.Close(ctx)
	if job.Envelope.Status != records.StatusReceived {
		return job.Envelope, nil
	}
	pl, err := in.plan(ctx, job.Envelope, job.Partner, job.Body)
	var fr *normalize.ParseError
	switch {
	case errors.As(err, &fr):
		pl.Refusal = fr
	case err != nil:
		return records.Envelope{}, fmt.Errorf("process envelope %d: %w", id, err)
	}
	return job.Apply(ctx, pl)
}

func (in *Intake) plan(ctx context.Context, env records.Envelope, p records.Partner, body io.Reader) (apply.Plan, error) {
	var pl apply.Plan
	body, _, err := in.pgpPlan(ctx, &env, p, body, &pl)
	if err != nil {
		return pl, err
	}
	if IsReplayFile(env.FileName) {
		rp, err := in.replayPlan(ctx, env, p, body)
		rp.Seal = pl.Seal
		return rp, err
	}
	seq, err := FileSeq(p.FilePattern, env.FileName)
	if err != nil {
		return pl, err
	}
	pl.Seq = seq
	pl.AllOrNothing = p.Mode == records.ModeAllOrNothing
	if env.Size == 0 {
		return pl, &normalize.ParseError{Err: normalize.CodeEmptyFile, Message: "the file is empty (0 bytes), so nothing was applied: check the export and send the file again"}
	}
	r, sheet, err := openRows(env.FileName, body, p)
	if err != nil {
		return pl, err
	}
	pl.Rows = withSheet(newRowSource(r, apply.ReadOptions{}, in.batches), sheet)
	if sk, ok := body.(io.Seeker); ok {
		pl.Reread = func(o apply.ReadOptions) (apply.RowSource, error) {
			if _, err := sk.Seek(0, io.SeekStart); err != nil {
				return nil, fmt.Errorf("rewind the file: %w", err)
			}
			r, sheet, err := openRows(env.FileName, body, p)
			if err != nil {
				return nil, err
			}
			return withSheet(newRowSource(r, o, in.batches), sheet), nil
		}
	}
	return pl, nil
}
