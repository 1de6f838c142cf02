package records

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
)

// Statements of replay.sql.
var (
	sqlReplayAnswer          = query("ReplayAnswer")
	sqlCompleteReplay        = query("CompleteReplay")
	sqlInsertReplay          = query("InsertReplay")
	sqlClaimReplayLegs       = query("ClaimReplayLegs")
	sqlSettleReplayLegs      = query("SettleReplayLegs")
	sqlReplayLegLines        = query("ReplayLegLines")
	sqlResultChunksAt        = query("ResultChunksAt")
	sqlLatestLegs            = query("LatestLegs")
	sqlStoreReplayCounts     = query("StoreReplayCounts")
	sqlStoreReplayFileResult = query("StoreReplayFileResult")
	sqlCloseReplayFile       = query("CloseReplayFile")
)

// Leg replays: corrected rows of a submission sent again one by one.
//
// A leg is one row of a submission. Its key is
//
//	HMAC-SHA256(key = the submission key as stored (case-folded, UTF-8),
//	            message = the row index in decimal ASCII, no sign, no leading zeros)
//
// so that every replica and every client derives the same key from the
// business event (which submission, which row). Only rows that were
// rejected or held in the submission may be replayed. Each leg is staged,
// classified and applied by the very statements of a file's rows
// (classify.go) and gets its own outcome. A leg whose latest outcome is
// anything but rejected is settled: replaying it again returns that outcome
// and applies nothing, which the leg key's primary key in replay_legs
// decides (the claim is an upsert that leaves a settled leg alone).

// LegKey is the key of row of the submission whose (case-folded) key is
// submissionKey.
func LegKey(submissionKey string, row int) []byte {
	m := hmac.New(sha256.New, []byte(submissionKey))
	m.Write(strconv.AppendInt(nil, int64(row), 10))
	return m.Sum(nil)
}

// Leg is one corrected row: Staged carries the normalised values (or the
// rejection) exactly as a file's row would be staged; Row is the row index
// in the original submission.
type Leg struct {
	Row    int
	Staged StagedRow
}

// ReplayRequest is one replay of legs of a submission.
type ReplayRequest struct {
	PartnerID string
	Of        Envelope // the submission (its outcome envelope: processed)
	Key       string   // the request's idempotency key, case-folded
	Source    string
	Body      []byte // as received, kept for audit; its SHA-256 tells a repeat from a reuse
	Legs      []Leg
}

// LegResult is what became of one leg.
type LegResult struct {
	ResultRow
	LegKey []byte
	// ResultLine is the row's line of a result file, without its line break.
	ResultLine string
	// Settled: the leg had settled in an earlier replay; this is its
	// outcome from then and nothing was applied now.
	Settled bool
}

// ReplayResult is a replay's outcome.
type ReplayResult struct {
	ID     int64
	Of     int64
	Counts map[string]int
	Legs   []LegResult
	Result []byte // the replay's result file (CSV, the result header)
}

// ReplayAnswer is the stored answer to a leg replay request.
type ReplayAnswer struct {
	StoredAnswer
	Repeated bool // a repeat of a request already answered: the first answer
}

// ReplayAnswerFunc gives the door's answer to what a replay did; Replay
// calls it inside the replay's transaction and stores the answer there,
// with the replay's key (see StoredAnswer).
type ReplayAnswerFunc func(ReplayResult) StoredAnswer

// ErrReplayKeyReuse: the idempotency key was used for another body.
var ErrReplayKeyReuse = errors.New("idempotency key already used for another replay body")

// NotReplayableError refuses a replay naming rows that may not be replayed.
// Nothing was applied.
type NotReplayableError struct {
	Rows    []int
	Reasons []string // one per row
}

func (e *NotReplayableError) Error() string {
	var b strings.Builder
	for i, r := range e.Rows {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "row %d %s", r, e.Reasons[i])
	}
	return b.String() + ". Only rows that were rejected or held in this submission can be replayed, once each per request; nothing was applied"
}

// Replay applies a replay in one transaction under the partner lock: the
// claim of its key, every leg's effects, the legs' latest outcomes and the
// stored answer commit together.
func (s *Store) Replay(ctx context.Context, req ReplayRequest, answer ReplayAnswerFunc) (ReplayAnswer, error) {
	var ans ReplayAnswer
	sum := sha256.Sum256(req.Body)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ans = ReplayAnswer{}
		if err := partnerLock(ctx, tx, req.PartnerID); err != nil {
			return err
		}
		var firstSum []byte
		err := tx.QueryRow(ctx, sqlReplayAnswer, req.PartnerID, req.Of.ID, req.Key).
			Scan(&firstSum, &ans.Code, &ans.Format, &ans.Body)
		if err == nil {
			if !bytes.Equal(firstSum, sum[:]) {
				return ErrReplayKeyReuse
			}
			ans.Repeated = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read replay key: %w", err)
		}
		res, err := s.replay(ctx, tx, req, sum[:])
		if err != nil {
			return err
		}
		ans.StoredAnswer = answer(res)
		if _, err := tx.Exec(ctx, sqlCompleteReplay,
			res.ID, res.Counts, res.Result, ans.Code, ans.Format, ans.Body); err != nil {
			return fmt.Errorf("store replay answer: %w", err)
		}
		return nil
	})
	if err != nil {
		return ReplayAnswer{}, fmt.Errorf("replay legs of envelope %d: %w", req.Of.ID, err)
	}
	return ans, nil
}

func (s *Store) replay(ctx context.Context, tx pgx.Tx, req ReplayRequest, sum []byte) (ReplayResult, error) {
	res := ReplayResult{Of: req.Of.ID, Counts: map[string]int{}}
	if err := tx.QueryRow(ctx, sqlInsertReplay,
		req.PartnerID, req.Of.ID, req.Key, req.Source, sum, req.Body).Scan(&res.ID); err != nil {
		return res, fmt.Errorf("record replay: %w", err)
	}

	// Which rows may be replayed: those rejected or held in the submission.
	wanted := make([]int, 0, len(req.Legs))
	for _, l := range req.Legs {
		wanted = append(wanted, l.Row)
	}
	orig, err := resultRowsAt(ctx, tx, req.Of.ID, wanted)
	if err != nil {
		return res, err
	}
	refused := &NotReplayableError{}
	seen := map[int]bool{}
	for _, l := range req.Legs {
		o, ok := orig[l.Row]
		switch {
		case seen[l.Row]:
			refused.Rows, refused.Reasons = append(refused.Rows, l.Row), append(refused.Reasons, "is named twice in this request")
		case !ok || l.Row < 1:
			refused.Rows, refused.Reasons = append(refused.Rows, l.Row), append(refused.Reasons, "is not a row of this submission")
		case o.Outcome != OutcomeRejected && o.Outcome != OutcomeHeld:
			refused.Rows, refused.Reasons = append(refused.Rows, l.Row), append(refused.Reasons, "was "+string(o.Outcome))
		}
		seen[l.Row] = true
	}
	if len(refused.Rows) > 0 {
		return res, refused
	}

	// Claim the legs: the upsert leaves settled legs alone, so what it
	// returns is what this replay may apply.
	keys := make([][]byte, len(req.Legs))
	for i, l := range req.Legs {
		keys[i] = LegKey(req.Of.Key, l.Row)
	}
	rows, err := tx.Query(ctx, sqlClaimReplayLegs, req.PartnerID, req.Of.ID, res.ID, keys, wanted)
	if err != nil {
		return res, fmt.Errorf("claim legs: %w", err)
	}
	claimedRows, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return res, fmt.Errorf("claim legs: %w", err)
	}
	claimed := map[int]bool{}
	for _, r := range claimedRows {
		claimed[int(r)] = true
	}

	lines := map[int]string{}
	if len(claimed) > 0 {
		if _, err := tx.Exec(ctx, stageDDL); err != nil {
			return res, fmt.Errorf("create stage: %w", err)
		}
		var buf []byte
		for _, l := range req.Legs {
			if claimed[l.Row] {
				st := l.Staged
				st.Row, st.Line = l.Row, orig[l.Row].Line
				buf = appendStageRow(buf, &st, keyHash(&st), nil)
			}
		}
		if err := copyText(ctx, tx.Conn(), "stage", stageColumns, bytes.NewReader(buf)); err != nil {
			return res, fmt.Errorf("stage legs: %w", err)
		}
		args := pgx.NamedArgs{"partner": req.PartnerID, "seq": req.Of.Seq, "env": req.Of.ID,
			"by": fmt.Sprintf("replay %d of envelope %d", res.ID, req.Of.ID), "file_rejected": false, "header": ResultHeader}
		if _, err := classifyAndApply(ctx, tx, args, req.Of.Seq != nil, false); err != nil {
			return res, err
		}
		if _, err := tx.Exec(ctx, sqlSettleReplayLegs, req.Of.ID); err != nil {
			return res, fmt.Errorf("record leg outcomes: %w", err)
		}
	}
	rows, err = tx.Query(ctx, sqlReplayLegLines,
		req.Of.ID, wanted)
	if err != nil {
		return res, fmt.Errorf("read leg outcomes: %w", err)
	}
	producer := map[int]int64{}
	for rows.Next() {
		var r int
		var line string
		var by int64
		if err := rows.Scan(&r, &line, &by); err != nil {
			rows.Close()
			return res, fmt.Errorf("read leg outcomes: %w", err)
		}
		lines[r], producer[r] = line, by
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("read leg outcomes: %w", err)
	}

	var out bytes.Buffer
	out.WriteString(ResultHeader)
	for i, l := range req.Legs {
		line := lines[l.Row] + "\n"
		out.WriteString(line)
		parsed, err := parseResultChunk([]byte(line))
		if err != nil || len(parsed) != 1 {
			return res, fmt.Errorf("leg outcome of row %d: %v", l.Row, err)
		}
		parsed[0].ReplayID = producer[l.Row]
		res.Legs = append(res.Legs, LegResult{ResultRow: parsed[0], LegKey: keys[i], Settled: !claimed[l.Row]})
		res.Counts[string(parsed[0].Outcome)]++
	}
	res.Result = out.Bytes()
	return res, nil
}

// resultRowsAt reads the given rows of an envelope's stored result, reading
// only the chunks that hold them.
func resultRowsAt(ctx context.Context, tx pgx.Tx, id int64, want []int) (map[int]ResultRow, error) {
	var chunks []int32
	for _, r := range want {
		if c := int32(r / resultRowsPerChunk); !slices.Contains(chunks, c) {
			chunks = append(chunks, c)
		}
	}
	rows, err := tx.Query(ctx, sqlResultChunksAt, id, chunks)
	if err != nil {
		return nil, fmt.Errorf("read result of envelope %d: %w", id, err)
	}
	defer rows.Close()
	out := map[int]ResultRow{}
	for rows.Next() {
		got, err := parseResultChunk(rows.RawValues()[0])
		if err != nil {
			return nil, fmt.Errorf("read result of envelope %d: %w", id, err)
		}
		for _, r := range got {
			if slices.Contains(want, r.Row) {
				out[r.Row] = r
			}
		}
	}
	return out, rows.Err()
}

// LatestLegs returns, per row of envelope id that a replay changed, the row
// of its latest outcome and the replay that produced it.
func (s *Store) LatestLegs(ctx context.Context, id int64) (map[int]LegResult, error) {
	rows, err := s.pool.Query(ctx, sqlLatestLegs, id)
	if err != nil {
		return nil, fmt.Errorf("read replayed legs of envelope %d: %w", id, err)
	}
	defer rows.Close()
	out := map[int]LegResult{}
	for rows.Next() {
		var r int
		var line string
		var l LegResult
		var by int64
		if err := rows.Scan(&r, &line, &by, &l.LegKey); err != nil {
			return nil, fmt.Errorf("read replayed legs of envelope %d: %w", id, err)
		}
		parsed, err := parseResultChunk([]byte(line + "\n"))
		if err != nil || len(parsed) != 1 {
			return nil, fmt.Errorf("replayed leg %d of envelope %d: %v", r, id, err)
		}
		l.ResultRow, l.ResultLine = parsed[0], line
		l.ReplayID = by
		out[r] = l
	}
	return out, rows.Err()
}

// WriteLatestResult writes the result of envelope id (a processed
// submission) as it stands after its leg replays: every row as stored,
// except that a replayed row shows its latest outcome, and a last column
// "replay" gives the replay that produced each row's outcome (empty: the
// submission itself). latest is what LatestLegs returned; with none, use
// WriteResult (the stored bytes).
func (s *Store) WriteLatestResult(ctx context.Context, id int64, latest map[int]LegResult, w io.Writer) error {
	rows, err := s.pool.Query(ctx, sqlResultChunks, id)
	if err != nil {
		return fmt.Errorf("read result of envelope %d: %w", id, err)
	}
	defer rows.Close()
	var buf []byte
	for rows.Next() {
		buf = buf[:0]
		err := normalize.ReadResultLines(rows.RawValues()[0], func(l normalize.ResultLine) error {
			if l.Header {
				buf = append(append(buf, l.Raw...), ",replay\n"...)
				return nil
			}
			n, _ := strconv.Atoi(l.Cells[1])
			if ll, ok := latest[n]; ok && n > 0 {
				buf = append(append(buf, ll.ResultLine...), ',')
				buf = append(strconv.AppendInt(buf, ll.ReplayID, 10), '\n')
				return nil
			}
			buf = append(append(buf, l.Raw...), ",\n"...)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read result of envelope %d: %w", id, err)
		}
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read result of envelope %d: %w", id, err)
	}
	return nil
}

// ReplayPlan is a replay file's legs and the submission they replay.
type ReplayPlan struct {
	Of   Envelope // the submission (its outcome envelope)
	Legs []Leg
}

// applyReplayFile applies a replay file (envelope env, locked, partner
// locked) as one replay of plan.Of keyed by the file's submission key: its
// result file is the replay's result. A file naming rows that may not be
// replayed is rejected whole (row_not_replayable) and applies nothing.
func (s *Store) applyReplayFile(ctx context.Context, tx pgx.Tx, env *Envelope, plan ReplayPlan) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	res, err := s.replay(ctx, sp, ReplayRequest{PartnerID: env.PartnerID, Of: plan.Of, Key: env.Key, Source: env.Source,
		Body: []byte{}, Legs: plan.Legs}, env.SHA256)
	var nr *NotReplayableError
	if errors.As(err, &nr) {
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return fmt.Errorf("roll back replay: %w", rbErr)
		}
		return s.fileResult(ctx, tx, env, normalize.ParseError{Err: normalize.CodeRowNotReplayable, Field: "row", Message: nr.Error()}, StatusProcessed)
	}
	if err != nil {
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlStoreReplayCounts, res.ID, res.Counts, res.Result); err != nil {
		return fmt.Errorf("store replay result: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlStoreReplayFileResult, env.ID, res.Result); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	env.Status, env.Counts, env.ResultSize = StatusProcessed, res.Counts, int64(len(res.Result))
	if _, err := tx.Exec(ctx, sqlCloseReplayFile,
		env.ID, env.Counts, env.ResultSize); err != nil {
		return fmt.Errorf("close envelope: %w", err)
	}
	return nil
}
