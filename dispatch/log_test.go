package dispatch

import (
	"bytes"
	"encoding/json"
	"github.com/payintake/payintake/internal/syncbuf"
	"log/slog"
	"testing"
)

// TestOneLogLinePerChunk: the structured log has one line per chunk
// answered, with the batch key, the chunk key (its Idempotency-Key), the
// status and the number of lines.
func TestOneLogLinePerChunk(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 200, MaxAttempts: 5})
	e.ingest("a.csv", payroll(450, "2026-11"))
	e.lock("2026-11")
	var buf syncbuf.Buffer
	d := New(e.store.Pool(), Config{Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	if _, err := d.Dispatch(e.ctx, "acme", "2026-11"); err != nil {
		t.Fatal(err)
	}
	reqs := e.v.requests()
	var chunks []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace([]byte(buf.String())), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %s: %v", l, err)
		}
		if m["msg"] == "dispatch chunk" {
			chunks = append(chunks, m)
		}
	}
	if len(chunks) != len(reqs) || len(reqs) != 3 {
		t.Fatalf("%d chunk log lines for %d requests, want 3", len(chunks), len(reqs))
	}
	for i, m := range chunks {
		if m["batch_key"] != BatchKey("acme", "2026-11", 1) || m["chunk_key"] != reqs[i].key ||
			m["status"] != float64(200) || m["lines"] != float64(len(reqs[i].lines)) || m["level"] != "INFO" {
			t.Errorf("chunk log line %d: %v, want batch key, chunk key %s, status 200, %d lines", i, m, reqs[i].key, len(reqs[i].lines))
		}
	}
}
