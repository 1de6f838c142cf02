package apply

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// Leg replays: corrected rows of a submission sent again one by one. Each
// leg is staged, classified and applied by the very statements of a file's
// rows (classify.go) and gets its own outcome; a leg whose latest outcome
// is anything but rejected is settled (records.LegKey, replay_legs).

// Replay applies a replay in one transaction under the partner lock: the
// claim of its key, every leg's effects, the legs' latest outcomes and the
// stored answer commit together.
func (e *Engine) Replay(ctx context.Context, req records.ReplayRequest, answer records.ReplayAnswerFunc) (records.ReplayAnswer, error) {
	var ans records.ReplayAnswer
	sum := sha256.Sum256(req.Body)
	err := pgx.BeginFunc(ctx, e.store.Pool(), func(tx pgx.Tx) error {
		ans = records.ReplayAnswer{}
		if err := records.PartnerLock(ctx, tx, req.PartnerID); err != nil {
			return err
		}
		firstSum, stored, found, err := records.ReplayAnswerOf(ctx, tx, req.PartnerID, req.Of.ID, req.Key)
		if err != nil {
			return err
		}
		if found {
			if !bytes.Equal(firstSum, sum[:]) {
				return records.ErrReplayKeyReuse
			}
			ans.StoredAnswer, ans.Repeated = stored, true
			return nil
		}
		res, err := replay(ctx, tx, req, sum[:])
		if err != nil {
			return err
		}
		ans.StoredAnswer = answer(res)
		return records.CompleteReplay(ctx, tx, res, ans.StoredAnswer)
	})
	if err != nil {
		return records.ReplayAnswer{}, fmt.Errorf("replay legs of envelope %d: %w", req.Of.ID, err)
	}
	return ans, nil
}

// replay records req, refuses it whole when it names a row that may not be
// replayed (*records.NotReplayableError), and applies the legs it may.
func replay(ctx context.Context, tx pgx.Tx, req records.ReplayRequest, sum []byte) (records.ReplayResult, error) {
	res := records.ReplayResult{Of: req.Of.ID, Counts: map[string]int{}}
	var err error
	if res.ID, err = records.InsertReplay(ctx, tx, req, sum); err != nil {
		return res, err
	}

	// Which rows may be replayed: those rejected or held in the submission.
	wanted := make([]int, 0, len(req.Legs))
	for _, l := range req.Legs {
		wanted = append(wanted, l.Row)
	}
	orig, err := records.ResultRowsAt(ctx, tx, req.Of.ID, wanted)
	if err != nil {
		return res, err
	}
	refused := &records.NotReplayableError{}
	seen := map[int]bool{}
	for _, l := range req.Legs {
		o, ok := orig[l.Row]
		switch {
		case seen[l.Row]:
			refused.Rows, refused.Reasons = append(refused.Rows, l.Row), append(refused.Reasons, "is named twice in this request")
		case !ok || l.Row < 1:
			refused.Rows, refused.Reasons = append(refused.Rows, l.Row), append(refused.Reasons, "is not a row of this submission")
		case o.Outcome != records.OutcomeRejected && o.Outcome != records.OutcomeHeld:
			refused.Rows, refused.Reasons = append(refused.Rows, l.Row), append(refused.Reasons, "was "+string(o.Outcome))
		}
		seen[l.Row] = true
	}
	if len(refused.Rows) > 0 {
		return res, refused
	}

	keys := make([][]byte, len(req.Legs))
	for i, l := range req.Legs {
		keys[i] = records.LegKey(req.Of.Key, l.Row)
	}
	claimed, err := records.ClaimReplayLegs(ctx, tx, req.PartnerID, req.Of.ID, res.ID, keys, wanted)
	if err != nil {
		return res, err
	}
	if len(claimed) > 0 {
		var legs []*records.StagedRow
		staged := map[int]*records.StagedRow{}
		for _, l := range req.Legs {
			if claimed[l.Row] {
				st := l.Staged
				st.Row, st.Line = l.Row, orig[l.Row].Line
				legs = append(legs, &st)
				staged[l.Row] = &st
			}
		}
		args := pgx.NamedArgs{"partner": req.PartnerID, "seq": req.Of.Seq, "env": req.Of.ID,
			"by": fmt.Sprintf("replay %d of envelope %d", res.ID, req.Of.ID), "file_rejected": false}
		if err := stageAndApply(ctx, tx, legs, args, req.Of.Seq != nil); err != nil {
			return res, err
		}
		settled, err := settledLegs(ctx, tx, staged)
		if err != nil {
			return res, err
		}
		if err := records.SettleReplayLegs(ctx, tx, req.Of.ID, settled); err != nil {
			return res, err
		}
	}
	lines, producer, err := records.ReplayLegLines(ctx, tx, req.Of.ID, wanted)
	if err != nil {
		return res, err
	}

	var out bytes.Buffer
	out.WriteString(records.ResultHeader)
	for i, l := range req.Legs {
		line := lines[l.Row] + "\n"
		out.WriteString(line)
		parsed, err := records.ParseResultRows([]byte(line))
		if err != nil || len(parsed) != 1 {
			return res, fmt.Errorf("leg outcome of row %d: %v", l.Row, err)
		}
		parsed[0].ReplayID = producer[l.Row]
		res.Legs = append(res.Legs, records.LegResult{ResultRow: parsed[0], LegKey: keys[i], Settled: !claimed[l.Row]})
		res.Counts[string(parsed[0].Outcome)]++
	}
	res.Result = out.Bytes()
	return res, nil
}

// applyReplayFile applies a replay file (envelope env, locked, partner
// locked) as one replay of plan.Of keyed by the file's submission key: its
// result file is the replay's result. A file naming rows that may not be
// replayed is rejected whole (row_not_replayable) and applies nothing.
func (e *Engine) applyReplayFile(ctx context.Context, tx pgx.Tx, env *records.Envelope, plan ReplayPlan) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	res, err := replay(ctx, sp, records.ReplayRequest{PartnerID: env.PartnerID, Of: plan.Of, Key: env.Key, Source: env.Source,
		Body: []byte{}, Legs: plan.Legs}, env.SHA256)
	var nr *records.NotReplayableError
	if errors.As(err, &nr) {
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return fmt.Errorf("roll back replay: %w", rbErr)
		}
		return e.store.RejectFile(ctx, tx, env, normalize.ParseError{Err: normalize.CodeRowNotReplayable, Field: "row", Message: nr.Error()}, records.StatusProcessed)
	}
	if err != nil {
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return records.CloseReplayFile(ctx, tx, env, res)
}

// legOutcomesSQL reads classify's decision for each staged leg.
var legOutcomesSQL = query("LegOutcomes")

// settledLegs reads classify's decision for each staged leg and composes
// its line of the result file.
func settledLegs(ctx context.Context, tx pgx.Tx, staged map[int]*records.StagedRow) ([]records.SettledLeg, error) {
	rows, err := tx.Query(ctx, legOutcomesSQL)
	if err != nil {
		return nil, fmt.Errorf("read leg outcomes: %w", err)
	}
	defer rows.Close()
	var out []records.SettledLeg
	for rows.Next() {
		var row int32
		var outcome, code, field, message string
		if err := rows.Scan(&row, &outcome, &code, &field, &message); err != nil {
			return nil, fmt.Errorf("read leg outcomes: %w", err)
		}
		st := staged[int(row)]
		if st == nil {
			return nil, fmt.Errorf("read leg outcomes: row %d was not staged", row)
		}
		line := appendRowLine(nil, st, outcome, code, field, message)
		out = append(out, records.SettledLeg{Row: int(row), Outcome: outcome, Code: code, Line: string(line)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read leg outcomes: %w", err)
	}
	return out, nil
}
