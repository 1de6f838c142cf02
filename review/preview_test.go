package review

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// upload posts a sample to the console's preview as the browser's form does.
func (c *console) upload(partner, name, content, csrf string) (int, string) {
	c.t.Helper()
	ctype, body := sampleForm(partner, name, content, csrf)
	return c.post("/review/preview", ctype, bytes.NewReader(body))
}

// sampleForm is the preview's multipart form: its content type and body.
func sampleForm(partner, name, content, csrf string) (string, []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("csrf", csrf)
	_ = mw.WriteField("partner", partner)
	fw, _ := mw.CreateFormFile("sample", name)
	_, _ = io.WriteString(fw, content)
	_ = mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// post sends body to path as Go's client sends it: with its length
// declared for a *bytes.Reader, chunked for a reader whose length it cannot
// know.
func (c *console) post(path, ctype string, body io.Reader) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+path, body)
	req.Header.Set("Content-Type", ctype)
	res, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestConsolePreview: a reviewer uploads a partner's sample and sees the
// columns found and each row's values and outcome, read with the partner's
// profile; nothing is applied. A held row's exception names the profile
// version its file was read with.
func TestConsolePreview(t *testing.T) {
	f := newFixture(t)
	pr := records.PartnerProfile{Columns: map[string][]string{"employee_ref": {"Emp No"}, "component": {"Earning Code"}, "amount": {"Gross Pay"}},
		Components: map[string]string{"REG": "BASE", "BON": "BONUS"}, UnknownComponent: "reject"}
	if _, err := f.store.SetPartnerProfile(f.ctx, "globex", "(test)", pr, records.PartnerUpdate{}, "lead", records.ViaCLI); err != nil {
		t.Fatal(err)
	}
	const head = "Emp No,pay_period,Earning Code,Gross Pay,currency\n"
	f.ingest("globex", "g1.csv", head+"007,2024-02,REG,10.00,USD\n")
	if _, err := f.store.LockPeriod(f.ctx, "globex", "2024-02", records.LockApproved, "lead"); err != nil {
		t.Fatal(err)
	}
	held := f.ingest("globex", "g2.csv", head+"007,2024-02,REG,11.00,USD\n")
	if held.Counts["held"] != 1 {
		t.Fatalf("g2.csv counts %v, want one held", held.Counts)
	}
	ts := serve(t, f)
	c := newConsole(t, ts.URL)
	if st := c.login("gina", testPassword); st != 303 {
		t.Fatalf("login: %d", st)
	}

	xs, err := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: "globex", Status: "open"})
	if err != nil || len(xs) != 1 {
		t.Fatalf("exceptions %v %v", xs, err)
	}
	_, _, page := c.do("GET", fmt.Sprintf("/review/exceptions/%d", xs[0].ID), nil, nil)
	if !strings.Contains(page, `Read with partner profile version <b>1</b>, set by lead`) {
		t.Errorf("the exception page does not name the profile version:\n%s", page)
	}

	st, _, form := c.do("GET", "/review/preview", nil, nil)
	m := csrfRE.FindStringSubmatch(form)
	if st != 200 || m == nil || !strings.Contains(form, `<option value="globex"`) || strings.Contains(form, `<option value="acme"`) {
		t.Fatalf("preview form (%d) should offer globex only:\n%s", st, form)
	}
	count := func() string {
		return fmt.Sprint(pgtest.Count(f.ctx, t, f.store, `SELECT count(*) FROM envelopes`), pgtest.Count(f.ctx, t, f.store, `SELECT count(*) FROM records`),
			pgtest.Count(f.ctx, t, f.store, `SELECT count(*) FROM exceptions`))
	}
	before := count()
	st, body := c.upload("globex", "sample.csv", head+"007,2024-02,REG,10.00,USD\n008,2024-03,BON,5.00,USD\n008,2024-03,XMAS,1.00,USD\n", m[1])
	if st != 200 {
		t.Fatalf("preview: %d\n%s", st, body)
	}
	if after := count(); after != before {
		t.Fatalf("the preview wrote: %s → %s", before, after)
	}
	for _, want := range []string{"read with partner profile globex (version 1)", "<td>Gross Pay</td>", `id="counts">created 1 · unchanged 1 · rejected 1<`,
		`<tr data-outcome="unchanged">`, "<td>BASE (REG)</td>", `<tr data-outcome="created">`, "<td>BONUS (BON)</td>",
		`<tr data-outcome="rejected">`, "unknown_component", "component code &#34;XMAS&#34; has no mapping"} {
		if !strings.Contains(body, want) {
			t.Errorf("preview page lacks %q:\n%s", want, body)
		}
	}
	if st, body := c.upload("acme", "sample.csv", head, m[1]); st != 400 || !strings.Contains(body, "Choose one of your partners") {
		t.Errorf("gina previewing acme: %d", st)
	}
	if st, _ := c.upload("globex", "sample.csv", head, m[1]+"x"); st != 403 {
		t.Errorf("preview with a wrong CSRF token: %d", st)
	}
}

// TestBrowserPreview: in Chromium, an operator chooses a partner and a
// sample from disk and sees the table, read with the partner's profile.
func TestBrowserPreview(t *testing.T) {
	f := newFixture(t)
	pr := records.PartnerProfile{Columns: map[string][]string{"employee_ref": {"Emp No"}, "component": {"Earning Code"}, "amount": {"Gross Pay"}},
		Components: map[string]string{"REG": "BASE", "OT": "OVERTIME"}, UnknownComponent: "reject"}
	if _, err := f.store.SetPartnerProfile(f.ctx, "globex", "(test)", pr, records.PartnerUpdate{}, "lead", records.ViaCLI); err != nil {
		t.Fatal(err)
	}
	sample := filepath.Join(t.TempDir(), "globex-export.csv")
	if err := os.WriteFile(sample, []byte("Emp No,Name,pay_period,Earning Code,Gross Pay,currency\n"+
		"0042,Zoë Brandt,2024-02,REG,3200.00,EUR\n0042,Zoë Brandt,2024-02,OT,450.00,EUR\n0043,Jonas Weber,2024-02,XMAS,50.00,EUR\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := serve(t, f)
	ctx := browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(ts.URL+"/review/preview"),
		chromedp.WaitVisible(chromedp.CSS("#password")),
		chromedp.SendKeys(chromedp.CSS("#name"), "alice"),
		chromedp.SendKeys(chromedp.CSS("#password"), testPassword),
		chromedp.Click(chromedp.CSS("button[type=submit].primary")),
		chromedp.WaitVisible(chromedp.CSS("#preview-form")),
		chromedp.SetValue(chromedp.CSS("#p-partner"), "globex"),
		chromedp.SetUploadFiles(chromedp.CSS("#p-sample"), []string{sample}),
		chromedp.Click(chromedp.CSS("#preview")),
		chromedp.WaitVisible(chromedp.CSS("table#rows")),
	)
	if err != nil {
		t.Fatalf("preview in the browser: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("table#rows tbody")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"created", "BASE (REG)", "OVERTIME (OT)", "rejected", "unknown_component", `component code "XMAS" has no mapping in partner profile globex (version 1)`} {
		if !strings.Contains(strings.ToLower(rows), strings.ToLower(want)) { // badges are shown in capitals
			t.Errorf("the preview table lacks %q:\n%s", want, rows)
		}
	}
	screenshot(t, ctx, "preview.png")
	if n := pgtest.Count(f.ctx, t, f.store, `SELECT count(*) FROM envelopes WHERE partner_id = 'globex'`); n != 0 {
		t.Errorf("the preview stored %d envelope(s)", n)
	}
}
