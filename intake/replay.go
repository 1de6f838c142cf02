package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// Replay files: leg replay by file (SFTP, ingest). A file named
// NAME.replay.EXT or NAME.replay-N.EXT (for example march.replay.csv,
// march.replay-2.csv) replays rows of the
// submission whose result is NAME.result.csv (the latest upload whose name
// without its last extension is NAME): a CSV with the canonical columns and
// a column "row" giving each row's index in that submission. The legs, their
// keys and outcomes are those of POST /v1/submissions/{id}/replays; the
// file's result, NAME.replay.result.csv, lists each leg's outcome (row and
// line of the original submission). The file's name is its idempotency key,
// as for any upload: the same bytes again get the same result, other bytes
// under the name are refused (idempotency_key_reuse).

// replayStem matches the name (without its last extension) of a replay
// file: NAME.replay, or NAME.replay-N for later rounds of corrections (each
// file name is its own idempotency key, so a new round needs a new name).
var replayStem = regexp.MustCompile(`(?i)^(.+)\.replay(-[0-9]+)?$`)

// IsReplayFile reports whether name is a replay file's name.
func IsReplayFile(name string) bool {
	return replayStem.MatchString(strings.TrimSuffix(name, path.Ext(name)))
}

// ReplayedName is the result name of the submission a replay file replays.
func ReplayedName(name string) string {
	m := replayStem.FindStringSubmatch(strings.TrimSuffix(name, path.Ext(name)))
	return records.ResultName(m[1] + ".csv")
}

func (in *Intake) replayPlan(ctx context.Context, env records.Envelope, p records.Partner, body io.Reader) (apply.Plan, error) {
	var pl apply.Plan
	reject := func(code normalize.Code, field, msg string) (apply.Plan, error) {
		return pl, &normalize.ParseError{Err: code, Field: field, Message: msg}
	}
	target := ReplayedName(env.FileName)
	rf, err := in.Store.ResultFileNamed(ctx, env.PartnerID, target)
	if errors.Is(err, records.ErrNotFound) {
		return reject(normalize.CodeReplayTargetMissing, "", fmt.Sprintf(
			"this is a replay file, but there is no %s to replay rows of; nothing was applied: name the file after the submission it corrects (NAME.replay.csv for /results/NAME.result.csv)", target))
	}
	if err != nil {
		return pl, err
	}
	of, err := in.Store.Envelope(ctx, rf.OutcomeID)
	if err != nil {
		return pl, err
	}
	if IsReplayFile(of.FileName) {
		return reject(normalize.CodeNotReplayable, "", fmt.Sprintf("%s is the result of a replay file; nothing was applied: replay the rows of the submission it corrects", target))
	}
	if of.Status != records.StatusProcessed {
		return reject(normalize.CodeNotReplayable, "", fmt.Sprintf("%s is not the result of a processed submission (status %s), so it has no rows to replay; nothing was applied", target, of.Status))
	}
	if env.Size == 0 {
		return reject(normalize.CodeEmptyFile, "", "the file is empty (0 bytes), so nothing was applied: check the export and send the file again")
	}
	s := Settings(p)
	s.Extra = []string{"row"}
	r, err := normalize.NewReader(body, s)
	if err != nil {
		return pl, err
	}
	plan := &apply.ReplayPlan{Of: of}
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return pl, err
		}
		n, perr := strconv.Atoi(strings.TrimSpace(row.Extra[0]))
		if perr != nil || n < 1 {
			return pl, &normalize.ParseError{Err: normalize.CodeInvalidRow, Field: "row", StartLine: row.Line, Line: row.Line, Message: fmt.Sprintf(
				"line %d has row %q; a replay file needs a column row giving, for each line, the index (from 1) of the row of %s it corrects; nothing was applied", row.Line, row.Extra[0], target)}
		}
		plan.Legs = append(plan.Legs, records.Leg{Row: n, Staged: apply.Stage(row)})
	}
	if len(plan.Legs) == 0 {
		return reject(normalize.CodeNoRows, "", "the replay file has a header but no rows; nothing was applied")
	}
	pl.Seq, pl.Replay = of.Seq, plan
	return pl, nil
}
