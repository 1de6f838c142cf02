// Command payintake is the partner file-intake server for payroll data and
// its operator tools. See docs/operations.md and docs/contract.md for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is bad usage: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// reportedError is a failure already explained on stderr (by a script the
// command ran): run exits with its code and prints nothing more.
type reportedError struct{ code int }

func (e reportedError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// run executes one command and returns the process exit code: 0 success,
// 1 failure, 2 bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, hoistFlags(args), stdout, stderr)
	var ue usageError
	var he helpError
	var re reportedError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &re):
		return re.code
	case errors.As(err, &he):
		c, _, _ := find(commandTable(), strings.Fields(he.fs.Name()))
		printCommand(stdout, c, he.fs)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "payintake: %s\n", oneLine(ue.msg))
		return 2
	default:
		fmt.Fprintf(stderr, "payintake: %s\n", oneLine(err.Error()))
		return 1
	}
}

// hoistFlags lets flags come before the command too ("payintake --data-dir
// X partner list"): leading flags are moved to the end, where every
// command's flag parsing takes them.
func hoistFlags(args []string) []string {
	var lead []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" && args[0] != "-help" {
		n := 1
		if name := strings.TrimLeft(args[0], "-"); !strings.Contains(name, "=") && name != "verbose" && len(args) > 1 {
			n = 2 // --flag value
		}
		lead = append(lead, args[:n]...)
		args = args[n:]
	}
	return append(args, lead...)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	table := commandTable()
	if len(args) == 0 {
		printOverview(stderr, table)
		return usagef("no command given")
	}
	if args[0] == "--version" || args[0] == "-version" {
		args[0] = "version"
	}
	if isHelp(args[0]) {
		if len(args) == 1 {
			printOverview(stdout, table)
			return nil
		}
		args = append(args[1:], "-h") // payintake help COMMAND
	}
	c, rest, ok := find(table, args)
	if !ok {
		// The longest group named: `partner profile -h` before `partner`.
		for n := min(len(args), 2); n >= 1; n-- {
			word := strings.Join(args[:n], " ")
			if cs := group(table, word); len(cs) > 0 {
				return groupUsage(word, args[n:], cs, stdout, stderr)
			}
		}
		return usagef("unknown command %q; `payintake help` lists the commands", args[0])
	}
	return c.run(ctx, rest, stdout, stderr)
}

// groupUsage answers a group word without a known command after it:
// `payintake partner -h` or `payintake partner profile -h` lists the group
// (exit 0); anything else is bad usage.
func groupUsage(word string, rest []string, cs []command, stdout, stderr io.Writer) error {
	if len(rest) > 0 && isHelp(rest[0]) {
		printGroup(stdout, word, cs)
		return nil
	}
	printGroup(stderr, word, cs)
	var names []string
	for _, c := range cs {
		names = append(names, strings.TrimPrefix(c.path, word+" "))
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(rest) == 0 {
		return usagef("%s needs a command: %s", word, want)
	}
	return usagef("%s: unknown command %q (want %s)", word, rest[0], want)
}
