// Command payintake is the partner file-intake server for payroll data and
// its operator tools. See the README and SPEC.md for the commands.
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

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usage = `usage: payintake COMMAND [flags]

commands:
  serve              run the SFTP drop zone, the HTTP API and the workers
  migrate            apply database migrations
  partner add|set|list|key|token|webhook-secret   (partner set ID --FLAG VALUE changes a setting)
  employees import|list   the employee mapping: employees import --partner ID FILE (employee_ref,employee_id[,name])
  ingest             process files as if uploaded: ingest --partner ID FILE...
  bench              measure ingest throughput against the database's own COPY + upsert
  records lock       lock a pay period: records lock --partner ID --period PERIOD
  records unlock     reopen a period: records unlock --partner ID --period P --by NAME --reason TEXT
  review list|show   list held exceptions, or show one with its record's history
  review approve|reject EXCEPTION_ID --reviewer NAME [--note TEXT]
  review approve|reject --partner ID [filters] [--dry-run] --reviewer NAME   decide every matching open exception
  reviewer add|list|password|disable|enable|unlock   reviewer accounts for the review console and API
  target add|list    payroll vendors: target add NAME --url URL [--token-file FILE] [--rate-limit 10] ...
  dispatch           send a locked period to its vendor now: dispatch --partner ID --period P
  dispatch status|retry   runs and dead letters; retry sends dead letters again under the same keys

every command takes --data-dir DIR (PAYINTAKE_DATA_DIR), --database-url URL (PAYINTAKE_DATABASE_URL),
--log-format text|json and --log-level debug|info|warn|error (serve logs always; other commands with --verbose)
`

// run executes one command and returns the process exit code: 0 success,
// 1 failure, 2 bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, hoistFlags(args), stdout, stderr)
	var ue usageError
	var he helpError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &he):
		fmt.Fprintf(stdout, "usage: payintake %s [flags]\n", he.fs.Name())
		he.fs.SetOutput(stdout)
		he.fs.PrintDefaults()
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
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	cmd, rest := args[0], args[1:]
	sub := func() (string, []string) {
		if len(rest) == 0 {
			return "", nil
		}
		return rest[0], rest[1:]
	}
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "serve":
		return cmdServe(ctx, rest, stdout, stderr)
	case "migrate":
		return cmdMigrate(ctx, rest, stdout, stderr)
	case "ingest":
		return cmdIngest(ctx, rest, stdout, stderr)
	case "bench":
		return cmdBench(ctx, rest, stdout, stderr)
	case "partner":
		s, r := sub()
		switch s {
		case "add":
			return cmdPartnerAdd(ctx, r, stdout, stderr)
		case "set":
			return cmdPartnerSet(ctx, r, stdout, stderr)
		case "list":
			return cmdPartnerList(ctx, r, stdout, stderr)
		case "key":
			return cmdPartnerKey(ctx, r, stdout, stderr)
		case "token":
			return cmdPartnerToken(ctx, r, stdout, stderr)
		case "webhook-secret":
			return cmdPartnerWebhookSecret(ctx, r, stdout, stderr)
		}
		return usagef("partner: unknown command %q (want add, set, list, key, token or webhook-secret)", s)
	case "records":
		s, r := sub()
		if s == "lock" {
			return cmdRecordsLock(ctx, r, stdout, stderr)
		}
		if s == "unlock" {
			return cmdRecordsUnlock(ctx, r, stdout, stderr)
		}
		return usagef("records: unknown command %q (want lock or unlock)", s)
	case "employees":
		s, r := sub()
		return cmdEmployees(ctx, s, r, stdout, stderr)
	case "review":
		s, r := sub()
		return cmdReview(ctx, s, r, stdout, stderr)
	case "reviewer":
		s, r := sub()
		return cmdReviewer(ctx, s, r, stdout, stderr)
	case "target":
		s, r := sub()
		return cmdTarget(ctx, s, r, stdout, stderr)
	case "dispatch":
		return cmdDispatch(ctx, rest, stdout, stderr)
	}
	return usagef("unknown command %q; `payintake help` lists the commands", cmd)
}
