package records

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestCountsAttrIsKeyValue(t *testing.T) {
	counts := map[string]int{"updated": 1, "created": 3, "held": 0}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("envelope processed", "envelope", 7, CountsAttr(counts), "duration", 0)
	if got, want := text.String(), `envelope=7 created=3 updated=1 duration=0`; !bytes.Contains([]byte(got), []byte(want)) {
		t.Errorf("text line %q lacks %q", got, want)
	}
	slog.New(slog.NewJSONHandler(&js, nil)).Info("envelope processed", CountsAttr(counts))
	var m map[string]any
	if err := json.Unmarshal(js.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["created"] != 3.0 || m["updated"] != 1.0 || m["held"] != nil {
		t.Errorf("JSON line %s: want created 3, updated 1, no held", js.String())
	}
}
