package records

import (
	"log/slog"
	"slices"
)

// Outcome is what happened to one row of a file (or one webhook change).
// These constants are the one Go spelling of the outcomes; the processing
// SQL (apply/classify.go) writes the same words, which
// apply.TestOutcomesOfSQLAreTheGoOutcomes ties to these.
type Outcome string

const (
	OutcomeCreated   Outcome = "created"
	OutcomeUpdated   Outcome = "updated"
	OutcomeUnchanged Outcome = "unchanged"
	OutcomeHeld      Outcome = "held"
	OutcomeStale     Outcome = "stale"
	OutcomeRejected  Outcome = "rejected"
)

// Outcomes are the row outcomes in the order summaries, counts and metrics
// list them.
var Outcomes = []Outcome{OutcomeCreated, OutcomeUpdated, OutcomeUnchanged, OutcomeHeld, OutcomeStale, OutcomeRejected}

// Valid reports whether o is one of the row outcomes.
func (o Outcome) Valid() bool { return slices.Contains(Outcomes, o) }

// CountsAttr gives an envelope's row counts as log attributes at the level
// of the line's own (created=3 updated=1 in text, "created":3 in JSON), in
// the order of Outcomes; zero counts are left out.
func CountsAttr(counts map[string]int) slog.Attr {
	as := make([]slog.Attr, 0, len(counts))
	for _, o := range Outcomes {
		if n := counts[string(o)]; n != 0 {
			as = append(as, slog.Int(string(o), n))
		}
	}
	return slog.Attr{Value: slog.GroupValue(as...)} // no key: inlined by the handlers
}
