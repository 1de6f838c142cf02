package review

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/payintake/payintake/records"
)

// chromiumPath is Debian's chromium; PAYINTAKE_CHROMIUM overrides it.
func chromiumPath(t *testing.T) string {
	p := os.Getenv("PAYINTAKE_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("the browser test needs Chromium at %s: install Debian's package (apt-get install -y chromium) or set PAYINTAKE_CHROMIUM: %v", p, err)
	}
	return p
}

// browser starts a fresh headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900), // a laptop screen
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// Start the browser before any timeout applies (a timeout on the first
	// Run would stop the whole browser).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(tcancel)
	return tctx
}

// screenshot saves a full-page PNG into $PAYINTAKE_SCREENSHOTS (the docs use
// docs/screenshots), or into a temp dir to check that it can be taken.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("PAYINTAKE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(png) < 1000 {
		t.Fatalf("screenshot %s is only %d bytes", name, len(png))
	}
}

// TestBrowserReview drives the console in real headless Chromium: log in,
// open the queue, approve one exception with a note, reject another, and
// check the effect in the database. With PAYINTAKE_SCREENSHOTS=DIR it also
// writes queue.png and exception.png there.
func TestBrowserReview(t *testing.T) {
	f := newFixture(t)
	// A second partner with a paid period, so the queue looks like a real one.
	f.ingest("globex", "globex-2024-01.csv", "employee_ref,pay_period,component,amount,currency,hours,rate\n"+
		"0042,2024-01,OVERTIME,450.00,EUR,10,45.00\n"+
		"0043,2024-01,BASE,3200.00,EUR,,\n")
	if _, err := f.store.LockPeriod(f.ctx, "globex", "2024-01", records.LockPaid, "payroll"); err != nil {
		t.Fatal(err)
	}
	f.ingest("globex", "globex-2024-01-late.csv", "employee_ref,pay_period,component,amount,currency,hours,rate\n"+
		"0042,2024-01,OVERTIME,540.00,EUR,12,45.00\n"+
		"0043,2024-01,BASE,3200.00,EUR,,\n")
	ts := serve(t, f)
	ctx := browser(t)

	// Opening the queue asks to log in first, then lands on the queue.
	err := chromedp.Do(ctx,
		chromedp.Navigate(ts.URL+"/review/queue"),
		chromedp.WaitVisible(chromedp.CSS("#password")),
		chromedp.SendKeys(chromedp.CSS("#name"), "alice"),
		chromedp.SendKeys(chromedp.CSS("#password"), testPassword),
		chromedp.Click(chromedp.CSS("button[type=submit].primary")),
		chromedp.WaitVisible(chromedp.CSS("table.queue")),
	)
	if err != nil {
		t.Fatalf("log in: %v", err)
	}
	tabs, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("nav.tabs")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(tabs), "open 4") {
		t.Fatalf("queue tabs = %q, want 4 open", tabs)
	}
	screenshot(t, ctx, "queue.png")

	decide := func(id int64, note, button string) string {
		t.Helper()
		err := chromedp.Do(ctx,
			chromedp.Navigate(ts.URL+"/review/queue"),
			chromedp.WaitVisible(chromedp.CSS("table.queue")),
			chromedp.Click(chromedp.CSS(fmt.Sprintf(`a.xid[href="/review/exceptions/%d"]`, id))),
			chromedp.WaitVisible(chromedp.CSS("#note")),
		)
		if err != nil {
			t.Fatalf("open exception %d: %v", id, err)
		}
		if id == f.e1.ID {
			if _, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr.differs[data-field="amount"]`))); err != nil {
				t.Fatalf("amount not highlighted: %v", err)
			}
			screenshot(t, ctx, "exception.png")
		}
		err = chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS("#note"), note),
			chromedp.Click(chromedp.CSS(button)),
			chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
		)
		if err != nil {
			t.Fatalf("decide exception %d: %v", id, err)
		}
		msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".flash.ok")))
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	if msg := decide(f.e1.ID, "Confirmed with the payroll lead", "#approve"); msg != fmt.Sprintf("You approved exception %d.", f.e1.ID) {
		t.Fatalf("after approve: %q", msg)
	}
	if msg := decide(f.e3.ID, "Bonus was not agreed", "#reject"); msg != fmt.Sprintf("You rejected exception %d.", f.e3.ID) {
		t.Fatalf("after reject: %q", msg)
	}

	// The effect, in the database.
	a := f.exception(f.e1.ID)
	if a.Status != "approved" || a.DecidedBy != "alice" || a.Note != "Confirmed with the payroll lead" {
		t.Fatalf("approved exception = %+v", a)
	}
	if r := f.record("E1", "BASE"); r.Amount != "1100.00" || r.Version != 2 || r.LockedReason != "approved" {
		t.Fatalf("approved record = %+v", r)
	}
	rj := f.exception(f.e3.ID)
	if rj.Status != "rejected" || rj.DecidedBy != "alice" || rj.Note != "Bonus was not agreed" {
		t.Fatalf("rejected exception = %+v", rj)
	}
	if r := f.record("E3", "BONUS"); r.Amount != "50.00" || r.Version != 1 {
		t.Fatalf("rejected record = %+v", r)
	}
	if n := f.count(`SELECT count(*) FROM review_audit WHERE via = 'console' AND action IN ('approve', 'reject') AND actor = 'alice'`); n != 2 {
		t.Fatalf("%d console decisions audited, want 2", n)
	}
	if d := f.exception(f.e4.ID); d.Status != "open" {
		t.Fatalf("untouched exception = %+v", d)
	}
}

// TestBrowserBulkReview clears a late corrections file of 120 held rows in
// one action from the console: filter the queue (it pages 50 at a time and
// finds an employee), confirm with the count and the total change shown,
// and see what was decided. With PAYINTAKE_SCREENSHOTS=DIR it writes
// bulk-queue.png, bulk-confirm.png and bulk-done.png there.
func TestBrowserBulkReview(t *testing.T) {
	f := newFixture(t)
	const n = 120
	var first, late strings.Builder
	first.WriteString(header)
	late.WriteString(header)
	for i := range n {
		fmt.Fprintf(&first, "W%04d,2024-02,BASE,%d.00,EUR\n", i, 3000+i)
		fmt.Fprintf(&late, "W%04d,2024-02,BASE,%d.00,EUR\n", i, 3010+i)
	}
	f.ingest("globex", "globex-2024-02.csv", first.String())
	if _, err := f.store.LockPeriod(f.ctx, "globex", "2024-02", records.LockApproved, "payroll"); err != nil {
		t.Fatal(err)
	}
	f.ingest("globex", "globex-2024-02-corrections.csv", late.String())
	ts := serve(t, f)
	ctx := browser(t)
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(ts.URL+"/review/queue"),
		chromedp.WaitVisible(chromedp.CSS("#password")),
		chromedp.SendKeys(chromedp.CSS("#name"), "alice"),
		chromedp.SendKeys(chromedp.CSS("#password"), testPassword),
		chromedp.Click(chromedp.CSS("button[type=submit].primary")),
		chromedp.WaitVisible(chromedp.CSS("table.queue")),
		// Search one employee.
		chromedp.SendKeys(chromedp.CSS("#f-employee"), "W0042"),
		chromedp.Click(chromedp.CSS("#filter")),
		chromedp.WaitVisible(chromedp.CSS("#clear")), // only on the filtered page
	)
	if err != nil {
		t.Fatalf("log in and search: %v", err)
	}
	if rows := text("table.queue tbody"); strings.Count(rows, "W00") != 1 || !strings.Contains(rows, "W0042") {
		t.Fatalf("employee search shows %q", rows)
	}
	err = chromedp.Do(ctx,
		chromedp.Clear(chromedp.CSS("#f-employee")),
		chromedp.SetValue(chromedp.CSS("#f-partner"), "globex"),
		chromedp.SendKeys(chromedp.CSS("#f-file"), "globex-2024-02-corrections.csv"),
		chromedp.Click(chromedp.CSS("#filter")),
		chromedp.WaitVisible(chromedp.CSS("#approve-all")),
	)
	if err != nil {
		t.Fatalf("filter the queue: %v", err)
	}
	if bar := text(".bulkbar"); !strings.Contains(bar, "120 open exception(s) of globex match these filters (this page shows the first 50)") {
		t.Fatalf("bulk bar = %q", bar)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS("#next"))); err != nil {
		t.Fatalf("no next page: %v", err)
	}
	screenshot(t, ctx, "bulk-queue.png")
	// Page through the filtered queue: 50, 50, then 20 rows, each row on
	// exactly one page, in order, and no next link on the last page.
	firstPage, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for page, want := range []int{50, 50, 20} {
		if page > 0 {
			href, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#next"), "href"))
			if err != nil {
				t.Fatalf("page %d: next link: %v", page+1, err)
			}
			if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+href.Value), chromedp.WaitVisible(chromedp.CSS("table.queue"))); err != nil {
				t.Fatalf("page %d: %v", page+1, err)
			}
		}
		refs := regexp.MustCompile(`W\d{4}`).FindAllString(text("table.queue tbody"), -1)
		if len(refs) != want {
			t.Fatalf("page %d shows %d rows, want %d: %v", page+1, len(refs), want, refs)
		}
		for i, ref := range refs {
			if wantRef := fmt.Sprintf("W%04d", page*50+i); ref != wantRef {
				t.Fatalf("page %d row %d is %s, want %s", page+1, i+1, ref, wantRef)
			}
			seen[ref]++
		}
	}
	if len(seen) != n {
		t.Fatalf("the pages showed %d distinct employees, want %d", len(seen), n)
	}
	if nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS("#next"), chromedp.AtLeast(0))); err != nil || len(nodes) != 0 {
		t.Fatalf("the last page still has a next link (%d, %v)", len(nodes), err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(firstPage), chromedp.WaitVisible(chromedp.CSS("#approve-all"))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#approve-all")), chromedp.WaitVisible(chromedp.CSS("#confirm"))); err != nil {
		t.Fatalf("open the confirm page: %v", err)
	}
	if c, total := text("#count"), text("#total"); c != "120 open" || !strings.HasPrefix(total, "+1200.00 EUR") {
		t.Fatalf("confirm page: count %q, total %q", c, total)
	}
	if n := f.count(`SELECT count(*) FROM exceptions WHERE partner_id = 'globex' AND status = 'open'`); n != 120 {
		t.Fatalf("the confirm page decided something: %d open", n)
	}
	err = chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#note"), "February corrections confirmed by payroll"))
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "bulk-confirm.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#bulk-done"))); err != nil {
		t.Fatalf("confirm: %v", err)
	}
	if msg := text(".flash.ok"); msg != "You approved 120 exception(s) of partner globex." {
		t.Fatalf("after the bulk approve: %q", msg)
	}
	screenshot(t, ctx, "bulk-done.png")
	if n := f.count(`SELECT count(*) FROM records WHERE partner_id = 'globex' AND pay_period = '2024-02' AND version = 2`); n != 120 {
		t.Fatalf("%d records approved, want 120", n)
	}
	if n := f.count(`SELECT count(*) FROM review_audit WHERE via = 'console' AND action = 'approve' AND detail = 'February corrections confirmed by payroll'`); n != 120 {
		t.Fatalf("%d audit rows, want 120", n)
	}
	if n := f.count(`SELECT count(*) FROM exceptions WHERE partner_id = 'acme' AND status = 'open'`); n != 3 {
		t.Fatalf("acme's exceptions were touched: %d open", n)
	}
}
