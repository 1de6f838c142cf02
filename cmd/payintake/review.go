package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/review"
)

func cmdRecordsLock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("records lock", stderr)
	partner := fs.String("partner", "", "partner ID (required)")
	period := fs.String("period", "", "pay period to lock (required)")
	reason := fs.String("reason", records.LockApproved, "approved or paid")
	by := fs.String("by", envOr("USER", "operator"), "who locks it (kept for audit)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("records lock takes no arguments besides flags")
	}
	if *partner == "" || *period == "" {
		return usagef("records lock needs --partner ID and --period PERIOD")
	}
	if *reason != records.LockApproved && *reason != records.LockPaid {
		return usagef("--reason %q: use approved or paid", *reason)
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.needPartner(ctx, *partner); err != nil {
		return err
	}
	n, err := e.store.LockPeriod(ctx, *partner, *period, *reason, *by)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "period %s of partner %s locked (%s): %d record(s) locked\n",
		strings.ToUpper(strings.TrimSpace(*period)), *partner, *reason, n)
	return nil
}

func cmdReviewList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("review list", stderr)
	var f records.ExceptionFilter
	fs.StringVar(&f.Partner, "partner", "", "only this partner")
	fs.StringVar(&f.Status, "status", "", "open, approved, rejected or superseded")
	fs.StringVar(&f.Period, "period", "", "only this pay period")
	return runList(ctx, fs, g, args, stdout, stderr, listing[records.Exception]{
		check: func() error {
			switch f.Status {
			case "", records.ExceptionOpen, records.ExceptionApproved, records.ExceptionRejected, records.ExceptionSuperseded:
				return nil
			}
			return usagef("--status %q: use open, approved, rejected or superseded", f.Status)
		},
		fetch:  func(e *env) ([]records.Exception, error) { return e.store.Exceptions(ctx, f) },
		header: "ID\tSTATUS\tCODE\tPARTNER\tEMPLOYEE\tEMPLOYEE_ID\tPERIOD\tCOMPONENT\tCURRENT\tPROPOSED\tFILE:LINE",
		row: func(tw io.Writer, x records.Exception) {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s:%d\n", x.ID, x.Status, x.Code, x.PartnerID,
				x.EmployeeRef, x.EmployeeID, x.PayPeriod, x.Component, money(x.Current), money(x.Proposed), x.File, x.Line)
		},
	})
}

func money(m map[string]string) string {
	if m == nil {
		return "-"
	}
	return m["amount"] + " " + m["currency"]
}

func exceptionID(cmd string, pos []string) (int64, error) {
	if len(pos) != 1 {
		return 0, usagef("%s takes one EXCEPTION_ID (see `payintake review list`)", cmd)
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("%s: %q is not an exception id (a whole number, see `payintake review list`)", cmd, pos[0])
	}
	return id, nil
}

func cmdReviewShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("review show", stderr)
	format := formatFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	id, err := exceptionID("review show", pos)
	if err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	d, err := e.store.ExceptionDetail(ctx, id)
	if err != nil {
		return err
	}
	if *format == "json" {
		return writeJSON(stdout, d)
	}
	fmt.Fprintf(stdout, "exception %d: %s (%s)\n", d.ID, d.Status, d.Code)
	fmt.Fprintf(stdout, "partner %s, employee %s (employee_id %s), period %s, component %s\n", d.PartnerID, d.EmployeeRef, d.EmployeeID, d.PayPeriod, d.Component)
	if d.Code == normalize.CodeUnknownComponent && d.Status == records.ExceptionOpen {
		fmt.Fprintf(stdout, "component code %s has no mapping in the partner's profile: approve with --as-component COMPONENT (what the code means), or reject\n", d.PartnerCode)
	} else if d.PartnerCode != "" && d.PartnerCode != d.Component {
		fmt.Fprintf(stdout, "sent with component code %s, given component %s by a reviewer\n", d.PartnerCode, d.Component)
	}
	fmt.Fprintf(stdout, "from %s line %d (envelope %d), held %s\n", d.File, d.Line, d.EnvelopeID, d.CreatedAt.UTC().Format(time.RFC3339))
	if d.DecidedAt != nil {
		fmt.Fprintf(stdout, "decided by %s at %s", orDash(d.DecidedBy), d.DecidedAt.UTC().Format(time.RFC3339))
		if d.Note != "" {
			fmt.Fprintf(stdout, ": %s", d.Note)
		}
		fmt.Fprintln(stdout)
	}
	if d.SupersededBy != 0 {
		fmt.Fprintf(stdout, "superseded by exception %d\n", d.SupersededBy)
	}
	if d.Stale != "" {
		fmt.Fprintf(stdout, "warning: %s\n", d.Stale)
	}
	fmt.Fprintln(stdout)
	tw := newTable(stdout)
	fmt.Fprintln(tw, "FIELD\tLOCKED\tPROPOSED\t")
	for _, f := range normalize.FieldNames {
		cur := "-"
		if d.Current != nil {
			cur = orDash(d.Current[f])
		}
		mark := ""
		if slices.Contains(d.Differing, f) {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f, cur, orDash(d.Proposed[f]), mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.History) > 0 {
		fmt.Fprintln(stdout, "\nrecord history:")
		tw = newTable(stdout)
		fmt.Fprintln(tw, "VERSION\tAMOUNT\tCURRENCY\tFROM\tWRITTEN\tREPLACED BY")
		for _, v := range d.History {
			from := orDash(v.File)
			if v.Line != 0 {
				from = fmt.Sprintf("%s:%d", v.File, v.Line)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", v.Version, v.Amount, v.Currency, from,
				v.WrittenAt.UTC().Format(time.RFC3339), orDash(v.ReplacedBy))
		}
		return tw.Flush()
	}
	return nil
}

// bulkFilterFlags are the filter of a bulk decision, as flags.
func bulkFilterFlags(fs *flag.FlagSet, f *records.ExceptionFilter) {
	fs.StringVar(&f.Partner, "partner", "", "decide every open exception of this partner matching the filters below (instead of one EXCEPTION_ID)")
	fs.StringVar(&f.Period, "period", "", "only this pay period")
	fs.StringVar(&f.File, "file", "", "only exceptions held from this submitted file name")
	fs.Func("code", "only this code: "+normalize.ExceptionCodesText(), func(s string) error {
		f.Code = normalize.Code(s)
		return nil
	})
	fs.StringVar(&f.Component, "component", "", "only this pay component")
	fs.StringVar(&f.Employee, "employee", "", "only employee refs starting with this, or this employee id")
	fs.StringVar(&f.MinChange, "min-change", "", "only amount changes of at least this size (either sign)")
	fs.StringVar(&f.MaxChange, "max-change", "", "only amount changes of at most this size (either sign)")
}

func cmdReviewDecide(ctx context.Context, approve bool, args []string, stdout, stderr io.Writer) error {
	name := "review reject"
	if approve {
		name = "review approve"
	}
	fs, g := newFlagSet(name, stderr)
	reviewer := fs.String("reviewer", "", "who decides (required; kept with the decision)")
	note := fs.String("note", "", "why (kept, and shared with the partner in the review report)")
	var as *string
	if approve {
		as = fs.String("as-component", "", "approve a row held for its component code (unknown_component) as this component: the component the partner's code means (required there); later files read the code as it")
	} else {
		as = new(string)
	}
	var f records.ExceptionFilter
	bulkFilterFlags(fs, &f)
	dryRun := fs.Bool("dry-run", false, "with --partner: print how many exceptions match and the total amount change, decide nothing")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	bulk := len(pos) == 0 && f.Partner != ""
	var id int64
	if !bulk {
		if filtered(fs) || *dryRun {
			if len(pos) > 0 {
				return usagef("%s takes either one EXCEPTION_ID or filters with --partner ID, not both", name)
			}
			return usagef("%s: the filters decide every matching open exception of one partner: add --partner ID", name)
		}
		if id, err = exceptionID(name, pos); err != nil {
			return err
		}
	}
	if err := f.Check(); err != nil {
		return usagef("%s: %v", name, err)
	}
	if strings.TrimSpace(*reviewer) == "" {
		return usagef("%s needs --reviewer NAME", name)
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	// A reviewer account of that name keeps its partner scope on the CLI too.
	var scope []string
	if rv, _, err := e.store.ReviewerByName(ctx, *reviewer); err == nil {
		scope = rv.Partners
	} else if !errors.Is(err, records.ErrNotFound) {
		return err
	} else if err := notDisabled(ctx, e, *reviewer); err != nil {
		return err
	}
	if bulk {
		if err := e.needPartner(ctx, f.Partner); err != nil {
			return err
		}
		return reviewDecideAll(ctx, e, records.BulkDecision{Filter: f, Approve: approve, Reviewer: *reviewer,
			Note: *note, Via: records.ViaCLI, Partners: scope, AsComponent: *as}, *dryRun, stdout)
	}
	x, err := e.store.Decide(ctx, records.Decision{ExceptionID: id, Approve: approve, Reviewer: *reviewer,
		Note: *note, Via: records.ViaCLI, Partners: scope, AsComponent: *as})
	if err != nil {
		return err
	}
	if x.Status == records.ExceptionOpen {
		// Given its component, the row met what holds a row (a locked
		// record, a closed period, an employee not onboarded).
		fmt.Fprintf(stdout, "exception %d: component code %s is %s; the row is held again (%s) for a reviewer\n", x.ID, x.PartnerCode, x.Component, x.Code)
		return nil
	}
	fmt.Fprintf(stdout, "exception %d %s by %s\n", x.ID, x.Status, x.DecidedBy)
	return nil
}

// notDisabled refuses a decision under the name of a disabled reviewer account.
func notDisabled(ctx context.Context, e *env, name string) error {
	rs, err := e.store.Reviewers(ctx)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Name == name && r.Disabled {
			return fmt.Errorf("reviewer %s is disabled and cannot decide; `payintake reviewer enable %s` enables the account again", name, name)
		}
	}
	return nil
}

// filtered reports whether any bulk filter flag was given.
func filtered(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "partner", "period", "file", "code", "component", "employee", "min-change", "max-change":
			set = true
		}
	})
	return set
}

// reviewDecideAll prints what a bulk decision would do (dryRun) or does it,
// listing each exception it had to leave open; some left open is a failure.
func reviewDecideAll(ctx context.Context, e *env, b records.BulkDecision, dryRun bool, stdout io.Writer) error {
	sum, err := e.store.Summarize(ctx, b)
	if err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintf(stdout, "dry run: %s; nothing decided\n", sum)
		return nil
	}
	res, err := e.store.DecideAll(ctx, b)
	for _, r := range res.Refused {
		fmt.Fprintf(stdout, "exception %d left open (%s): %s\n", r.ExceptionID, r.Reason, r.Detail)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d exception(s) %s by %s\n", res.Decided, res.Status, strings.TrimSpace(b.Reviewer))
	if len(res.Refused) > 0 {
		return fmt.Errorf("%d matching exception(s) could not be %s and are listed above; decide them one by one (`payintake review show ID`)", len(res.Refused), res.Status)
	}
	return nil
}

func cmdRecordsUnlock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("records unlock", stderr)
	partner := fs.String("partner", "", "partner ID (required)")
	period := fs.String("period", "", "pay period to unlock (required)")
	by := fs.String("by", "", "who authorised the correction (required, kept for audit)")
	reason := fs.String("reason", "", "why the period is reopened (required, kept for audit)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("records unlock takes no arguments besides flags")
	}
	if *partner == "" || *period == "" || strings.TrimSpace(*by) == "" || strings.TrimSpace(*reason) == "" {
		return usagef("records unlock needs --partner ID --period PERIOD --by NAME --reason TEXT")
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.needPartner(ctx, *partner); err != nil {
		return err
	}
	n, err := e.store.UnlockPeriod(ctx, *partner, *period, *by, *reason)
	if errors.Is(err, records.ErrNotLocked) {
		return fmt.Errorf("period %s of partner %s is not locked, so there is nothing to unlock", strings.ToUpper(strings.TrimSpace(*period)), *partner)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "period %s of partner %s unlocked by %s: %d record(s) unlocked\n",
		strings.ToUpper(strings.TrimSpace(*period)), *partner, strings.TrimSpace(*by), n)
	return nil
}

// stdin is read by --password-stdin (a variable for tests).
var stdin io.Reader = os.Stdin

// cmdReviewerAdd creates a reviewer (or, with reset, sets a new password).
// The password is read from stdin with --password-stdin, or generated and
// printed on the last line of stdout.
func cmdReviewerAdd(ctx context.Context, args []string, stdout, stderr io.Writer, reset bool) error {
	name := "reviewer add"
	if reset {
		name = "reviewer password"
	}
	fs, g := newFlagSet(name, stderr)
	partners := fs.String("partners", "", "comma-separated partner IDs this reviewer may review (default: all)")
	fromStdin := fs.Bool("password-stdin", false, "read the password from stdin instead of generating one")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("%s takes one reviewer NAME", name)
	}
	if reset && *partners != "" {
		return usagef("reviewer password does not change partners")
	}
	var scope []string
	for p := range strings.SplitSeq(*partners, ",") {
		if p = strings.TrimSpace(p); p != "" {
			scope = append(scope, p)
		}
	}
	password, generated := "", false
	if *fromStdin {
		b, err := io.ReadAll(io.LimitReader(stdin, 4096))
		if err != nil {
			return fmt.Errorf("read the password from stdin: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
		if len(password) < 12 {
			return usagef("the password on stdin must be at least 12 characters")
		}
	} else {
		password, generated = review.NewPassword(), true
	}
	hash, err := review.HashPassword(password)
	if err != nil {
		return err
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if reset {
		err = e.store.SetReviewerPassword(ctx, pos[0], hash)
	} else {
		err = e.store.AddReviewer(ctx, pos[0], hash, scope)
	}
	if errors.Is(err, records.ErrExists) {
		return fmt.Errorf("reviewer %s already exists: set a new password with `payintake reviewer password %s`", pos[0], pos[0])
	}
	if err != nil {
		return err
	}
	who := "every partner"
	if len(scope) > 0 {
		who = "partners " + strings.Join(scope, ", ")
	}
	if reset {
		fmt.Fprintf(stdout, "reviewer %s has a new password (their sessions ended)\n", pos[0])
	} else {
		_ = e.store.Audit(ctx, records.AuditEntry{Actor: envOr("USER", "operator"), Via: records.ViaCLI, Action: "reviewer_add", Detail: pos[0] + " for " + who})
		fmt.Fprintf(stdout, "reviewer %s added for %s\n", pos[0], who)
	}
	if generated {
		fmt.Fprintln(stdout, "password (shown once):")
		fmt.Fprintln(stdout, password)
	}
	return nil
}

// cmdReviewerDisable disables a reviewer account (their sessions and API
// tokens stop working at once) or enables it again.
func cmdReviewerDisable(ctx context.Context, args []string, stdout, stderr io.Writer, disable bool) error {
	name, verb := "reviewer enable", "enabled"
	if disable {
		name, verb = "reviewer disable", "disabled"
	}
	fs, g := newFlagSet(name, stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("%s takes one reviewer NAME", name)
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	changed, err := e.store.SetReviewerDisabled(ctx, pos[0], disable)
	if errors.Is(err, records.ErrNotFound) {
		return fmt.Errorf("there is no reviewer %s: `payintake reviewer list` shows the accounts", pos[0])
	}
	if err != nil {
		return err
	}
	if !changed {
		fmt.Fprintf(stdout, "reviewer %s was already %s\n", pos[0], verb)
		return nil
	}
	action := "reviewer_" + strings.TrimSuffix(verb, "d")
	if err := e.store.Audit(ctx, records.AuditEntry{Actor: envOr("USER", "operator"), Via: records.ViaCLI, Action: action, Detail: pos[0]}); err != nil {
		return err
	}
	if disable {
		fmt.Fprintf(stdout, "reviewer %s disabled: their sessions and API tokens stopped working; `payintake reviewer enable %s` lets them log in again\n", pos[0], pos[0])
	} else {
		fmt.Fprintf(stdout, "reviewer %s enabled: they can log in again\n", pos[0])
	}
	return nil
}

func cmdReviewerList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("reviewer list", stderr)
	return runList(ctx, fs, g, args, stdout, stderr, listing[records.Reviewer]{
		fetch:  func(e *env) ([]records.Reviewer, error) { return e.store.Reviewers(ctx) },
		header: "NAME\tPARTNERS\tCREATED\tDISABLED",
		row: func(tw io.Writer, r records.Reviewer) {
			ps := "all"
			if len(r.Partners) > 0 {
				ps = strings.Join(r.Partners, ",")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", r.Name, ps, r.CreatedAt.UTC().Format(time.RFC3339), r.Disabled)
		},
	})
}

// cmdReviewerUnlock lifts the lock that failed logins put on a reviewer
// name (or, with --address, on a client address).
func cmdReviewerUnlock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("reviewer unlock", stderr)
	address := fs.String("address", "", "unlock this client IP address instead of a reviewer NAME")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	scope, key := "account", ""
	switch {
	case *address != "" && len(pos) == 0:
		scope, key = "address", *address
	case *address == "" && len(pos) == 1:
		key = pos[0]
	default:
		return usagef("reviewer unlock takes one reviewer NAME, or --address IP")
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	had, err := e.store.UnlockLogin(ctx, scope, key)
	if err != nil {
		return err
	}
	_ = e.store.Audit(ctx, records.AuditEntry{Actor: envOr("USER", "operator"), Via: records.ViaCLI, Action: "login_unlock", Detail: scope + " " + key})
	if !had {
		fmt.Fprintf(stdout, "%s %s had no failed logins: nothing to unlock\n", scope, key)
		return nil
	}
	fmt.Fprintf(stdout, "%s %s unlocked: its failed logins are forgotten\n", scope, key)
	return nil
}
