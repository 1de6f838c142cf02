package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func submissionID(t *testing.T, r resp) int64 {
	t.Helper()
	wantStatus(t, r, http.StatusCreated)
	return int64(r.json(t)["id"].(float64))
}

func listIDs(t *testing.T, r resp) (ids []int64, next string) {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	var page struct {
		Submissions []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"submissions"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	for _, s := range page.Submissions {
		ids = append(ids, s.ID)
	}
	return ids, page.NextCursor
}

func TestListSubmissions(t *testing.T) {
	e := newEnv(t, Config{})
	a := submissionID(t, e.submit("acme", "k-a", "a.csv", csvRows("E1,2026-03,BASE,1.00,USD")))
	b := submissionID(t, e.submit("acme", "k-b", "b.csv", csvRows("E2,2026-03,BASE,2.00,USD")))
	o := submissionID(t, e.submit("other", "k-o", "b.csv", csvRows("E3,2026-03,BASE,3.00,USD")))
	c := submissionID(t, e.submit("acme", "k-c", "B.csv", csvRows("E4,2026-03,BASE,4.00,USD")))
	wantProblem(t, e.submit("acme", "k-c", "B.csv", csvRows("E4,2026-03,BASE,5.00,USD")), http.StatusUnprocessableEntity, "idempotency_key_reuse")

	// Newest first, two a page, never another partner's.
	all, next := listIDs(t, e.get("acme", "/v1/submissions"))
	if len(all) != 4 || all[1] != c || all[2] != b || all[3] != a || all[0] <= c {
		t.Fatalf("listing %v, want the key_reuse envelope then %d %d %d (other's %d never)", all, c, b, a, o)
	}
	if next != "" {
		t.Fatalf("a complete listing has next_cursor %q", next)
	}
	var paged []int64
	cur := ""
	for pages := 0; ; pages++ {
		q := "/v1/submissions?limit=3"
		if cur != "" {
			q += "&cursor=" + url.QueryEscape(cur)
		}
		ids, n := listIDs(t, e.get("acme", q))
		paged = append(paged, ids...)
		if n == "" {
			if pages != 1 {
				t.Fatalf("%d pages for 4 submissions 3 a page", pages+1)
			}
			break
		}
		cur = n
	}
	if fmt.Sprint(paged) != fmt.Sprint(all) {
		t.Fatalf("paged %v, whole %v", paged, all)
	}

	// Filters: the name case-insensitively, the status exactly.
	if ids, _ := listIDs(t, e.get("acme", "/v1/submissions?name=b.csv&status=processed")); fmt.Sprint(ids) != fmt.Sprint([]int64{c, b}) {
		t.Fatalf("name=b.csv status=processed gave %v, want [%d %d]", ids, c, b)
	}
	if ids, _ := listIDs(t, e.get("acme", "/v1/submissions?status=key_reuse")); len(ids) != 1 || ids[0] != all[0] {
		t.Fatalf("status=key_reuse gave %v", ids)
	}
	if ids, _ := listIDs(t, e.get("other", "/v1/submissions")); fmt.Sprint(ids) != fmt.Sprint([]int64{o}) {
		t.Fatalf("other sees %v", ids)
	}

	wantProblem(t, e.get("acme", "/v1/submissions?status=done"), http.StatusBadRequest, "invalid_status")
	wantProblem(t, e.get("acme", "/v1/submissions?cursor=bm9wZQ"), http.StatusBadRequest, "invalid_cursor")
	wantProblem(t, e.get("acme", "/v1/submissions?cursor="+cursor("r", 5)), http.StatusBadRequest, "invalid_cursor")
	wantProblem(t, e.get("acme", "/v1/submissions?limit=0"), http.StatusBadRequest, "invalid_limit")
	wantProblem(t, e.get("", "/v1/submissions"), http.StatusUnauthorized, "unauthorized")
}

type rowJSON struct {
	Line        int    `json:"line"`
	Row         int    `json:"row"`
	Outcome     string `json:"outcome"`
	EmployeeRef string `json:"employee_ref"`
	Amount      string `json:"amount"`
	Code        string `json:"code"`
	Field       string `json:"field"`
	Message     string `json:"message"`
}

func listRowsPage(t *testing.T, r resp) (rows []rowJSON, next string) {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	var page struct {
		Rows       []rowJSON `json:"rows"`
		NextCursor string    `json:"next_cursor"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	return page.Rows, page.NextCursor
}

func TestListRows(t *testing.T) {
	e := newEnv(t, Config{})
	id := submissionID(t, e.submit("acme", "run-1", "march.csv", csvRows(
		"E001,2026-03,BASE,1000.00,USD", "E002,2026-03,BASE,12.345,USD", "E003,2026-03,BASE,abc,USD")))
	rows, next := listRowsPage(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d/rows?outcome=rejected", id)))
	if next != "" || len(rows) != 2 {
		t.Fatalf("rejected rows %+v next %q", rows, next)
	}
	if r := rows[0]; r.Line != 3 || r.Row != 2 || r.Outcome != "rejected" || r.EmployeeRef != "E002" || r.Amount != "12.345" ||
		r.Code != "too_many_decimals" || r.Field != "amount" || !strings.Contains(r.Message, "3 decimals") {
		t.Fatalf("row %+v", r)
	}
	if rows[1].Row != 3 || rows[1].Code != "invalid_amount" {
		t.Fatalf("row %+v", rows[1])
	}
	if rows, _ := listRowsPage(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d/rows?outcome=created,held", id))); len(rows) != 1 || rows[0].Row != 1 || rows[0].Amount != "1000.00" {
		t.Fatalf("created,held rows %+v", rows)
	}

	// Another partner's submission does not exist for this one.
	wantProblem(t, e.get("other", fmt.Sprintf("/v1/submissions/%d/rows", id)), http.StatusNotFound, "not_found")
	wantProblem(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d/rows?outcome=bad", id)), http.StatusBadRequest, "invalid_outcome")

	// A whole-file rejection is row 0.
	empty := submissionID(t, e.submit("acme", "run-2", "empty.csv", csvHeader))
	if rows, _ := listRowsPage(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d/rows", empty))); len(rows) != 1 || rows[0].Row != 0 || rows[0].Code != "no_rows" {
		t.Fatalf("header-only file rows %+v", rows)
	}
}

// TestListRowsPagesAcrossChunks pages through a result stored in several
// chunks (4096 rows each) and gets every row once, in order.
func TestListRowsPagesAcrossChunks(t *testing.T) {
	e := newEnv(t, Config{})
	const n = 9000
	var lines []string
	for i := 1; i <= n; i++ {
		amount := "10.00"
		if i == 4097 || i == 8193 {
			amount = "1.001"
		}
		lines = append(lines, fmt.Sprintf("E%05d,2026-03,BASE,%s,USD", i, amount))
	}
	id := submissionID(t, e.submit("acme", "big", "big.csv", csvRows(lines...)))
	rows, _ := listRowsPage(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d/rows?outcome=rejected", id)))
	if len(rows) != 2 || rows[0].Row != 4097 || rows[1].Row != 8193 {
		t.Fatalf("rejected rows %+v", rows)
	}
	seen, cur, pages := 0, "", 0
	for {
		q := fmt.Sprintf("/v1/submissions/%d/rows?limit=1000", id)
		if cur != "" {
			q += "&cursor=" + url.QueryEscape(cur)
		}
		rows, next := listRowsPage(t, e.get("acme", q))
		pages++
		for _, r := range rows {
			seen++
			if r.Row != seen || r.EmployeeRef != fmt.Sprintf("E%05d", seen) {
				t.Fatalf("row %+v, want row %d", r, seen)
			}
		}
		if next == "" {
			break
		}
		cur = next
	}
	if seen != n || pages != 9 {
		t.Fatalf("%d rows in %d pages, want %d in 9", seen, pages, n)
	}
}
