package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestHelpForEveryCommand runs `payintake COMMAND -h` for every command of
// the table: exit 0, the usage line, every flag the command parses, and the
// example.
func TestHelpForEveryCommand(t *testing.T) {
	for _, c := range commandTable() {
		t.Run(c.path, func(t *testing.T) {
			for _, h := range []string{"-h", "--help"} {
				var out, errb bytes.Buffer
				args := append(strings.Fields(c.path), h)
				if code := run(context.Background(), args, &out, &errb); code != 0 {
					t.Fatalf("payintake %s %s: exit %d, stderr %q", c.path, h, code, errb.String())
				}
				got := out.String()
				if !strings.HasPrefix(got, "usage: payintake "+c.path+" ") || !strings.Contains(got, "\nexample:\n  payintake "+c.path) {
					t.Fatalf("payintake %s %s:\n%s", c.path, h, got)
				}
				// The flags printed are those the command parses: get its FlagSet as run does.
				var he helpError
				if err := c.run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.As(err, &he) {
					t.Fatalf("%s -h returned %v, not a help request", c.path, err)
				}
				if he.fs.Name() != c.path {
					t.Fatalf("%s parses a FlagSet named %q", c.path, he.fs.Name())
				}
				// A command that is also a group names the commands under it.
				for _, sub := range commandTable() {
					if strings.HasPrefix(sub.path, c.path+" ") && !strings.Contains(got, "\n  "+sub.path+" ") {
						t.Errorf("%s %s does not name %s:\n%s", c.path, h, sub.path, got)
					}
				}
				he.fs.VisitAll(func(f *flag.Flag) {
					if !strings.Contains(got, "\n  --"+f.Name+" ") {
						t.Errorf("%s -h does not show --%s:\n%s", c.path, f.Name, got)
					}
				})
			}
			// payintake help COMMAND says the same.
			var a, b bytes.Buffer
			run(context.Background(), append([]string{"help"}, strings.Fields(c.path)...), &a, &bytes.Buffer{})
			run(context.Background(), append(strings.Fields(c.path), "-h"), &b, &bytes.Buffer{})
			if a.String() != b.String() {
				t.Fatalf("help %s differs from %s -h", c.path, c.path)
			}
		})
	}
}

func TestHelpOverviewAndGroups(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &out, &bytes.Buffer{}); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	groups := map[string]bool{}
	for _, c := range commandTable() {
		if !strings.Contains(out.String(), "\n  "+c.path+" ") {
			t.Errorf("help does not list %s", c.path)
		}
		// Every word or words before a command's last name a group:
		// "partner" and "partner profile" of "partner profile set".
		w := strings.Fields(c.path)
		for i := 1; i < len(w); i++ {
			groups[strings.Join(w[:i], " ")] = true
		}
	}
	for _, g := range []string{"partner", "partner profile", "pgp key", "records", "review", "reviewer"} {
		if !groups[g] {
			t.Fatalf("no group %s", g)
		}
	}
	for g := range groups {
		words := strings.Fields(g)
		if _, _, ok := find(commandTable(), words); ok {
			continue // a command of its own ("dispatch"), whose -h is tested above
		}
		for _, h := range []string{"-h", "--help", "help"} {
			var o, e bytes.Buffer
			if code := run(context.Background(), append(words, h), &o, &e); code != 0 {
				t.Fatalf("%s %s: exit %d %s", g, h, code, e.String())
			}
			for _, c := range group(commandTable(), g) {
				if !strings.Contains(o.String(), "\n  "+c.path+" ") || !strings.Contains(o.String(), "\n  "+c.example+"\n") {
					t.Errorf("%s %s lacks %s or its example:\n%s", g, h, c.path, o.String())
				}
			}
		}
		var e bytes.Buffer
		if code := run(context.Background(), words, &bytes.Buffer{}, &e); code != 2 || !strings.Contains(e.String(), g+" needs a command") {
			t.Errorf("bare %s: exit %d %q", g, code, e.String())
		}
		if code := run(context.Background(), append(words, "frobnicate"), &bytes.Buffer{}, &e); code != 2 || !strings.Contains(e.String(), "unknown command \"frobnicate\"") {
			t.Errorf("%s frobnicate: exit %d", g, code)
		}
	}
	var e bytes.Buffer
	if code := run(context.Background(), nil, &bytes.Buffer{}, &e); code != 2 || !strings.Contains(e.String(), "commands:") {
		t.Fatalf("no command: exit %d %q", code, e.String())
	}
}
