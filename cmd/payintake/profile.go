package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/profile"
	"github.com/payintake/payintake/records"
)

// readProfile reads and checks a profile file: its YAML (package profile)
// and the partner settings it gives, by the rules of partner set's flags.
func readProfile(path string) (data []byte, pr records.PartnerProfile, u records.PartnerUpdate, err error) {
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, pr, u, fmt.Errorf("read the profile: %w", err)
	}
	p, err := profile.Parse(data)
	if err != nil {
		return nil, pr, u, fmt.Errorf("%s: %w", path, err)
	}
	settings := map[string]partnerSetting{}
	for _, s := range partnerSettings() {
		settings[s.flag] = s
	}
	for _, s := range p.Settings {
		ps, ok := settings[strings.ReplaceAll(s.Key, "_", "-")]
		if !ok { // profile.SettingKeys names a setting partner set has no flag for
			return nil, pr, u, fmt.Errorf("%s: profile line %d: %s is not a partner setting", path, s.Line, s.Key)
		}
		v := s.Value
		if ps.isBool {
			b, perr := strconv.ParseBool(v)
			if perr != nil {
				return nil, pr, u, fmt.Errorf("%s: profile line %d: %s takes true or false, not %q", path, s.Line, s.Key, v)
			}
			v = strconv.FormatBool(b)
		}
		if err := ps.check(v, &u); err != nil {
			return nil, pr, u, fmt.Errorf("%s: profile line %d: %s: %s", path, s.Line, s.Key, strings.TrimPrefix(err.Error(), "--"+ps.flag+" "))
		}
	}
	pr = records.PartnerProfile{Columns: p.Columns, Components: p.Components, UnknownComponent: p.UnknownComponent,
		Sheet: p.Sheet, Results: p.Results}
	return data, pr, u, nil
}

// cmdPartnerProfileSet stores a new version of a partner's profile.
func cmdPartnerProfileSet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner profile set", stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("partner profile set takes a partner ID and a profile file (YAML)")
	}
	id := pos[0]
	data, pr, u, err := readProfile(pos[1])
	if err != nil {
		return err
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	who := envOr("USER", "operator")
	stored, err := e.store.SetPartnerProfile(ctx, id, string(data), pr, u, who, records.ViaCLI)
	if err != nil {
		return partnerErr(id, err)
	}
	fmt.Fprintf(stdout, "partner %s: profile version %d set by %s; its next file is read with it\n", id, stored.Version, who)
	return nil
}

// cmdPartnerProfileShow prints a partner's profile as it was set, after a
// comment saying which version, who and when; --history lists every version.
func cmdPartnerProfileShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner profile show", stderr)
	version := fs.Int("version", 0, "the version to show (0: the latest)")
	history := fs.Bool("history", false, "list every version: who set it and when")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("partner profile show takes one partner ID")
	}
	id := pos[0]
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.needPartner(ctx, id); err != nil {
		return err
	}
	if *history {
		prs, err := e.store.PartnerProfiles(ctx, id)
		if err != nil {
			return err
		}
		tw := newTable(stdout)
		fmt.Fprintln(tw, "VERSION\tSET BY\tSET AT")
		for _, p := range prs {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", p.Version, p.SetBy, p.SetAt.UTC().Format(profileTime))
		}
		return tw.Flush()
	}
	pr, yaml, err := e.store.PartnerProfile(ctx, id, *version)
	if errors.Is(err, records.ErrNotFound) {
		return fmt.Errorf("%w: set one with `payintake partner profile set %s FILE`", err, id)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# partner %s, profile version %d, set by %s at %s\n", id, pr.Version, pr.SetBy, pr.SetAt.UTC().Format(profileTime))
	if _, err = io.WriteString(stdout, yaml); err != nil {
		return err
	}
	// What reviewers said codes mean: read with the profile where it
	// maps none (as comments, so the output can be set again as it is).
	cs, err := e.store.ComponentCodes(ctx, id)
	if err != nil || len(cs) == 0 {
		return err
	}
	if !strings.HasSuffix(yaml, "\n") {
		fmt.Fprintln(stdout)
	}
	fmt.Fprintln(stdout, "# codes reviewers gave a component, read as it where components: maps them not:")
	for _, c := range cs {
		fmt.Fprintf(stdout, "#   %s: %s  (exception %d, approved by %s at %s)\n", c.Code, c.Component, c.ExceptionID, c.DecidedBy, c.DecidedAt.UTC().Format(profileTime))
	}
	return nil
}

// cmdPartnerProfileCheck previews a sample file as the partner's upload
// would be read: the columns found, each row's values and the outcome it
// would get today. Nothing is applied or stored.
func cmdPartnerProfileCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner profile check", stderr)
	profileFile := fs.String("profile", "", "a profile file to check the sample with instead of the stored one (not stored)")
	format := formatFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("partner profile check takes a partner ID and a sample file")
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	id := pos[0]
	var pr records.PartnerProfile
	var u records.PartnerUpdate
	if *profileFile != "" {
		if _, pr, u, err = readProfile(*profileFile); err != nil {
			return err
		}
	}
	f, err := os.Open(pos[1])
	if err != nil {
		return fmt.Errorf("read the sample: %w", err)
	}
	defer f.Close()
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	p, err := e.store.Partner(ctx, id)
	if err != nil {
		return partnerErr(id, err)
	}
	if *profileFile != "" {
		p = u.Apply(p)
		if p.Profile != nil { // what reviewers said codes mean holds for any profile
			pr.Decided = p.Profile.Decided
		}
		p.Profile = &pr // version 0: not stored
	}
	pv, err := e.intake.PreviewFile(ctx, p, filepath.Base(pos[1]), f)
	var pe *normalize.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("the file would be refused whole (%s): %s", pe.Err, pe.Message)
	}
	if err != nil {
		return err
	}
	if *format == "json" {
		return writeJSON(stdout, pv)
	}
	return writePreview(stdout, pv)
}

// profileTime is how profile versions' times are shown.
const profileTime = "2006-01-02 15:04:05Z"

func writePreview(w io.Writer, pv intake.Preview) error {
	which := pv.Profile
	if which == "" {
		which = "no profile"
	}
	fmt.Fprintf(w, "partner %s, read with %s; nothing was applied\n\ncolumns:\n", pv.Partner, which)
	tw := newTable(w)
	for _, c := range pv.Columns {
		fmt.Fprintf(tw, "  %s\t← column %d %q\n", c.Field, c.Column, c.Header)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "LINE\tROW\tOUTCOME\tCODE\t"+strings.ToUpper(strings.Join(normalize.FieldNames, "\t"))+"\tMESSAGE")
	for _, r := range pv.Rows {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s", r.Line, r.Row, r.Outcome, orDash(r.Code))
		for _, f := range normalize.FieldNames {
			fmt.Fprintf(tw, "\t%s", orDash(r.Values[f]))
		}
		fmt.Fprintf(tw, "\t%s\n", r.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var counts []string
	for _, o := range records.Outcomes {
		if n := pv.Counts[string(o)]; n > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", o, n))
		}
	}
	_, err := fmt.Fprintf(w, "\n%d rows: %s\n", len(pv.Rows), strings.Join(counts, ", "))
	return err
}
