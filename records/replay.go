package records

import (
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
	sqlReplayAnswer      = query("ReplayAnswer")
	sqlCompleteReplay    = query("CompleteReplay")
	sqlInsertReplay      = query("InsertReplay")
	sqlClaimReplayLegs   = query("ClaimReplayLegs")
	sqlSettleReplayLegs  = query("SettleReplayLegs")
	sqlReplayLegLines    = query("ReplayLegLines")
	sqlResultChunksAt    = query("ResultChunksAt")
	sqlLatestLegs        = query("LatestLegs")
	sqlStoreReplayCounts = query("StoreReplayCounts")
	sqlCloseReplayFile   = query("CloseReplayFile")
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
// (apply/classify.go) and gets its own outcome. A leg whose latest outcome is
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

// ReplayAnswerOf reads the stored answer to partner's replay of envelope of
// under key, and the SHA-256 of the body it answered; found is false when
// the key is new.
func ReplayAnswerOf(ctx context.Context, tx pgx.Tx, partner string, of int64, key string) (sum []byte, ans StoredAnswer, found bool, err error) {
	err = tx.QueryRow(ctx, sqlReplayAnswer, partner, of, key).Scan(&sum, &ans.Code, &ans.Format, &ans.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ans, false, nil
	}
	if err != nil {
		return nil, ans, false, fmt.Errorf("read replay key: %w", err)
	}
	return sum, ans, true, nil
}

// InsertReplay records req (its body's SHA-256 sum) and returns its id.
func InsertReplay(ctx context.Context, tx pgx.Tx, req ReplayRequest, sum []byte) (int64, error) {
	var id int64
	if err := tx.QueryRow(ctx, sqlInsertReplay,
		req.PartnerID, req.Of.ID, req.Key, req.Source, sum, req.Body).Scan(&id); err != nil {
		return 0, fmt.Errorf("record replay: %w", err)
	}
	return id, nil
}

// ClaimReplayLegs claims the legs (keys, rows) of envelope of for replay
// id: the upsert leaves settled legs alone, so the rows it returns are
// those this replay may apply.
func ClaimReplayLegs(ctx context.Context, tx pgx.Tx, partner string, of, id int64, keys [][]byte, rows []int) (map[int]bool, error) {
	r, err := tx.Query(ctx, sqlClaimReplayLegs, partner, of, id, keys, rows)
	if err != nil {
		return nil, fmt.Errorf("claim legs: %w", err)
	}
	claimedRows, err := pgx.CollectRows(r, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("claim legs: %w", err)
	}
	claimed := map[int]bool{}
	for _, r := range claimedRows {
		claimed[int(r)] = true
	}
	return claimed, nil
}

// SettledLeg is what classify decided for a leg of a replay: its row, its
// outcome and code, and its line of a result file without the line break.
type SettledLeg struct {
	Row           int
	Outcome, Code string
	Line          string
}

// SettleReplayLegs records the classified legs' outcomes and lines; a leg
// is settled unless it was rejected.
func SettleReplayLegs(ctx context.Context, tx pgx.Tx, of int64, legs []SettledLeg) error {
	rows, outcomes, codes, lines := make([]int32, len(legs)), make([]string, len(legs)), make([]string, len(legs)), make([]string, len(legs))
	for i, l := range legs {
		rows[i], outcomes[i], codes[i], lines[i] = int32(l.Row), l.Outcome, l.Code, l.Line
	}
	if _, err := tx.Exec(ctx, sqlSettleReplayLegs, of, rows, outcomes, codes, lines); err != nil {
		return fmt.Errorf("record leg outcomes: %w", err)
	}
	return nil
}

// ReplayLegLines reads the latest result line of each of the rows of
// envelope of, and the replay that wrote it.
func ReplayLegLines(ctx context.Context, tx pgx.Tx, of int64, rows []int) (lines map[int]string, producer map[int]int64, err error) {
	r, err := tx.Query(ctx, sqlReplayLegLines, of, rows)
	if err != nil {
		return nil, nil, fmt.Errorf("read leg outcomes: %w", err)
	}
	defer r.Close()
	lines, producer = map[int]string{}, map[int]int64{}
	for r.Next() {
		var n int
		var line string
		var by int64
		if err := r.Scan(&n, &line, &by); err != nil {
			return nil, nil, fmt.Errorf("read leg outcomes: %w", err)
		}
		lines[n], producer[n] = line, by
	}
	if err := r.Err(); err != nil {
		return nil, nil, fmt.Errorf("read leg outcomes: %w", err)
	}
	return lines, producer, nil
}

// CompleteReplay stores a replay's counts and result, and the door's
// answer to it, replayed verbatim to a repeat of the request.
func CompleteReplay(ctx context.Context, tx pgx.Tx, res ReplayResult, ans StoredAnswer) error {
	if _, err := tx.Exec(ctx, sqlCompleteReplay,
		res.ID, res.Counts, res.Result, ans.Code, ans.Format, ans.Body); err != nil {
		return fmt.Errorf("store replay answer: %w", err)
	}
	return nil
}

// CloseReplayFile stores the result of a replay file (envelope env) as the
// replay's and the envelope's, and closes the envelope processed.
func CloseReplayFile(ctx context.Context, tx pgx.Tx, env *Envelope, res ReplayResult) error {
	if _, err := tx.Exec(ctx, sqlStoreReplayCounts, res.ID, res.Counts, res.Result); err != nil {
		return fmt.Errorf("store replay result: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlStoreOneChunkResult, env.ID, res.Result); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	env.Status, env.Counts, env.ResultSize = StatusProcessed, res.Counts, int64(len(res.Result))
	if _, err := tx.Exec(ctx, sqlCloseReplayFile,
		env.ID, env.Counts, env.ResultSize); err != nil {
		return fmt.Errorf("close envelope: %w", err)
	}
	return nil
}

// ResultRowsAt reads the given rows of an envelope's stored result, reading
// only the chunks that hold them.
func ResultRowsAt(ctx context.Context, tx pgx.Tx, id int64, want []int) (map[int]ResultRow, error) {
	var chunks []int32
	for _, r := range want {
		if c := int32(r / ResultRowsPerChunk); !slices.Contains(chunks, c) {
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
