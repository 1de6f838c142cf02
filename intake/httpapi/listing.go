package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/payintake/payintake/intake"
)

// Listings: GET /v1/submissions and GET /v1/submissions/{id}/rows.
//
// Both are paginated by an opaque cursor: next_cursor in a page is sent back
// as ?cursor= for the next one, with the same filters; it is absent on the
// last page. A cursor is a position (an envelope id, a row index), not a
// snapshot: submissions recorded after the first page do not shift the
// pages that follow.

const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// envelopeStatuses are the values ?status= takes (the envelope statuses).
var envelopeStatuses = intake.EnvelopeStatuses()

type submissionPage struct {
	Submissions []submissionInfo `json:"submissions"`
	NextCursor  string           `json:"next_cursor,omitempty"`
}

type rowsPage struct {
	SubmissionID int64              `json:"submission_id"`
	Rows         []intake.ResultRow `json:"rows"`
	NextCursor   string             `json:"next_cursor,omitempty"`
}

// cursor encodes a position of kind ("s" submissions, "r" rows).
func cursor(kind string, pos int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + "1:" + strconv.FormatInt(pos, 10)))
}

// parseCursor reads ?cursor= of kind; ok false answers a 400 problem.
func parseCursor(w http.ResponseWriter, r *http.Request, kind string) (pos int64, given, ok bool) {
	c := r.URL.Query().Get("cursor")
	if c == "" {
		return 0, false, true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	rest, found := strings.CutPrefix(string(b), kind+"1:")
	if err == nil && found {
		if pos, err = strconv.ParseInt(rest, 10, 64); err == nil && pos >= 0 {
			return pos, true, true
		}
	}
	writeProblem(w, newProblem(http.StatusBadRequest, "invalid_cursor",
		"the cursor is not one this listing gave; send next_cursor from the previous page unchanged, or no cursor for the first page"))
	return 0, false, false
}

// pageSize reads ?limit=; ok false answers a 400 problem.
func pageSize(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return defaultPageSize, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPageSize {
		writeProblem(w, newProblem(http.StatusBadRequest, "invalid_limit",
			fmt.Sprintf("limit must be a whole number from 1 to %d (default %d)", maxPageSize, defaultPageSize)))
		return 0, false
	}
	return n, true
}

func (a *API) listSubmissions(w http.ResponseWriter, r *http.Request) {
	partner, ok := a.auth(w, r)
	if !ok {
		return
	}
	limit, ok := pageSize(w, r)
	if !ok {
		return
	}
	before, _, ok := parseCursor(w, r, "s")
	if !ok {
		return
	}
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(envelopeStatuses, status) {
		writeProblem(w, newProblem(http.StatusBadRequest, "invalid_status",
			fmt.Sprintf("status must be one of %s", strings.Join(envelopeStatuses, ", "))))
		return
	}
	envs, err := a.in.Submissions(r.Context(), intake.SubmissionFilter{Partner: partner, Status: status,
		Name: q.Get("name"), Before: before, Limit: limit + 1})
	if err != nil {
		a.internal(w, r, "list submissions", err)
		return
	}
	page := submissionPage{Submissions: []submissionInfo{}}
	if len(envs) > limit {
		envs = envs[:limit]
		page.NextCursor = cursor("s", envs[limit-1].ID)
	}
	for _, env := range envs {
		info, err := a.info(r, env)
		if err != nil {
			a.internal(w, r, "list submissions", err)
			return
		}
		page.Submissions = append(page.Submissions, info)
	}
	writeResponse(w, jsonResponse(http.StatusOK, page))
}

// info is the JSON of one submission: a replay shows its original's counts.
func (a *API) info(r *http.Request, env intake.Envelope) (submissionInfo, error) {
	info := submissionInfo{submission: newSubmission(env), Source: env.Source, ReceivedAt: env.ReceivedAt,
		Size: env.Size, RepeatOf: env.RepeatOf, ProfileVersion: env.ProfileVersion}
	if env.Status == intake.StatusRepeat {
		out, err := a.in.Outcome(r.Context(), env)
		if err != nil {
			return info, err
		}
		info.Counts, info.ProfileVersion = newSubmission(out).Counts, out.ProfileVersion
	}
	return info, nil
}

func (a *API) listRows(w http.ResponseWriter, r *http.Request) {
	env, out, ok := a.envelopeOf(w, r)
	if !ok {
		return
	}
	limit, ok := pageSize(w, r)
	if !ok {
		return
	}
	pos, given, ok := parseCursor(w, r, "r")
	if !ok {
		return
	}
	after := -1
	if given {
		after = int(pos)
	}
	var want []string
	if o := r.URL.Query().Get("outcome"); o != "" {
		want = strings.Split(o, ",")
		for _, x := range want {
			if !intake.IsOutcome(x) {
				writeProblem(w, newProblem(http.StatusBadRequest, "invalid_outcome",
					fmt.Sprintf("outcome %q is not one of %s (several may be given, separated by commas)", x, outcomeList())))
				return
			}
		}
	}
	if !out.Done() || out.Status == intake.StatusIncomplete {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, newProblem(http.StatusConflict, "not_ready", "this submission has no result yet; try again shortly"))
		return
	}
	got, more, err := a.in.ResultRows(r.Context(), out, after, limit, want)
	if err != nil {
		a.internal(w, r, "list result rows", err)
		return
	}
	page := rowsPage{SubmissionID: env.ID, Rows: got}
	if page.Rows == nil {
		page.Rows = []intake.ResultRow{}
	}
	if more {
		page.NextCursor = cursor("r", int64(got[len(got)-1].Row))
	}
	writeResponse(w, jsonResponse(http.StatusOK, page))
}
