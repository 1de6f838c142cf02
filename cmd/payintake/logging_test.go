package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestLogFlags(t *testing.T) {
	for _, args := range [][]string{{"--log-format", "xml"}, {"--log-level", "loud"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"serve"}, args...), &out, &errb); code != 2 {
			t.Errorf("serve %v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
	for _, tc := range []struct {
		args  []string
		check func(line string) bool
	}{
		{nil, func(l string) bool { return strings.HasPrefix(l, "time=") && strings.Contains(l, `level=WARN msg=w`) }},
		{[]string{"--log-format", "json", "--log-level", "warn"}, func(l string) bool {
			var m map[string]any
			return json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "w" && m["level"] == "WARN"
		}},
	} {
		fs, g := newFlagSet("x", &bytes.Buffer{})
		if _, err := parse(fs, tc.args); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		log := g.alwaysLogger(&b)
		log.Debug("d")
		if g.log.level.String() == "WARN" {
			log.Info("i")
		}
		log.Warn("w")
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != 1 || !tc.check(lines[0]) {
			t.Errorf("%v: logged %q", tc.args, b.String())
		}
	}
}
