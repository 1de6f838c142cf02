package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	outbound "github.com/payintake/payintake/dispatch"
	"github.com/payintake/payintake/internal/egress"
)

// cmdTarget: target add|list, the payroll vendors dispatch sends to.
func cmdTarget(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	switch sub {
	case "add":
		return cmdTargetAdd(ctx, args, stdout, stderr)
	case "list":
		fs, g := newFlagSet("target list", stderr)
		return runList(ctx, fs, g, args, stdout, stderr, listing[outbound.Target]{
			fetch:  func(e *env) ([]outbound.Target, error) { return outbound.NewStore(e.store.Pool()).Targets(ctx) },
			header: "NAME\tURL\tTOKEN FILE\tRATE LIMIT\tCHUNK SIZE\tMAX ATTEMPTS\tRETRY BASE\tTIMEOUT\tLINE STATUS",
			row: func(tw io.Writer, t outbound.Target) {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%g/s\t%d\t%d\t%s\t%s\t%t\n", t.Name, t.URL, orDash(t.TokenFile), t.RateLimit,
					t.ChunkSize, t.MaxAttempts, t.RetryBase, t.Timeout, t.LineStatus)
			},
		})
	}
	return usagef("target: unknown command %q (want add or list)", sub)
}

func cmdTargetAdd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("target add", stderr)
	var t outbound.Target
	fs.StringVar(&t.URL, "url", "", "the vendor's batch endpoint, http:// or https://, no user:password@, not a link-local or cloud metadata address (required)")
	fs.StringVar(&t.TokenFile, "token-file", "", "file whose first line is the bearer token (read at each run; the token is not stored)")
	fs.Float64Var(&t.RateLimit, "rate-limit", outbound.DefaultRateLimit, "the vendor's limit in requests per second; payintake stays at 80% of it (0: no limit)")
	fs.IntVar(&t.ChunkSize, "chunk-size", 0, "lines per request (default 200; 40 with --no-line-status)")
	fs.IntVar(&t.MaxAttempts, "max-attempts", outbound.DefaultMaxAttempts, "sends of a line before it is dead-lettered (retries_exhausted)")
	fs.DurationVar(&t.RetryBase, "retry-base", outbound.DefaultRetryBase, "first retry delay; doubled each attempt, ±20% jitter")
	fs.DurationVar(&t.Timeout, "timeout", outbound.DefaultTimeout, "longest wait for one answer")
	noLineStatus := fs.Bool("no-line-status", false, "the vendor never answers 207 with per-line results (smaller chunks)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("target add takes one NAME, then --url URL")
	}
	t.Name, t.LineStatus = pos[0], !*noLineStatus
	if t.URL == "" {
		return usagef("target add %s needs --url URL", t.Name)
	}
	if t.URL, err = egress.ParseURL(t.URL); err != nil {
		return usagef("--url: %v", err)
	}
	if t.RateLimit < 0 || t.ChunkSize < 0 || t.MaxAttempts < 1 || t.RetryBase < 0 || t.Timeout <= 0 {
		return usagef("--rate-limit, --chunk-size and --retry-base cannot be negative, --max-attempts is at least 1 and --timeout more than 0")
	}
	if t.TokenFile != "" {
		if t.TokenFile, err = filepath.Abs(t.TokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		if _, err := t.Token(); err != nil {
			return err
		}
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := outbound.NewStore(e.store.Pool()).AddTarget(ctx, t); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "target %s added: %s (give it to a partner with `payintake partner set ID --target %s`)\n", t.Name, t.URL, t.Name)
	return nil
}

// cmdDispatch: dispatch --partner --period (foreground), dispatch status, dispatch retry.
func cmdDispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "status" {
		return cmdDispatchStatus(ctx, args[1:], stdout, stderr)
	}
	retry := len(args) > 0 && args[0] == "retry"
	name := "dispatch"
	if retry {
		args, name = args[1:], "dispatch retry"
	}
	fs, g := newFlagSet(name, stderr)
	partner := fs.String("partner", "", "partner ID (required)")
	period := fs.String("period", "", "pay period (required)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("%s takes --partner ID --period PERIOD (and dispatch status takes [--partner] [--period] [--format json])", name)
	}
	if *partner == "" || *period == "" {
		return usagef("%s needs --partner ID and --period PERIOD", name)
	}
	pp := strings.ToUpper(strings.TrimSpace(*period))
	e, err := g.open(ctx, g.logger(stderr), 4)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.needPartner(ctx, *partner); err != nil {
		return err
	}
	st := outbound.NewStore(e.store.Pool())
	if retry {
		n, err := st.Retry(ctx, *partner, pp)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d dead-lettered line(s) of period %s of partner %s put back, same keys\n", n, pp, *partner)
	}
	cfg := outbound.Config{Log: g.logger(stderr)}
	var bar *progressbar.ProgressBar
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		cfg.Progress = func(r outbound.Run) {
			if bar == nil {
				bar = progressbar.NewOptions(r.Total, progressbar.OptionSetWriter(stdout),
					progressbar.OptionSetDescription(r.BatchKey()), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true))
			}
			bar.ChangeMax(r.Total)
			_ = bar.Set(r.Settled)
		}
	}
	runs, err := outbound.New(e.store.Pool(), cfg).Dispatch(ctx, *partner, pp)
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(stdout)
	}
	if errors.Is(err, outbound.ErrBusy) && retry {
		fmt.Fprintf(stdout, "period %s of partner %s is being dispatched by another process, which sends them\n", pp, *partner)
		return nil
	}
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("period %s of partner %s has nothing to dispatch: it must be locked with reason approved (records lock) and the partner need a target (partner set %s --target NAME)",
			pp, *partner, *partner)
	}
	status, err := st.Status(ctx, *partner, pp)
	if err != nil {
		return err
	}
	dead := 0
	for _, r := range status {
		fmt.Fprintf(stdout, "run %d %s: %s, %d line(s): %d succeeded, %d pending, %d dead-lettered, %d request(s)\n",
			r.Run, r.BatchKey, r.State, r.Total, r.Succeeded, r.Pending, r.Failed, r.Attempts)
		dead += len(r.DeadLetters)
	}
	if dead > 0 {
		return fmt.Errorf("%d line(s) dead-lettered: see `payintake dispatch status --partner %s --period %s`, fix the cause and run `payintake dispatch retry --partner %s --period %s`",
			dead, *partner, pp, *partner, pp)
	}
	return nil
}

func cmdDispatchStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("dispatch status", stderr)
	partner := fs.String("partner", "", "only this partner")
	period := fs.String("period", "", "only this pay period")
	return runList(ctx, fs, g, args, stdout, stderr, listing[outbound.RunStatus]{
		fetch: func(e *env) ([]outbound.RunStatus, error) {
			return outbound.NewStore(e.store.Pool()).Status(ctx, *partner, strings.ToUpper(strings.TrimSpace(*period)))
		},
		header: "PARTNER\tPERIOD\tRUN\tBATCH KEY\tSTATE\tTOTAL\tSUCCEEDED\tPENDING\tFAILED\tATTEMPTS\tDEAD LETTERS",
		row: func(tw io.Writer, r outbound.RunStatus) {
			var dl []string
			for _, d := range r.DeadLetters {
				dl = append(dl, fmt.Sprintf("%s %s v%d: %d %s", d.EmployeeRef, d.Component, d.Version, d.Status, oneLine(d.Detail)))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Partner, r.PayPeriod, r.Run, r.BatchKey, r.State,
				r.Total, r.Succeeded, r.Pending, r.Failed, r.Attempts, orDash(strings.Join(dl, "; ")))
		},
	})
}
