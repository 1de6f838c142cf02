package main

// The command table: every command's path, arguments, summary and example,
// and the function that runs it. Dispatch and help both read it, and a
// command's flags are printed by -h from the very FlagSet it parses, so the
// help cannot drift from what a command accepts. Adding a command is adding
// a row here (and its help test comes for free: TestHelpForEveryCommand).

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

type command struct {
	path    string // "partner add": the words that name it
	args    string // what follows the path, flags aside: "ID [--name NAME]"
	summary string
	example string // one runnable command line
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commandTable() []command {
	decide := func(approve bool) func(context.Context, []string, io.Writer, io.Writer) error {
		return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return cmdReviewDecide(ctx, approve, args, stdout, stderr)
		}
	}
	reviewer := func(reset bool) func(context.Context, []string, io.Writer, io.Writer) error {
		return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return cmdReviewerAdd(ctx, args, stdout, stderr, reset)
		}
	}
	disable := func(d bool) func(context.Context, []string, io.Writer, io.Writer) error {
		return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return cmdReviewerDisable(ctx, args, stdout, stderr, d)
		}
	}
	return []command{
		{"serve", "[flags]", "run the SFTP drop zone, the HTTP API, the review console and the workers",
			"payintake serve --demo", cmdServe},
		{"version", "", "print the version, the VCS revision and the Go version this binary was built from (also: --version)",
			"payintake version", cmdVersion},
		{"migrate", "", "apply the database migrations (every command also does on start)",
			"payintake migrate --database-url postgres://payintake@db/payintake", cmdMigrate},
		{"ingest", "--partner ID [--results-dir DIR] FILE...", "process files exactly as if the partner had uploaded them",
			"payintake ingest --partner acme --results-dir out sample-files/clean-first-run.csv", cmdIngest},
		{"bench", "[--rows 10000,100000,1000000]", "measure ingest throughput against PostgreSQL's own COPY + upsert",
			"payintake bench --rows 10000", cmdBench},
		{"partner add", "ID [flags]", "add a partner with its file conventions",
			"payintake partner add acme --name 'Acme Corp' --authorized-keys acme.pub --currency USD", cmdPartnerAdd},
		{"partner set", "ID [flags]", "change settings of a partner (any flag of partner add)",
			"payintake partner set acme --date-format DD.MM.YYYY", cmdPartnerSet},
		{"partner profile set", "ID FILE", "store a new version of a partner's profile (YAML: its headers, codes and settings; see docs/profiles.md)",
			"payintake partner profile set acme acme-profile.yaml", cmdPartnerProfileSet},
		{"partner profile show", "ID [--version N] [--history]", "print a partner's profile as set, with its version, who set it and when",
			"payintake partner profile show acme", cmdPartnerProfileShow},
		{"partner profile check", "ID FILE [--profile FILE] [--format json]", "preview a sample file: the columns found, each row's values and the outcome it would get today; applies nothing",
			"payintake partner profile check acme sample.csv --profile acme-profile.yaml", cmdPartnerProfileCheck},
		{"partner list", "[--format json]", "list partners and their conventions",
			"payintake partner list --format json", cmdPartnerList},
		{"partner key", "add ID --authorized-keys FILE | revoke ID FINGERPRINT", "add or revoke a partner's SSH keys",
			"payintake partner key add acme --authorized-keys new-key.pub", cmdPartnerKey},
		{"partner token", "ID [--revoke-old]", "issue an HTTP API token (printed on the last line, shown once)",
			"payintake partner token acme", cmdPartnerToken},
		{"partner token list", "ID [--format json]", "list a partner's API tokens (prefix, created, last used; never the token)",
			"payintake partner token list acme", cmdPartnerTokenList},
		{"partner token revoke", "ID PREFIX", "revoke one API token of a partner by its prefix",
			"payintake partner token revoke acme pit_3f9a", cmdPartnerTokenRevoke},
		{"partner webhook-secret", "ID [--revoke-old]", "add a webhook signing secret (whsec_..., printed on the last line)",
			"payintake partner webhook-secret acme", cmdPartnerWebhookSecret},
		{"notify list", "[--partner ID] [--status pending|delivered|failed] [--format json]",
			"list result notifications and their delivery log (attempts, answers, errors, times)",
			"payintake notify list --partner acme --status failed", cmdNotifyList},
		{"notify redeliver", "EVENT_ID [--by NAME]", "send a notification again, with the same webhook-id and body",
			"payintake notify redeliver 42", cmdNotifyRedeliver},
		{"secrets rotate", "", "seal every webhook secret and SSH host key again under a new key (secret.key) or the first of PAYINTAKE_SECRET_KEY",
			"payintake secrets rotate", cmdSecretsRotate},
		{"hostkey list", "[--format json]", "list the SFTP door's SSH host keys (next, active, retired) and their fingerprints",
			"payintake hostkey list", cmdHostKeyList},
		{"hostkey known-hosts", "HOST[:PORT]", "print the known_hosts lines partners add for the SFTP address (active and next keys)",
			"payintake hostkey known-hosts sftp.example.com:2022", cmdHostKeyKnownHosts},
		{"hostkey rotate", "[--type ed25519,ecdsa,rsa] [--promote]", "add next SSH host keys, announced to clients after login; with --promote, serve them",
			"payintake hostkey rotate", cmdHostKeyRotate},
		{"hostkey import", "FILE [--activate]", "store a private SSH host key (OpenSSH or PEM) as the next key of its type, or serve it at once",
			"payintake hostkey import ssh_host_ed25519_key --activate", cmdHostKeyImport},
		{"pgp key create", "[--rsa] [--user-id NAME]", "make a platform OpenPGP key pair (Ed25519/Cv25519, or RSA 4096): it signs results from now on, its secret sealed like webhook secrets",
			"payintake pgp key create", cmdPGPKeyCreate},
		{"pgp key export", "[FINGERPRINT]", "print the armored public keys partners encrypt to (every active key)",
			"payintake pgp key export > payintake.asc", cmdPGPKeyExport},
		{"pgp key list", "[--format json]", "list the platform's OpenPGP keys: the newest active signs, every active one decrypts",
			"payintake pgp key list", cmdPGPKeyList},
		{"pgp key retire", "FINGERPRINT", "stop a platform OpenPGP key from decrypting and signing",
			"payintake pgp key retire 0123456789ABCDEF0123456789ABCDEF01234567", cmdPGPKeyRetire},
		{"employees import", "--partner ID FILE", "store a partner's employee mapping (CSV: employee_ref,employee_id[,name]), all or nothing",
			"payintake employees import --partner acme employees.csv", cmdEmployeesImport},
		{"employees list", "--partner ID [--format json]", "list a partner's employee mapping",
			"payintake employees list --partner acme", cmdEmployeesList},
		{"target add", "NAME --url URL [flags]", "add or change a payroll vendor's batch API",
			"payintake target add acme-payroll --url https://vendor.example/batches --token-file vendor.token", cmdTargetAdd},
		{"target list", "[--format json]", "list payroll vendor targets",
			"payintake target list", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return cmdTarget(ctx, "list", args, stdout, stderr)
			}},
		{"dispatch", "--partner ID --period PERIOD", "send a locked period's approved lines to its vendor now, in the foreground",
			"payintake dispatch --partner acme --period 2026-11", cmdDispatch},
		{"dispatch status", "[--partner ID] [--period PERIOD] [--format json]", "show dispatch runs and their dead letters",
			"payintake dispatch status --partner acme", cmdDispatchStatus},
		{"dispatch retry", "--partner ID --period PERIOD", "send dead-lettered lines again, under the same keys",
			"payintake dispatch retry --partner acme --period 2026-11", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return cmdDispatch(ctx, append([]string{"retry"}, args...), stdout, stderr)
			}},
		{"submission bytes", "ID [--output FILE]", "write a submission's file exactly as it was received (checked against its SHA-256), for audit",
			"payintake submission bytes 42 --output received.csv", cmdSubmissionBytes},
		{"records lock", "--partner ID --period PERIOD [--reason approved|paid]", "lock a pay period: its records, and no new ones",
			"payintake records lock --partner acme --period 2026-11 --reason approved", cmdRecordsLock},
		{"records unlock", "--partner ID --period PERIOD --by NAME --reason TEXT", "reopen a locked period for an authorised correction",
			"payintake records unlock --partner acme --period 2026-11 --by cfo --reason 'ticket 42'", cmdRecordsUnlock},
		{"review list", "[--partner ID] [--status S] [--format json]", "list held exceptions",
			"payintake review list --partner acme --status open", cmdReviewList},
		{"review show", "EXCEPTION_ID [--format json]", "show one exception: both sides, the differing fields, the record's history",
			"payintake review show 17", cmdReviewShow},
		{"review approve", "EXCEPTION_ID | --partner ID [filters] [--dry-run], --reviewer NAME [--note TEXT]",
			"apply held changes: one exception, or every open one of a partner matching the filters",
			"payintake review approve --partner acme --file late.csv --dry-run --reviewer alice", decide(true)},
		{"review reject", "EXCEPTION_ID | --partner ID [filters] [--dry-run], --reviewer NAME [--note TEXT]",
			"keep the locked values: one exception, or every open one of a partner matching the filters",
			"payintake review reject 17 --reviewer alice --note 'not agreed'", decide(false)},
		{"reviewer add", "NAME [--partners a,b] [--password-stdin]", "add a reviewer account (a generated password is printed once)",
			"payintake reviewer add alice --partners acme,globex", reviewer(false)},
		{"reviewer password", "NAME [--password-stdin]", "set a new password for a reviewer (ends their sessions)",
			"payintake reviewer password alice", reviewer(true)},
		{"reviewer list", "[--format json]", "list reviewer accounts",
			"payintake reviewer list", cmdReviewerList},
		{"reviewer disable", "NAME", "disable a reviewer account: their sessions and API tokens stop at once",
			"payintake reviewer disable alice", disable(true)},
		{"reviewer unlock", "NAME | --address IP", "lift the slow-down of failed logins for a reviewer or a client address",
			"payintake reviewer unlock alice", cmdReviewerUnlock},
		{"reviewer enable", "NAME", "enable a disabled reviewer account again",
			"payintake reviewer enable alice", disable(false)},
	}
}

// globalFlags are defined by newFlagSet on every command.
var globalFlags = []string{"data-dir", "database-url", "verbose", "log-format", "log-level"}

// find returns the command named by the longest prefix of args, and the rest.
func find(table []command, args []string) (command, []string, bool) {
	best, n := command{}, 0
	for _, c := range table {
		words := strings.Fields(c.path)
		if len(words) > n && len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			best, n = c, len(words)
		}
	}
	return best, args[n:], n > 0
}

// group lists the commands under a group word ("partner").
func group(table []command, word string) []command {
	var cs []command
	for _, c := range table {
		if strings.HasPrefix(c.path, word+" ") {
			cs = append(cs, c)
		}
	}
	return cs
}

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "-help" || a == "help" }

// printOverview writes `payintake help`: every command, then the global flags.
func printOverview(w io.Writer, table []command) {
	fmt.Fprint(w, "usage: payintake COMMAND [flags]\n\ncommands:\n")
	printList(w, table)
	fmt.Fprint(w, "\nevery command takes:\n")
	fs, _ := newFlagSet("", io.Discard)
	printFlags(w, fs, func(name string) bool { return slices.Contains(globalFlags, name) })
	fmt.Fprint(w, "\n`payintake COMMAND -h` shows a command's flags and an example.\n")
}

func printList(w io.Writer, cs []command) {
	tw := newTable(w)
	for _, c := range cs {
		fmt.Fprintf(tw, "  %s\t%s\n", c.path, c.summary)
	}
	_ = tw.Flush()
}

// printGroup writes `payintake GROUP -h`.
func printGroup(w io.Writer, word string, cs []command) {
	fmt.Fprintf(w, "usage: payintake %s COMMAND [flags]\n\ncommands:\n", word)
	printList(w, cs)
	fmt.Fprint(w, "\nexamples:\n")
	for _, c := range cs {
		fmt.Fprintf(w, "  %s\n", c.example)
	}
	fmt.Fprintf(w, "\n`payintake %s COMMAND -h` shows a command's flags.\n", word)
}

// printCommand writes `payintake COMMAND -h` from the FlagSet the command parses.
func printCommand(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: payintake %s %s\n\n%s\n\nflags:\n", c.path, c.args, c.summary)
	printFlags(w, fs, func(name string) bool { return !slices.Contains(globalFlags, name) })
	fmt.Fprint(w, "\nglobal flags:\n")
	printFlags(w, fs, func(name string) bool { return slices.Contains(globalFlags, name) })
	fmt.Fprintf(w, "\nexample:\n  %s\n", c.example)
	// A command that is also a group ("dispatch", "partner token") names
	// the commands under it, which its own -h would otherwise hide.
	if subs := group(commandTable(), c.path); len(subs) > 0 {
		fmt.Fprintf(w, "\nmore commands under payintake %s (each has -h):\n", c.path)
		printList(w, subs)
	}
}

func printFlags(w io.Writer, fs *flag.FlagSet, keep func(string) bool) {
	tw := newTable(w)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		if !keep(f.Name) {
			return
		}
		n++
		value, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if value != "" {
			name += " " + strings.ToUpper(value)
		}
		if f.DefValue != "" && f.DefValue != "false" && !strings.Contains(usage, "(default") {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
	})
	_ = tw.Flush()
	if n == 0 {
		fmt.Fprintln(w, "  (none)")
	}
}
