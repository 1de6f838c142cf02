package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/payintake/payintake/pgserver"
	"github.com/payintake/payintake/scripts"
)

// dryRunEnv makes the install script print the commands it would run
// instead of running them (scripts/install-deps.sh reads it).
const dryRunEnv = "PAYINTAKE_INSTALL_DRY_RUN"

// installMissing brings the Debian packages a command's run needs when they
// are missing, by running the install script that .ci/run runs too
// (scripts/install-deps.sh, embedded): the PostgreSQL server binaries when
// the command starts the embedded database (profile "serve"), and the
// profiles the command asked for in g.needs (serve --demo: the clients its
// printed lines run). As root the script says what it installs and installs
// it; as another user it prints one sentence saying what to run, and the
// command exits 1. When $PAYINTAKE_PG_BINDIR is set, the PostgreSQL server
// binaries are never installed: the folder it names is used, or
// pgserver.Start says what is wrong with it.
func (g *globals) installMissing(ctx context.Context, embedded bool) error {
	profiles := g.needs
	if embedded && os.Getenv(pgserver.BinDirEnv) == "" {
		if _, err := pgserver.FindBinDir(); errors.Is(err, pgserver.ErrNoBinaries) {
			profiles = append([]string{"serve"}, profiles...)
		}
	}
	if len(profiles) == 0 {
		return nil
	}
	var wants []string
	for _, p := range profiles {
		wants = append(wants, profileWhat[p])
	}
	what := strings.Join(wants, " and ")
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fmt.Errorf("this command needs the %s, and bash, which runs the install script (scripts/install-deps.sh), is not on PATH: install bash, or what the script installs yourself (for the PostgreSQL 15 server binaries you may instead set %s to their folder)", what, pgserver.BinDirEnv)
	}
	var printed bytes.Buffer
	cmd := exec.CommandContext(ctx, bash, append([]string{"-c", scripts.InstallDeps(), "payintake"}, profiles...)...)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(g.stderr, &printed), g.stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return reportedError{code: ee.ExitCode()}
		}
		return fmt.Errorf("run the install script for the %s: %w", what, err)
	}
	if v := os.Getenv(dryRunEnv); v != "" && v != "0" && printed.Len() > 0 {
		return fmt.Errorf("%s is set: the commands above were printed, not run, and the %s may still be missing; unset it to install them", dryRunEnv, what)
	}
	return nil
}

// profileWhat says what each profile of install-deps.sh that a command may
// need holds, for the command's own errors.
var profileWhat = map[string]string{
	"serve": "PostgreSQL server binaries",
	"demo":  "clients the demo's printed lines run (sftp, curl, openssl)",
}
