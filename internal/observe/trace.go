package observe

import "context"

// traceID is the trace of ctx, if tracing is on.
func traceID(ctx context.Context) string { return "" }
