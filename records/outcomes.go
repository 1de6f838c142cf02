package records

import "log/slog"

// Outcomes are the row outcomes in the order summaries, counts and metrics
// list them.
var Outcomes = []string{"created", "updated", "unchanged", "held", "stale", "rejected"}

// CountsAttr gives an envelope's row counts as log attributes at the level
// of the line's own (created=3 updated=1 in text, "created":3 in JSON), in
// the order of Outcomes; zero counts are left out.
func CountsAttr(counts map[string]int) slog.Attr {
	as := make([]slog.Attr, 0, len(counts))
	for _, o := range Outcomes {
		if n := counts[o]; n != 0 {
			as = append(as, slog.Int(o, n))
		}
	}
	return slog.Attr{Value: slog.GroupValue(as...)} // no key: inlined by the handlers
}
