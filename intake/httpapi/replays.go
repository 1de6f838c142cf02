package httpapi

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/httpbody"
)

// POST /v1/submissions/{id}/replays: corrected legs of a submission, each
// applied at most once (intake.ReplayLegs says how).

const maxReplayBody = 4 << 20

type replayLeg struct {
	Row      int    `json:"row"`
	Line     int    `json:"line"`
	LegKey   string `json:"leg_key"`
	Outcome  string `json:"outcome"`
	Code     string `json:"code"`
	Field    string `json:"field"`
	Message  string `json:"message"`
	ReplayID int64  `json:"replay_id"`
	Settled  bool   `json:"settled_before"`
}

type replayJSON struct {
	ID           int64          `json:"id"`
	SubmissionID int64          `json:"submission_id"`
	Counts       map[string]int `json:"counts"`
	Rows         []replayLeg    `json:"rows"`
	ResultURL    string         `json:"result_url"`
}

func renderReplay(res intake.ReplayResult) intake.Answer {
	counts := map[string]int{}
	for _, o := range outcomes {
		counts[string(o)] = res.Counts[string(o)]
	}
	out := replayJSON{ID: res.ID, SubmissionID: res.Of, Counts: counts, Rows: []replayLeg{},
		ResultURL: fmt.Sprintf("/v1/submissions/%d/result.csv", res.Of)}
	for _, l := range res.Legs {
		out.Rows = append(out.Rows, replayLeg{Row: l.Row, Line: l.Line, LegKey: hex.EncodeToString(l.LegKey),
			Outcome: string(l.Outcome), Code: l.Code, Field: l.Field, Message: l.Message, ReplayID: l.ReplayID, Settled: l.Settled})
	}
	return jsonResponse(http.StatusCreated, out).stored()
}

func (a *API) postReplay(w http.ResponseWriter, r *http.Request) {
	env, out, ok := a.envelopeOf(w, r)
	if !ok {
		return
	}
	key, p := parseIdempotencyKey(r.Header)
	if p != nil {
		writeProblem(w, *p)
		return
	}
	switch {
	case !out.Done():
		w.Header().Set("Retry-After", "1")
		writeProblem(w, newProblem(http.StatusConflict, "not_ready", "this submission has no result yet; replay its rows once it has one"))
		return
	case intake.IsReplayFile(out.FileName):
		writeProblem(w, newProblem(http.StatusUnprocessableEntity, "not_replayable",
			fmt.Sprintf("submission %d is itself a replay file (%s); nothing was applied: replay the rows of the submission it corrects", env.ID, out.FileName)))
		return
	case out.Status != intake.StatusProcessed:
		writeProblem(w, newProblem(http.StatusUnprocessableEntity, "not_replayable",
			fmt.Sprintf("submission %d was not processed (status %s), so it has no rows to replay: send the file as a new submission", env.ID, out.Status)))
		return
	}
	body, err := httpbody.ReadAll(w, r, a.bodyLimits(maxReplayBody))
	if httpbody.TimedOut(err) {
		writeProblem(w, a.bodyTimeout("replay body"))
		return
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeProblem(w, newProblem(http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("the replay body is larger than %d bytes; replay the rows in several requests", maxReplayBody)))
			return
		}
		writeProblem(w, newProblem(http.StatusBadRequest, "body_unreadable", "the body could not be read to its end; send the replay again with the same Idempotency-Key"))
		return
	}
	ans, bad, err := a.in.ReplayLegs(r.Context(), intake.LegReplay{Of: out, Key: key, Source: "http", Body: body}, renderReplay)
	if bad != nil {
		p := newProblem(http.StatusUnprocessableEntity, string(bad.Code), bad.Message)
		p.Field = bad.Field
		writeProblem(w, p)
		return
	}
	var nr *intake.NotReplayableError
	switch {
	case errors.Is(err, intake.ErrReplayKeyReuse):
		writeProblem(w, newProblem(http.StatusUnprocessableEntity, "idempotency_key_reuse",
			"this Idempotency-Key was already used to replay other rows or values of this submission; nothing was applied: send this replay under a new key, or the first one unchanged"))
		return
	case errors.As(err, &nr):
		pr := newProblem(http.StatusUnprocessableEntity, "row_not_replayable", nr.Error())
		pr.Field = "rows"
		writeProblem(w, pr)
		return
	case err != nil:
		a.internal(w, r, "replay legs", err)
		return
	}
	if ans.Repeated {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeResponse(w, storedResponse(ans.StoredAnswer))
}
