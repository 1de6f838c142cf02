package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/payintake/payintake/pgserver"
	"github.com/payintake/payintake/scripts"
)

// dryRunEnv makes the install script print the commands it would run
// instead of running them (scripts/install-deps.sh reads it).
const dryRunEnv = "PAYINTAKE_INSTALL_DRY_RUN"

// installServerBinaries brings the PostgreSQL server binaries the embedded
// database needs when they are missing, by running the install script that
// .ci/run runs too (scripts/install-deps.sh, embedded): as root it says what
// it installs from Debian's packages and installs it; as another user it
// prints one sentence saying what to run, and the command exits 1. When
// $PAYINTAKE_PG_BINDIR is set, nothing is installed: the folder it names is
// used, or pgserver.Start says what is wrong with it.
func installServerBinaries(ctx context.Context, stderr io.Writer) error {
	if _, err := pgserver.FindBinDir(); !errors.Is(err, pgserver.ErrNoBinaries) || os.Getenv(pgserver.BinDirEnv) != "" {
		return nil
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fmt.Errorf("PostgreSQL 15 server binaries are missing and bash, which runs the install script, is not on PATH: install PostgreSQL 15 server binaries (Debian: apt-get install postgresql-15) or set %s to their folder", pgserver.BinDirEnv)
	}
	cmd := exec.CommandContext(ctx, bash, "-c", scripts.InstallDeps(), "payintake", "serve")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return reportedError{code: ee.ExitCode()}
		}
		return fmt.Errorf("run the install script for the PostgreSQL server binaries: %w", err)
	}
	if v := os.Getenv(dryRunEnv); v != "" && v != "0" {
		return fmt.Errorf("%s is set: the commands above were printed, not run, and the PostgreSQL server binaries are still missing; unset it to install them", dryRunEnv)
	}
	return nil
}
