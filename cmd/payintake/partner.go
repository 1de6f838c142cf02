package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("migrate", stderr)
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("migrate takes no arguments")
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	fmt.Fprintln(stdout, "migrations applied")
	return nil
}

// partnerFlags are the file conventions of a partner.
type partnerFlags struct {
	name, keys, delimiter, dateFormat, currency, pattern, mode string
	decimalComma                                               bool
}

func (pf *partnerFlags) toPartner(id string) (records.Partner, error) {
	p := records.Partner{ID: id, Name: pf.name, DecimalComma: pf.decimalComma, Mode: pf.mode}
	if !regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`).MatchString(id) {
		return p, usagef("partner ID %q must be lowercase letters, digits, '.', '_' or '-' (at most 63)", id)
	}
	switch pf.delimiter {
	case "":
	case ",", ";", "|":
		p.Delimiter = pf.delimiter
	case "tab", "\\t", "\t", "TAB":
		p.Delimiter = "\t"
	default:
		return p, usagef("--delimiter %q: use one of , ; | or tab", pf.delimiter)
	}
	if pf.dateFormat != "" {
		if _, err := normalize.ParseDateFormat(pf.dateFormat); err != nil {
			return p, usagef("--date-format %q: %v", pf.dateFormat, err)
		}
		p.DateFormat = pf.dateFormat
	}
	if pf.currency != "" {
		c := strings.ToUpper(strings.TrimSpace(pf.currency))
		if _, ok := normalize.CurrencyScale(c); !ok {
			return p, usagef("--currency %q is not an ISO 4217 currency code (e.g. USD, EUR)", pf.currency)
		}
		p.Currency = c
	}
	if pf.pattern != "" {
		if err := intake.CheckFilePattern(pf.pattern); err != nil {
			return p, usagef("--file-pattern %q: %v", pf.pattern, err)
		}
		p.FilePattern = pf.pattern
	}
	if p.Mode != records.ModeRow && p.Mode != records.ModeAllOrNothing {
		return p, usagef("--mode %q: use row or all-or-nothing", p.Mode)
	}
	return p, nil
}

func cmdPartnerAdd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner add", stderr)
	var pf partnerFlags
	fs.StringVar(&pf.name, "name", "", "display name")
	fs.StringVar(&pf.keys, "authorized-keys", "", "OpenSSH authorized_keys file with the partner's public keys")
	fs.StringVar(&pf.delimiter, "delimiter", "", "field delimiter: , ; | or tab (default: detect)")
	fs.BoolVar(&pf.decimalComma, "decimal-comma", false, "amounts use a decimal comma (1.234,50)")
	fs.StringVar(&pf.dateFormat, "date-format", "", "date format besides ISO, tokens YYYY MM DD (e.g. MM/DD/YYYY)")
	fs.StringVar(&pf.currency, "currency", "", "default currency when a row has none")
	fs.StringVar(&pf.pattern, "file-pattern", "", "Go regexp file names must match; group (?P<seq>\\d+) orders files")
	fs.StringVar(&pf.mode, "mode", records.ModeRow, "row or all-or-nothing")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("partner add takes one partner ID")
	}
	p, err := pf.toPartner(pos[0])
	if err != nil {
		return err
	}
	var keys []records.PartnerKey
	if pf.keys != "" {
		data, err := os.ReadFile(pf.keys)
		if err != nil {
			return fmt.Errorf("read --authorized-keys: %w", err)
		}
		if keys, err = intake.ParseAuthorizedKeys(p.ID, data); err != nil {
			return fmt.Errorf("--authorized-keys %s: %w", pf.keys, err)
		}
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.store.AddPartner(ctx, p); err != nil {
		return err
	}
	for _, k := range keys {
		if err := e.store.AddPartnerKey(ctx, k); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "partner %s added with %d key(s)\n", p.ID, len(keys))
	return nil
}

func cmdPartnerKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner key", stderr)
	keysFile := fs.String("authorized-keys", "", "with add: OpenSSH authorized_keys file")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 || (pos[0] != "add" && pos[0] != "revoke") {
		return usagef("use: partner key add ID --authorized-keys FILE, or partner key revoke ID FINGERPRINT")
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	id := pos[1]
	if err := e.needPartner(ctx, id); err != nil {
		return err
	}
	if pos[0] == "revoke" {
		if len(pos) != 3 {
			return usagef("partner key revoke ID FINGERPRINT")
		}
		if err := e.store.RevokePartnerKey(ctx, id, pos[2]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "key %s of partner %s revoked\n", pos[2], id)
		return nil
	}
	data, err := os.ReadFile(*keysFile)
	if err != nil {
		return fmt.Errorf("read --authorized-keys: %w", err)
	}
	keys, err := intake.ParseAuthorizedKeys(id, data)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := e.store.AddPartnerKey(ctx, k); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "key %s added to partner %s\n", k.Fingerprint, id)
	}
	return nil
}

func cmdPartnerList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner list", stderr)
	return runList(ctx, fs, g, args, stdout, stderr, listing[records.Partner]{
		fetch:  func(e *env) ([]records.Partner, error) { return e.store.Partners(ctx) },
		header: "ID\tNAME\tKEYS\tDELIMITER\tDECIMAL\tDATE FORMAT\tCURRENCY\tMODE\tFILE PATTERN",
		row: func(tw io.Writer, p records.Partner) {
			delim := p.Delimiter
			switch delim {
			case "":
				delim = "detect"
			case "\t":
				delim = "tab"
			}
			dec := "."
			if p.DecimalComma {
				dec = ","
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Name, p.Keys, delim, dec,
				orDash(p.DateFormat), orDash(p.Currency), p.Mode, orDash(p.FilePattern))
		},
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatFlag adds --format text|json to fs; checkFormat checks its value.
func formatFlag(fs *flag.FlagSet) *string { return fs.String("format", "text", "text or json") }

// checkFormat refuses a --format other than text or json.
func checkFormat(format string) error {
	if format != "text" && format != "json" {
		return usagef("--format %q: use text or json", format)
	}
	return nil
}

// newTable returns the tabwriter every table of the CLI is printed with.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// listing is what a list command prints: the items fetch reads, as a JSON
// array (empty, not null, when there are none) or as a table of header and
// one line per item from row.
type listing[T any] struct {
	check  func() error // optional: checks the command's own flags once parsed
	fetch  func(*env) ([]T, error)
	header string
	row    func(tw io.Writer, item T)
}

// runList runs a list command whose own flags are defined on fs: it adds
// --format text|json, parses args, checks the flags, opens the store and
// prints what l fetches.
func runList[T any](ctx context.Context, fs *flag.FlagSet, g *globals, args []string, stdout, stderr io.Writer, l listing[T]) error {
	format := formatFlag(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if l.check != nil {
		if err := l.check(); err != nil {
			return err
		}
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	items, err := l.fetch(e)
	if err != nil {
		return err
	}
	if *format == "json" {
		if items == nil {
			items = []T{}
		}
		return writeJSON(stdout, items)
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, l.header)
	for _, it := range items {
		l.row(tw, it)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
