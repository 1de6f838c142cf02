package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/profile"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/workbook/workbooktest"
)

// hrExport is a payroll file as an HR system exports it: its own headers
// (a name column payintake does not read), ';' between cells, a decimal
// comma, day-first dates, its own earning codes, and an employee number
// with leading zeros.
const hrExport = "Emp No;Name;Period;Earning Code;Gross Pay;Curr;Pay Date\n" +
	"00042;Zoë Brandt;2026-11;REG;4.000,00;EUR;30.11.2026\n" +
	"00042;Zoë Brandt;2026-11;OT;312,50;EUR;30.11.2026\n" +
	"00043;Jonas Weber;2026-11;REG;3.650,00;EUR;30.11.2026\n" +
	"00043;Jonas Weber;2026-11;BON;500,00;EUR;30.11.2026\n"

const hrProfileYAML = `# Acme's HR export
columns:
  employee_ref: ["Emp No", "Employee Number"]
  pay_period: Period
  component: Earning Code
  amount: Gross Pay
  currency: Curr
  pay_date: Pay Date
components:
  REG: BASE
  OT: OVERTIME
  BON: BONUS
unknown_component: reject
delimiter: ";"
decimal_comma: true
date_format: DD.MM.YYYY
`

// dbState is what a preview must leave as it was: every table a file's
// processing writes, as one digest.
func dbState(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	err = conn.QueryRow(ctx, `SELECT concat_ws(' ',
		(SELECT count(*) FROM envelopes), (SELECT count(*) FROM employees), (SELECT count(*) FROM exceptions),
		(SELECT count(*) FROM review_audit), (SELECT count(*) FROM partner_profiles),
		(SELECT md5(coalesce(string_agg(concat_ws('|', id, version, content_hash, updated_at), ',' ORDER BY id), '')) FROM records))`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPartnerProfileCLI onboards a partner from its HR export: the profile
// is checked on a sample (nothing applied), set, shown with its version,
// the export goes through, and a new profile version that maps the same
// values leaves every record unchanged.
func TestPartnerProfileCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	c.ok("partner", "add", "acme", "--name", "Acme")
	sample := c.file("acme-export.csv", hrExport)
	prof := c.file("acme.yaml", hrProfileYAML)

	// A profile with a mistake is refused by its line.
	bad := c.file("bad.yaml", "columns:\n  amount: Gross Pay\n  rate: gross_pay\n")
	if code, _, stderr := c.run("partner", "profile", "set", "acme", bad); code == 0 || !strings.Contains(stderr, "profile line 3") || !strings.Contains(stderr, "mapped to both amount") {
		t.Errorf("a header mapped twice: exit %d, %q", code, stderr)
	}
	badSetting := c.file("bad-setting.yaml", "components:\n  REG: BASE\nmode: sometimes\n")
	if code, _, stderr := c.run("partner", "profile", "set", "acme", badSetting); code == 0 || !strings.Contains(stderr, "profile line 3: mode") {
		t.Errorf("a bad setting: exit %d, %q", code, stderr)
	}

	// The preview with the profile not yet stored applies nothing.
	before := dbState(t, c.url)
	var pv struct {
		Columns []struct {
			Field, Header string
			Column        int
		}
		Rows []struct {
			Line          int
			Values        map[string]string
			Outcome, Code string
		}
	}
	if err := json.Unmarshal([]byte(c.ok("partner", "profile", "check", "acme", sample, "--profile", prof, "--format", "json")), &pv); err != nil {
		t.Fatal(err)
	}
	if after := dbState(t, c.url); after != before {
		t.Fatalf("the preview changed the database: %s → %s", before, after)
	}
	if len(pv.Columns) != 6 || pv.Columns[0].Field != "employee_ref" || pv.Columns[0].Header != "Emp No" || pv.Columns[3].Header != "Gross Pay" || pv.Columns[3].Column != 5 {
		t.Errorf("columns = %+v", pv.Columns)
	}
	if len(pv.Rows) != 4 {
		t.Fatalf("rows = %+v", pv.Rows)
	}
	r := pv.Rows[1]
	if r.Line != 3 || r.Outcome != "created" || r.Values["employee_ref"] != "00042" || r.Values["component"] != "OVERTIME (OT)" ||
		r.Values["amount"] != "312.50" || r.Values["pay_date"] != "2026-11-30" {
		t.Errorf("row 2 = %+v", r)
	}

	out := c.ok("partner", "profile", "set", "acme", prof)
	if !strings.Contains(out, "profile version 1") {
		t.Errorf("set: %q", out)
	}
	shown := c.ok("partner", "profile", "show", "acme")
	if !strings.HasPrefix(shown, "# partner acme, profile version 1, set by ") || !strings.HasSuffix(shown, hrProfileYAML) {
		t.Errorf("show: %q", shown)
	}
	out = c.ok("ingest", "--partner", "acme", sample)
	if !strings.Contains(out, "created=4 ") || !strings.Contains(out, "rejected=0") {
		t.Fatalf("ingest: %q", out)
	}

	// A code the profile lacks: the preview says it would be rejected, and
	// why, naming the code and the profile.
	xmas := c.file("xmas.csv", "Emp No;Period;Earning Code;Gross Pay;Curr\n00042;2026-11;XMAS;100,00;EUR\n00042;2026-11;REG;4.100,00;EUR\n")
	text := c.ok("partner", "profile", "check", "acme", xmas)
	for _, want := range []string{"read with partner profile acme (version 1); nothing was applied", "rejected", "unknown_component",
		`component code "XMAS" has no mapping in partner profile acme (version 1)`, "updated", "2 rows: updated 1, rejected 1"} {
		if !strings.Contains(text, want) {
			t.Errorf("check lacks %q:\n%s", want, text)
		}
	}

	// Version 2 accepts another header for the employee and spells the
	// codes in lower case: the same export maps to the same values, so its
	// records are unchanged.
	v2 := c.file("acme-v2.yaml", strings.NewReplacer(`["Emp No", "Employee Number"]`, `["Employee Number", "Emp No", "Staff ID"]`,
		"REG: BASE", "reg: base", "# Acme's HR export", "# Acme's HR export, version 2").Replace(hrProfileYAML))
	if out := c.ok("partner", "profile", "set", "acme", v2); !strings.Contains(out, "profile version 2") {
		t.Errorf("set v2: %q", out)
	}
	resent := c.file("acme-export-again.csv", hrExport)
	out = c.ok("ingest", "--partner", "acme", resent)
	if !strings.Contains(out, "created=0 updated=0 unchanged=4 ") {
		t.Errorf("resent under version 2: %q", out)
	}
	hist := c.ok("partner", "profile", "show", "acme", "--history")
	if !strings.Contains(hist, "VERSION") || !strings.Contains(hist, "\n1 ") || !strings.Contains(hist, "\n2 ") {
		t.Errorf("history: %q", hist)
	}
	if old := c.ok("partner", "profile", "show", "acme", "--version", "1"); !strings.HasSuffix(old, hrProfileYAML) {
		t.Errorf("version 1: %q", old)
	}
	// Version 3 asks for results Excel opens as UTF-8: a BOM and CR LF.
	v3 := c.file("acme-v3.yaml", hrProfileYAML+"results: csv-excel\n")
	c.ok("partner", "profile", "set", "acme", v3)
	results := filepath.Join(c.dir, "results")
	nov := c.file("acme-december.csv", strings.ReplaceAll(hrExport, "2026-11", "2026-12"))
	if out := c.ok("ingest", "--partner", "acme", "--results-dir", results, nov); !strings.Contains(out, "created=4 ") {
		t.Fatalf("ingest under version 3: %q", out)
	}
	res, err := os.ReadFile(filepath.Join(results, "acme-december.result.csv"))
	if err != nil {
		t.Fatal(err)
	}
	wantHead := "\ufeffline,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message\r\n" +
		"2,1,created,00042,2026-12,BASE (REG),4000.00,EUR,,,\r\n3,2,created,00042,2026-12,OVERTIME (OT),312.50,EUR,,,\r\n"
	if !strings.HasPrefix(string(res), wantHead) || strings.Count(string(res), "\n") != 5 || strings.Count(string(res), "\r\n") != 5 {
		t.Errorf("csv-excel result:\n%q\nwant it to start %q", res, wantHead)
	}

	// Each envelope names the profile version it was read with.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT file_name, coalesce(profile_version, 0) FROM envelopes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var name string
		var v int
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		got[name] = v
	}
	if rows.Err() != nil || len(got) != 3 || got["acme-export.csv"] != 1 || got["acme-export-again.csv"] != 2 || got["acme-december.csv"] != 3 {
		t.Errorf("envelopes' profile versions = %v (%v)", got, rows.Err())
	}
}

// TestProfileThroughTheDoors: a partner onboarded with a profile uploads
// its HR export as it is, with OpenSSH's sftp and with curl, and reads
// back results Excel opens as UTF-8 (results: csv-excel): the size /results
// lists is the size downloaded, and the second door's upload of the same
// payroll is unchanged.
func TestProfileThroughTheDoors(t *testing.T) {
	d := openPartnerDoors(t, func(c *cli) {
		c.ok("partner", "add", "acme", "--name", "Acme")
		c.ok("partner", "profile", "set", "acme", c.file("acme.yaml", hrProfileYAML+"results: csv-excel\n"))
	})
	c, s, token := d.c, d.s, d.token
	export := hrExport + "00043;Jonas Weber;2026-11;XMAS;100,00;EUR;30.11.2026\n"
	res := d.sftpRoundTrip(t, "acme-2026-11.csv", export, "acme-2026-11.result.csv")
	text := string(res)
	for _, want := range []string{
		"\ufeffline,row,outcome,", "\r\n2,1,created,00042,2026-11,BASE (REG),4000.00,EUR,,,\r\n",
		"\r\n5,4,created,00043,2026-11,BONUS (BON),500.00,EUR,,,\r\n",
		`6,5,rejected,00043,2026-11,XMAS,100.00,EUR,unknown_component,component,"component code ""XMAS"" has no mapping in partner profile acme (version 1)`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("SFTP result lacks %q:\n%q", want, text)
		}
	}
	if strings.Count(text, "\n") != strings.Count(text, "\r\n") {
		t.Errorf("SFTP result has a bare LF:\n%q", text)
	}

	if !regexp.MustCompile(`msg="envelope processed" .*file=acme-2026-11.csv .*profile_version=1 `).MatchString(s.logs.String()) {
		t.Errorf("the processing log line does not name the profile version")
	}

	// The same payroll through the HTTP door, with curl: unchanged.
	again := c.file("acme-2026-11-again.csv", export)
	sub := curl(t, "-X", "POST", "--data-binary", "@"+again, "-H", "Authorization: Bearer "+token,
		"-H", "Idempotency-Key: acme-2026-11-again", "http://"+s.httpAddr+"/v1/submissions?name=acme-2026-11-again.csv")
	var answer struct {
		ID     int64          `json:"id"`
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal([]byte(sub), &answer); err != nil || answer.Counts["unchanged"] != 4 || answer.Counts["rejected"] != 1 || answer.Counts["created"] != 0 {
		t.Fatalf("curl submission: %v\n%s", err, sub)
	}
	info := curl(t, "-H", "Authorization: Bearer "+token, fmt.Sprintf("http://%s/v1/submissions/%d", s.httpAddr, answer.ID))
	if !regexp.MustCompile(`"profile_version":\s*1\b`).MatchString(info) {
		t.Errorf("GET /v1/submissions/%d does not name profile version 1:\n%s", answer.ID, info)
	}
	viaHTTP := curl(t, "-H", "Authorization: Bearer "+token, fmt.Sprintf("http://%s/v1/submissions/%d/result.csv", s.httpAddr, answer.ID))
	if !strings.HasPrefix(viaHTTP, "\ufeffline,row,outcome,") || !strings.Contains(viaHTTP, "\r\n2,1,unchanged,00042,2026-11,BASE (REG),4000.00,EUR,,,\r\n") {
		t.Errorf("HTTP result:\n%q", viaHTTP)
	}
}

// TestWorkbookResultsThroughTheDoors: a partner whose profile says
// results: xlsx gets NAME.result.xlsx over SFTP (OpenSSH's sftp, the
// listing giving the size downloaded) and over HTTP (curl: the workbook's
// content type and file name), a repeat the same bytes; openpyxl reads the
// header frozen and the rejected row filled. A profile asking for xlsx is
// refused while the partner's results may go sealed (OpenPGP).
func TestWorkbookResultsThroughTheDoors(t *testing.T) {
	d := openPartnerDoors(t, func(c *cli) {
		c.ok("partner", "add", "acme", "--name", "Acme", "--pgp", "accept")
		prof := c.file("acme.yaml", hrProfileYAML+"results: xlsx\n")
		if code, _, errs := c.run("partner", "profile", "set", "acme", prof); code == 0 ||
			!strings.Contains(errs, "results: xlsx cannot go with OpenPGP (its pgp policy is accept") {
			t.Fatalf("results: xlsx for a partner under pgp accept: exit %d: %s; want a refusal naming OpenPGP", code, errs)
		}
		c.ok("partner", "set", "acme", "--pgp", "off")
		c.ok("partner", "profile", "set", "acme", prof)
		if code, _, errs := c.run("partner", "set", "acme", "--pgp", "require"); code == 0 || !strings.Contains(errs, "results: xlsx cannot go with OpenPGP") {
			t.Fatalf("pgp require for a partner whose results are workbooks: exit %d: %s; want a refusal", code, errs)
		}
	})
	c, s, token := d.c, d.s, d.token
	export := hrExport + "00043;Jonas Weber;2026-11;XMAS;100,00;EUR;30.11.2026\n"
	res := d.sftpRoundTrip(t, "acme-2026-11.csv", export, "acme-2026-11.result.xlsx")
	got := filepath.Join(c.dir, "acme-2026-11.result.xlsx")
	// Each row: its outcome, component and fill (00000000: none).
	const readBack = `
ws = load_workbook(os.environ["BOOK"]).active
print(ws.freeze_panes)
for row in ws.iter_rows(min_row=2):
    print(row[2].value, row[5].value, row[2].fill.fgColor.rgb)
`
	want := "A2\n" +
		"created BASE (REG) 00000000\ncreated OVERTIME (OT) 00000000\ncreated BASE (REG) 00000000\ncreated BONUS (BON) 00000000\n" +
		"rejected XMAS FFFFC7CE\n"
	if book := workbooktest.Run(t, readBack, "OUT=unused", "BOOK="+got); book != want {
		t.Errorf("openpyxl reads the SFTP result as\n%s\nwant the header frozen and the rejected row filled light red:\n%s", book, want)
	}

	// The same payroll through the HTTP door, with curl: under a new key,
	// unchanged; under the SFTP upload's name, a repeat answered with the
	// workbook SFTP gave, byte for byte.
	again := c.file("acme-2026-11-again.csv", export)
	var ids []int64
	for _, key := range []string{"acme-2026-11-again.csv", "acme-2026-11.csv"} {
		sub := curl(t, "-X", "POST", "--data-binary", "@"+again, "-H", "Authorization: Bearer "+token,
			"-H", "Idempotency-Key: "+key, "http://"+s.httpAddr+"/v1/submissions?name="+key)
		var answer struct {
			ID     int64          `json:"id"`
			Counts map[string]int `json:"counts"`
		}
		if err := json.Unmarshal([]byte(sub), &answer); err != nil || answer.Counts["rejected"] != 1 {
			t.Fatalf("curl submission: %v\n%s", err, sub)
		}
		ids = append(ids, answer.ID)
	}
	var books [][]byte
	for i, id := range ids {
		body, head := filepath.Join(c.dir, fmt.Sprintf("http-%d.xlsx", i)), filepath.Join(c.dir, fmt.Sprintf("http-%d.head", i))
		curl(t, "-H", "Authorization: Bearer "+token, "-D", head, "-o", body, fmt.Sprintf("http://%s/v1/submissions/%d/result.csv", s.httpAddr, id))
		h, _ := os.ReadFile(head)
		for _, want := range []string{"Content-Type: application/vnd.openxmlformats-officedocument.spreadsheetml.sheet\r\n",
			fmt.Sprintf("Content-Disposition: attachment; filename=%q", []string{"acme-2026-11-again.result.xlsx", "acme-2026-11.result.xlsx"}[i])} {
			if !strings.Contains(string(h), want) {
				t.Errorf("HTTP result of submission %d: headers lack %q:\n%s", id, want, h)
			}
		}
		b, err := os.ReadFile(body)
		if err != nil {
			t.Fatal(err)
		}
		books = append(books, b)
	}
	if !bytes.Equal(books[1], res) || bytes.Equal(books[0], res) {
		t.Errorf("the SFTP upload repeated over HTTP (submission %d): %d bytes, equal %v; want the repeat answered with the %d bytes SFTP gave (and the new key's %d bytes another workbook)",
			ids[1], len(books[1]), bytes.Equal(books[1], res), len(res), len(books[0]))
	}
	viaHTTP := filepath.Join(c.dir, "http-0.xlsx")
	if book := workbooktest.Run(t, readBack, "OUT=unused", "BOOK="+viaHTTP); book != strings.ReplaceAll(want, "created", "unchanged") {
		t.Errorf("openpyxl reads the HTTP result as\n%s", book)
	}
}

// partnerDoors is partner acme on a running server, reached as a partner
// reaches it: OpenSSH's sftp with its key, curl with its API token.
type partnerDoors struct {
	c                          *cli
	s                          *server
	keyFile, knownHosts, token string
}

// openPartnerDoors starts a server for partner acme, which setup adds and
// gives its profile through the CLI first.
func openPartnerDoors(t *testing.T, setup func(c *cli)) *partnerDoors {
	t.Helper()
	for _, bin := range []string{"/usr/bin/sftp", "/usr/bin/curl"} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("this test needs %s: install the Debian packages openssh-client and curl (%v)", bin, err)
		}
	}
	ctx := context.Background()
	d := &partnerDoors{c: &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}}
	st, err := records.Open(ctx, d.c.url, records.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	setup(d.c)
	_, d.keyFile = partnerKeyFile(t, st, "acme")
	token := strings.TrimSpace(d.c.ok("partner", "token", "acme"))
	d.token = token[strings.LastIndex(token, "\n")+1:]
	d.s = startServer(t, d.c.url, t.TempDir(), nil)
	host, port, _ := net.SplitHostPort(d.s.sftpAddr)
	d.knownHosts = d.c.file("known_hosts", fmt.Sprintf("[%s]:%s %s\n", host, port,
		hostKeysOf(t, "127.0.0.1", d.s.sftpAddr, []string{ssh.KeyAlgoED25519})[ssh.KeyAlgoED25519]))
	return d
}

// sftpRoundTrip puts content into /inbox as name with OpenSSH's sftp, gets
// /results/result into the cli's folder once it is there, and checks that
// /results lists it with the size downloaded; it returns the bytes.
func (d *partnerDoors) sftpRoundTrip(t *testing.T, name, content, result string) []byte {
	t.Helper()
	local := d.c.file(name, content)
	if out, err := openSSHSFTP(t, "127.0.0.1", d.s.sftpAddr, "acme", d.keyFile, d.knownHosts, "put "+local+" /inbox/"+name+"\n").CombinedOutput(); err != nil {
		t.Fatalf("sftp put: %v\n%s", err, out)
	}
	got := filepath.Join(d.c.dir, result)
	var listing string
	eventually.NoError(t, 30*time.Second, func() error {
		out, err := openSSHSFTP(t, "127.0.0.1", d.s.sftpAddr, "acme", d.keyFile, d.knownHosts, "ls -l /results\nget /results/"+result+" "+got+"\n").CombinedOutput()
		listing = string(out)
		if err != nil {
			return fmt.Errorf("sftp get: %v\n%s", err, out)
		}
		return nil
	})
	res, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\s` + strconv.Itoa(len(res)) + `\s+\w+\s+\d+\s+[\d:]+\s+` + regexp.QuoteMeta(result)).MatchString(listing) {
		t.Errorf("/results lists a size other than the %d bytes downloaded:\n%s", len(res), listing)
	}
	return res
}

// Every setting a profile may give is a flag of partner set, which checks
// its value: a key without a flag would be refused at profile set.
func TestProfileSettingsArePartnerFlags(t *testing.T) {
	flags := map[string]bool{}
	for _, s := range partnerSettings() {
		flags[s.flag] = true
	}
	for _, k := range profile.SettingKeys {
		if !flags[strings.ReplaceAll(k, "_", "-")] {
			t.Errorf("profile setting %s has no partner set flag --%s", k, strings.ReplaceAll(k, "_", "-"))
		}
	}
}
