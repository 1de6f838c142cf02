package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/internal/egress"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgp"
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

// partnerSetting is one setting of a partner, a flag of both partner add
// and partner set. check reads the flag's value into the update (or says
// why it is refused, as a usage error). A new setting is one entry in
// partnerSettings and one field of records.PartnerUpdate.
type partnerSetting struct {
	flag, usage string
	isBool      bool
	check       func(v string, u *records.PartnerUpdate) error
}

// partnerSettings lists the settings in the order -h shows them.
func partnerSettings() []partnerSetting {
	return []partnerSetting{
		{flag: "name", usage: "display name", check: func(v string, u *records.PartnerUpdate) error {
			u.Name = &v
			return nil
		}},
		{flag: "authorized-keys", usage: "OpenSSH authorized_keys file: the partner's SSH keys become exactly these (see also partner key add|revoke)",
			check: func(v string, u *records.PartnerUpdate) error {
				u.AuthorizedKeys = &[]records.PartnerKey{} // read once the partner ID is known
				return nil
			}},
		{flag: "delimiter", usage: "field delimiter: , ; | or tab (empty: detect)", check: func(v string, u *records.PartnerUpdate) error {
			switch v {
			case "", ",", ";", "|":
			case "tab", "\\t", "\t", "TAB":
				v = "\t"
			default:
				return usagef("--delimiter %q: use one of , ; | or tab", v)
			}
			u.Delimiter = &v
			return nil
		}},
		{flag: "decimal-comma", isBool: true, usage: "amounts use a decimal comma (1.234,50); --decimal-comma=false for a point",
			check: func(v string, u *records.PartnerUpdate) error {
				b := v == "true"
				u.DecimalComma = &b
				return nil
			}},
		{flag: "date-format", usage: "date format besides ISO, tokens YYYY MM DD (e.g. MM/DD/YYYY; empty: ISO only)",
			check: func(v string, u *records.PartnerUpdate) error {
				if v != "" {
					if _, err := normalize.ParseDateFormat(v); err != nil {
						return usagef("--date-format %q: %v", v, err)
					}
				}
				u.DateFormat = &v
				return nil
			}},
		{flag: "currency", usage: "default currency when a row has none (empty: none)", check: func(v string, u *records.PartnerUpdate) error {
			c := strings.ToUpper(strings.TrimSpace(v))
			if _, ok := normalize.CurrencyScale(c); c != "" && !ok {
				return usagef("--currency %q is not an ISO 4217 currency code (e.g. USD, EUR)", v)
			}
			u.Currency = &c
			return nil
		}},
		{flag: "file-pattern", usage: "Go regexp file names must match; group (?P<seq>\\d+) orders files (empty: any name)",
			check: func(v string, u *records.PartnerUpdate) error {
				if v != "" {
					if err := intake.CheckFilePattern(v); err != nil {
						return usagef("--file-pattern %q: %v", v, err)
					}
				}
				u.FilePattern = &v
				return nil
			}},
		{flag: "mode", usage: "row or all-or-nothing (default row)", check: func(v string, u *records.PartnerUpdate) error {
			if v != records.ModeRow && v != records.ModeAllOrNothing {
				return usagef("--mode %q: use row or all-or-nothing", v)
			}
			u.Mode = &v
			return nil
		}},
		{flag: "unknown-employee", usage: "a row whose employee_ref has no mapping: create, reject or hold (default create)",
			check: func(v string, u *records.PartnerUpdate) error {
				if v != records.UnknownCreate && v != records.UnknownReject && v != records.UnknownHold {
					return usagef("--unknown-employee %q: use create, reject or hold", v)
				}
				u.UnknownEmployee = &v
				return nil
			}},
		{flag: "notify-url", usage: "http(s) URL that result notifications are POSTed to, signed with the partner's webhook secret (no user:password@, not a link-local or cloud metadata address); empty: none",
			check: func(v string, u *records.PartnerUpdate) error {
				if v != "" {
					n, err := egress.ParseURL(v)
					if err != nil {
						return usagef("--notify-url: %v", err)
					}
					v = n
				}
				u.NotifyURL = &v
				return nil
			}},
		{flag: "pgp", usage: "OpenPGP: off (files read as they come), accept (OpenPGP files decrypted and verified, plain ones read) or require (only files encrypted to the platform key and signed by the partner's)",
			check: func(v string, u *records.PartnerUpdate) error {
				switch v {
				case records.PGPOff, records.PGPAccept, records.PGPRequire:
				default:
					return usagef("--pgp %q: use off, accept or require", v)
				}
				u.PGP = &v
				return nil
			}},
		{flag: "pgp-key", usage: "the partner's OpenPGP public key(s), as gpg --export --armor writes them: they become its current keys (results are encrypted to the first); the ones before are kept as replaced",
			check: func(v string, u *records.PartnerUpdate) error {
				u.PGPKeys = &[]records.PartnerPGPKey{} // read once the flags are checked
				return nil
			}},
		{flag: "allow-from", usage: "client addresses (IPs or CIDR ranges, comma-separated) its SFTP logins, API tokens and webhooks are accepted from; empty: anywhere",
			check: func(v string, u *records.PartnerUpdate) error {
				nets, err := clientaddr.ParsePrefixes(v)
				if err != nil {
					return usagef("--allow-from: %v", err)
				}
				if nets == nil {
					nets = []netip.Prefix{}
				}
				u.AllowFrom = &nets
				return nil
			}},
		{flag: "target", usage: "payroll vendor (a NAME of target add) that its periods locked as approved are dispatched to; empty: none",
			check: func(v string, u *records.PartnerUpdate) error {
				u.Target = &v
				return nil
			}},
	}
}

// partnerFlags defines every partner setting on fs. Once fs is parsed, the
// update holds the settings given on the command line, and only those.
type partnerFlags struct {
	fs     *flag.FlagSet
	values map[string]*string
	keys   *string
	pgpKey *string
}

func definePartnerFlags(fs *flag.FlagSet) *partnerFlags {
	pf := &partnerFlags{fs: fs, values: map[string]*string{}}
	for _, s := range partnerSettings() {
		if s.isBool {
			pf.values[s.flag] = new(string)
			fs.BoolFunc(s.flag, s.usage, func(v string) error {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("want true or false: %w", err)
				}
				*pf.values[s.flag] = strconv.FormatBool(b)
				return nil
			})
			continue
		}
		pf.values[s.flag] = fs.String(s.flag, "", s.usage)
	}
	pf.keys = pf.values["authorized-keys"]
	pf.pgpKey = pf.values["pgp-key"]
	return pf
}

// any reports whether a partner setting was given.
func (pf *partnerFlags) any() bool {
	n := 0
	pf.fs.Visit(func(f *flag.Flag) {
		if _, ok := pf.values[f.Name]; ok {
			n++
		}
	})
	return n > 0
}

// update checks the given flags and gives the change they make to partner id.
func (pf *partnerFlags) update(id string) (records.PartnerUpdate, error) {
	var u records.PartnerUpdate
	given := map[string]bool{}
	pf.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, s := range partnerSettings() {
		if !given[s.flag] {
			continue
		}
		if err := s.check(*pf.values[s.flag], &u); err != nil {
			return u, err
		}
	}
	if u.AuthorizedKeys != nil {
		data, err := os.ReadFile(*pf.keys)
		if err != nil {
			return u, fmt.Errorf("read --authorized-keys: %w", err)
		}
		keys, err := intake.ParseAuthorizedKeys(id, data)
		if err != nil {
			return u, fmt.Errorf("--authorized-keys %s: %w", *pf.keys, err)
		}
		u.AuthorizedKeys = &keys
	}
	if u.PGPKeys != nil {
		data, err := os.ReadFile(*pf.pgpKey)
		if err != nil {
			return u, fmt.Errorf("read --pgp-key: %w", err)
		}
		keys, err := pgp.ReadPublicKeys(data)
		if err != nil {
			return u, fmt.Errorf("--pgp-key %s: %w", *pf.pgpKey, err)
		}
		pk := make([]records.PartnerPGPKey, len(keys))
		for i, k := range keys {
			pk[i] = records.PartnerPGPKey{Fingerprint: k.Fingerprint, UserID: k.UserID, PublicKey: string(k.Armored)}
		}
		u.PGPKeys = &pk
	}
	return u, nil
}

func checkPartnerID(id string) error {
	if !records.ValidPartnerID(id) {
		return usagef("partner ID %q must be lowercase letters, digits, '.', '_' or '-' (at most 63)", id)
	}
	return nil
}

func cmdPartnerAdd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner add", stderr)
	pf := definePartnerFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("partner add takes one partner ID")
	}
	id := pos[0]
	if err := checkPartnerID(id); err != nil {
		return err
	}
	u, err := pf.update(id)
	if err != nil {
		return err
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.store.CreatePartner(ctx, id, u); err != nil {
		return err
	}
	n := 0
	if u.AuthorizedKeys != nil {
		n = len(*u.AuthorizedKeys)
	}
	fmt.Fprintf(stdout, "partner %s added with %d key(s)\n", id, n)
	return nil
}

// cmdPartnerSet changes the settings given as flags; the others stay.
func cmdPartnerSet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner set", stderr)
	pf := definePartnerFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("partner set takes one partner ID, then the settings to change (see partner set -h)")
	}
	id := pos[0]
	if !pf.any() {
		return usagef("partner set %s: give at least one setting to change (see partner set -h)", id)
	}
	u, err := pf.update(id)
	if err != nil {
		return err
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.store.UpdatePartner(ctx, id, u); errors.Is(err, records.ErrNotFound) {
		return fmt.Errorf("unknown partner %q: add it with `payintake partner add %s`", id, id)
	} else if err != nil {
		return err
	}
	p, err := e.store.Partner(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "partner %s changed: %s\n", id, describePartner(p))
	if p.NotifyURL != "" {
		if keys, err := e.store.WebhookSecrets(ctx, id); err == nil && len(keys) == 0 {
			fmt.Fprintf(stderr, "warning: notifications are signed with the partner's webhook secret and %s has none: "+
				"run `payintake partner webhook-secret %s`, or its notifications fail\n", id, id)
		}
	}
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
		header: "ID\tNAME\tKEYS\tDELIMITER\tDECIMAL\tDATE FORMAT\tCURRENCY\tMODE\tUNKNOWN EMPLOYEE\tTARGET\tNOTIFY URL\tFILE PATTERN\tALLOW FROM",
		row: func(tw io.Writer, p records.Partner) {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Name, p.Keys, delimName(p.Delimiter), decimalMark(p.DecimalComma),
				orDash(p.DateFormat), orDash(p.Currency), p.Mode, p.UnknownEmployee, orDash(p.Target), orDash(p.NotifyURL), orDash(p.FilePattern), allowFrom(p.AllowFrom))
		},
	})
}

func delimName(d string) string {
	switch d {
	case "":
		return "detect"
	case "\t":
		return "tab"
	}
	return d
}

func decimalMark(comma bool) string {
	if comma {
		return ","
	}
	return "."
}

// describePartner is a partner's settings on one line, as partner set prints them.
func describePartner(p records.Partner) string {
	return fmt.Sprintf("name=%q keys=%d delimiter=%s decimal=%s date-format=%s currency=%s mode=%s unknown-employee=%s target=%s notify-url=%s file-pattern=%s allow-from=%s pgp=%s",
		p.Name, p.Keys, delimName(p.Delimiter), decimalMark(p.DecimalComma), orDash(p.DateFormat), orDash(p.Currency),
		p.Mode, p.UnknownEmployee, orDash(p.Target), orDash(p.NotifyURL), orDash(p.FilePattern), allowFrom(p.AllowFrom), p.PGP)
}

// allowFrom shows a partner's allowlist as --allow-from takes it ("-": anywhere).
func allowFrom(nets []netip.Prefix) string {
	s := make([]string, len(nets))
	for i, n := range nets {
		s[i] = n.String()
	}
	return orDash(strings.Join(s, ","))
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
