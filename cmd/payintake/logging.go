package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"

	"github.com/payintake/payintake/internal/observe"
)

// logFlags are --log-format and --log-level, taken by every command.
type logFlags struct {
	format string
	level  slog.Level
}

func (l *logFlags) register(fs *flag.FlagSet) {
	l.format = "text"
	fs.Func("log-format", "log line format: text (key=value) or json (one JSON object a line) (default text)", func(s string) error {
		if s != "text" && s != "json" {
			return errors.New("give text or json")
		}
		l.format = s
		return nil
	})
	fs.TextVar(&l.level, "log-level", slog.LevelInfo, "least severe log lines written: debug, info, warn or error")
}

// handler writes log lines to w in the chosen format from the chosen level on.
func (l *logFlags) handler(w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: l.level}
	if l.format == "json" {
		return observe.Handler{Handler: slog.NewJSONHandler(w, opts)}
	}
	return observe.Handler{Handler: slog.NewTextHandler(w, opts)}
}
