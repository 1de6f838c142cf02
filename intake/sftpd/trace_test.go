package sftpd_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/pkg/sftp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestUploadIsOneTrace uploads one file over SFTP with tracing on and
// checks the span tree: the receipt at the upload's close is the root, the
// processing in the River job joins it through the job's arguments, and the
// stages of processing are its children with their SQL statements (from
// otelpgx, beside the crash-test tracer when that is on) below them.
func TestUploadIsOneTrace(t *testing.T) {
	exp, _ := tracedUpload(t)

	// The job's span ends just after the result commits: wait for it.
	var spans tracetest.SpanStubs
	eventually.True(t, 10*time.Second, func() bool {
		spans = exp.GetSpans()
		return slices.ContainsFunc(spans, func(s tracetest.SpanStub) bool {
			return s.Name == "process" && attr(s, "payintake.applied") == "true"
		})
	}, "the process span of the applied file ended")
	byID := map[string]tracetest.SpanStub{}
	var receive, process *tracetest.SpanStub
	for i, s := range spans {
		byID[s.SpanContext.SpanID().String()] = s
		switch s.Name {
		case "receive":
			receive = &spans[i]
		case "process":
			if attr(s, "payintake.applied") == "true" {
				process = &spans[i]
			}
		}
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.Name+"<"+byID[s.Parent.SpanID().String()].Name)
	}
	if receive == nil || process == nil {
		t.Fatalf("no receive or process span: %v", names)
	}
	if receive.Parent.IsValid() || attr(*receive, "payintake.source") != "sftp" || attr(*receive, "payintake.partner") != "acme" {
		t.Errorf("receive is not the root span of an sftp upload: %+v", receive)
	}
	if process.SpanContext.TraceID() != receive.SpanContext.TraceID() || process.Parent.SpanID() != receive.SpanContext.SpanID() {
		t.Errorf("process is not a child of receive in its trace: %v", names)
	}
	children := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if s.Parent.SpanID() == process.SpanContext.SpanID() {
			children[s.Name] = s
		}
	}
	// A first file of a partner that creates mappings is read without
	// staging: a first pass of its employees (scan), then its new
	// employees onboarded and its rows copied into records (apply).
	const first = "apply"
	if got := attr(*process, "payintake.direct"); got != "true" {
		t.Errorf("process payintake.direct = %q, want true (a partner's first file): %v", got, names)
	}
	for _, stage := range []string{"stage", "classify"} {
		if _, ok := children[stage]; ok {
			t.Errorf("a first file read without staging has a %s span: %v", stage, names)
		}
	}
	for _, stage := range []string{first, "result"} {
		st, ok := children[stage]
		if !ok {
			t.Errorf("no %s span under process: %v", stage, names)
			continue
		}
		sql := 0
		for _, s := range spans {
			// A statement, or a COPY (its span names the table): a pure
			// first file's result is stored by a COPY alone.
			if s.Parent.SpanID() == st.SpanContext.SpanID() && attr(s, "db.query.text")+attr(s, "db.statement")+attr(s, "db.collection.name") != "" {
				sql++
			}
		}
		if sql == 0 {
			t.Errorf("no SQL statement or COPY span under %s: %v", stage, names)
		}
	}
	if got := attr(children["scan"], "payintake.rows"); got != "3" {
		t.Errorf("scan rows = %q, want 3: %v", got, names)
	}
	// Everything of the upload is in its one trace.
	for _, s := range spans {
		if s.SpanContext.TraceID() != receive.SpanContext.TraceID() && strings.HasPrefix(s.Name, "receive") {
			t.Errorf("a second receive trace: %v", names)
		}
	}
}

// tracedUpload uploads payroll over SFTP to a drop zone whose spans go to
// the exporter it returns, and waits for the result; the partner's client
// stays logged in.
func tracedUpload(t *testing.T) (*tracetest.InMemoryExporter, *sftp.Client) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	z := newDropZone(t, zoneOpts{tracing: tp})
	c := z.login("acme", z.partner("acme"))
	put(t, c, "/inbox/payroll-2026-11.csv", []byte(payroll))
	waitResult(t, c, "payroll-2026-11.result.csv")
	return exp, c
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// TestResubmissionTrace uploads a file, then its rows again with one
// amount changed: the second file's process span says it was compared on
// its keys (not read as a first file), with the spans docs/operations.md names below
// it: stage (the keys), compare (the one changed row to read again), then
// stage, classify and apply of that row, and result.
func TestResubmissionTrace(t *testing.T) {
	exp, c := tracedUpload(t)
	put(t, c, "/inbox/payroll-2026-11-again.csv", []byte(strings.Replace(payroll, "5200,usd", "5300,usd", 1)))
	waitResult(t, c, "payroll-2026-11-again.result.csv")

	var process *tracetest.SpanStub
	var spans tracetest.SpanStubs
	eventually.True(t, 10*time.Second, func() bool {
		spans = exp.GetSpans()
		for i, s := range spans {
			if s.Name == "process" && attr(s, "payintake.applied") == "true" && attr(s, "payintake.direct") == "false" {
				process = &spans[i]
			}
		}
		return process != nil
	}, "a process span of a file not read as a first file")
	if got := attr(*process, "payintake.compared"); got != "true" {
		t.Errorf("process payintake.compared = %q (fallback %q), want true", got, attr(*process, "payintake.compared_fallback"))
	}
	var names []string
	children := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		if s.Parent.SpanID() == process.SpanContext.SpanID() {
			children[s.Name] = append(children[s.Name], s)
			names = append(names, s.Name)
		}
	}
	if st := children["stage"]; len(st) != 2 || attr(st[0], "payintake.compared") != "true" || attr(st[0], "payintake.rows") != "3" || attr(st[1], "payintake.rows") != "1" {
		t.Errorf("stage spans %v, want the 3 rows' keys then the 1 changed row: %v", st, names)
	}
	if cmp := children["compare"]; len(cmp) != 1 || attr(cmp[0], "payintake.rows_read_again") != "1" {
		t.Errorf("compare spans %v, want one with 1 row to read again: %v", cmp, names)
	}
	for _, name := range []string{"classify", "apply", "result"} {
		if len(children[name]) != 1 {
			t.Errorf("%d %s spans under process, want 1: %v", len(children[name]), name, names)
		}
	}
	if _, ok := children["sample"]; ok {
		t.Errorf("a file of less than 1 MiB was sampled: %v", names)
	}
}
