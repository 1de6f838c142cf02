package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/payintake/payintake/records"
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
	if _, err := e.store.Partner(ctx, *partner); err != nil {
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
	format := fs.String("format", "text", "text or json")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	switch f.Status {
	case "", "open", "approved", "rejected", "superseded":
	default:
		return usagef("--status %q: use open, approved, rejected or superseded", f.Status)
	}
	if *format != "text" && *format != "json" {
		return usagef("--format %q: use text or json", *format)
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	xs, err := e.store.Exceptions(ctx, f)
	if err != nil {
		return err
	}
	if *format == "json" {
		if xs == nil {
			xs = []records.Exception{}
		}
		return writeJSON(stdout, xs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tCODE\tPARTNER\tEMPLOYEE\tPERIOD\tCOMPONENT\tCURRENT\tPROPOSED\tFILE:LINE")
	for _, x := range xs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s:%d\n", x.ID, x.Status, x.Code, x.PartnerID,
			x.EmployeeRef, x.PayPeriod, x.Component, money(x.Current), money(x.Proposed), x.File, x.Line)
	}
	return tw.Flush()
}

func money(m map[string]string) string {
	if m == nil {
		return "-"
	}
	return m["amount"] + " " + m["currency"]
}
